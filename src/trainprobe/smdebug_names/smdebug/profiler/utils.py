"""``smdebug.profiler.utils``: ``str2bool`` and the time conversions notebooks use."""

from __future__ import annotations

from datetime import datetime, timezone
from enum import Enum

__all__ = [
    "TimeUnits",
    "convert_utc_datetime_to_microseconds",
    "convert_utc_datetime_to_nanoseconds",
    "convert_utc_timestamp_to_microseconds",
    "convert_utc_timestamp_to_nanoseconds",
    "convert_utc_timestamp_to_seconds",
    "str2bool",
    "us_since_epoch_to_human_readable_time",
]

_TRUE = ("y", "yes", "t", "true", "on", "1")
_FALSE = ("n", "no", "f", "false", "off", "0")


class TimeUnits(Enum):
    """The unit a timestamp is given in."""

    SECONDS = 1
    MILLISECONDS = 2
    MICROSECONDS = 3
    NANOSECONDS = 4


_PER_SECOND = {
    TimeUnits.SECONDS: 1,
    TimeUnits.MILLISECONDS: 10**3,
    TimeUnits.MICROSECONDS: 10**6,
    TimeUnits.NANOSECONDS: 10**9,
}


def str2bool(v: str | bool) -> bool:
    """True for "yes", "true", "on", "1" (any case), False for "no", "false", "off", "0"."""
    if isinstance(v, bool):
        return v
    text = str(v).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"invalid truth value {v!r}: expected one of {', '.join(_TRUE + _FALSE)}")


def _convert(timestamp: float, unit: TimeUnits, per_second: int) -> int:
    return int(timestamp * per_second / _PER_SECOND[unit])


def convert_utc_timestamp_to_nanoseconds(
    timestamp: float, unit: TimeUnits = TimeUnits.MICROSECONDS
) -> int:
    """``timestamp`` (in ``unit``) in nanoseconds."""
    return _convert(timestamp, unit, 10**9)


def convert_utc_timestamp_to_microseconds(
    timestamp: float, unit: TimeUnits = TimeUnits.MICROSECONDS
) -> int:
    """``timestamp`` (in ``unit``) in microseconds."""
    return _convert(timestamp, unit, 10**6)


def convert_utc_timestamp_to_seconds(
    timestamp: float, unit: TimeUnits = TimeUnits.MICROSECONDS
) -> int:
    """``timestamp`` (in ``unit``) in whole seconds."""
    return _convert(timestamp, unit, 1)


def convert_utc_datetime_to_nanoseconds(timestamp_datetime: datetime) -> int:
    """A datetime in nanoseconds since the epoch (a naive one is local time, as in smdebug)."""
    return int(timestamp_datetime.timestamp() * 10**9)


def convert_utc_datetime_to_microseconds(timestamp_datetime: datetime) -> int:
    """A datetime in microseconds since the epoch (a naive one is local time, as in smdebug)."""
    return int(timestamp_datetime.timestamp() * 10**6)


def us_since_epoch_to_human_readable_time(us_since_epoch: float) -> str:
    """Microseconds since the epoch as ``YYYY-MM-DDTHH:MM:SS:ffffff`` (UTC)."""
    moment = datetime.fromtimestamp(us_since_epoch / 1e6, tz=timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S:%f")
