"""ListTrainingJobs: the jobs, filtered, sorted and in pages, in SageMaker's shape.

Filters: NameContains (ignoring case), StatusEquals, CreationTimeAfter / Before and
LastModifiedTimeAfter / Before (datetimes, or seconds since the epoch, or ISO 8601 text).
SortBy is CreationTime (the default), Name or Status; SortOrder Ascending (the default) or
Descending. MaxResults is 1 to 100 (default 10). A page that is not the last carries a
NextToken for the next; pages are taken from the jobs that existed when the first page was
asked for, so jobs created meanwhile do not shift them. Warm pools and training plans do not
exist locally: filtering on them finds nothing.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import json
import time
from collections.abc import Mapping
from typing import Any

from trainprobe.config.errors import ConfigError, closest
from trainprobe.config.json_bounds import embedded_json
from trainprobe.config.request_shapes import Text
from trainprobe.config.statuses import TrainingJobStatus
from trainprobe.jobs.operations.describe import timestamp
from trainprobe.jobs.runner.liveness import settle
from trainprobe.jobs.store import JobRecord, JobStore

__all__ = ["list_training_jobs"]

STATUSES = tuple(TrainingJobStatus)
_SORT_COLUMNS = {"CreationTime": "creation_time", "Name": "name", "Status": "status"}
_SORT_ORDERS = ("Ascending", "Descending")
_MEMBERS = (
    "NextToken",
    "MaxResults",
    "CreationTimeAfter",
    "CreationTimeBefore",
    "LastModifiedTimeAfter",
    "LastModifiedTimeBefore",
    "NameContains",
    "StatusEquals",
    "SortBy",
    "SortOrder",
    "WarmPoolStatusEquals",
    "TrainingPlanArnEquals",
)
_NAME_CONTAINS = Text(0, 63, r"[a-zA-Z0-9\-]*", "letters, digits and hyphens (part of a job name)")
_TIME_FILTERS = {
    "CreationTimeAfter": "creation_time > ?",
    "CreationTimeBefore": "creation_time < ?",
    "LastModifiedTimeAfter": "last_modified_time > ?",
    "LastModifiedTimeBefore": "last_modified_time < ?",
}


def _seconds(field: str, value: object) -> float:
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.timezone.utc)
        return value.timestamp()
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return _seconds(field, datetime.datetime.fromisoformat(value.replace("Z", "+00:00")))
        except ValueError:
            pass
    raise ConfigError(field, value, "a time: a datetime, seconds since the epoch, or ISO 8601")


def _choice(request: Mapping[str, Any], key: str, allowed: tuple[str, ...], default: str) -> str:
    value = request.get(key, default)
    if value not in allowed:
        raise ConfigError(
            key, value, f"one of {', '.join(allowed)}", suggestion=closest(str(value), allowed)
        )
    return str(value)


def _token(offset: int, snapshot: float) -> str:
    data = json.dumps({"offset": offset, "snapshot": snapshot}).encode()
    return base64.urlsafe_b64encode(data).decode()


def _read_token(token: object) -> tuple[int, float]:
    try:
        text = base64.urlsafe_b64decode(str(token).encode()).decode()
        data = embedded_json(text, "NextToken")  # within bounds: never a RecursionError
        return int(data["offset"]), float(data["snapshot"])
    except (ValueError, KeyError, TypeError, binascii.Error):
        raise ConfigError(
            "NextToken", token, "a NextToken from the previous page's response"
        ) from None


def _summary(record: JobRecord) -> dict[str, Any]:
    summary: dict[str, Any] = {
        "TrainingJobName": record.name,
        "TrainingJobArn": record.arn,
        "CreationTime": timestamp(record.creation_time),
    }
    if record.training_end_time is not None:
        summary["TrainingEndTime"] = timestamp(record.training_end_time)
    summary["LastModifiedTime"] = timestamp(record.last_modified_time)
    summary["TrainingJobStatus"] = record.status
    summary["SecondaryStatus"] = record.secondary_status
    return summary


def list_training_jobs(
    request: Mapping[str, Any] | None = None, *, store: JobStore | None = None
) -> dict[str, Any]:
    """SageMaker's ListTrainingJobs (see the module docstring):
    ``{"TrainingJobSummaries": [...], "NextToken": ...}``."""
    request = request or {}
    store = store if store is not None else JobStore()
    for key in request:
        if key not in _MEMBERS:
            raise ConfigError(
                key,
                request[key],
                "a member of ListTrainingJobs' request",
                suggestion=closest(key, _MEMBERS),
            )
    limit = request.get("MaxResults", 10)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 100:
        raise ConfigError("MaxResults", limit, "a whole number from 1 to 100")
    sort_by = _choice(request, "SortBy", tuple(_SORT_COLUMNS), "CreationTime")
    order = _choice(request, "SortOrder", _SORT_ORDERS, "Ascending")
    offset, snapshot = 0, time.time()
    if request.get("NextToken"):
        offset, snapshot = _read_token(request["NextToken"])
    where: list[tuple[str, object]] = [("creation_time <= ?", snapshot)]
    for key, condition in _TIME_FILTERS.items():
        if request.get(key) is not None:
            where.append((condition, _seconds(key, request[key])))
    if request.get("NameContains") is not None:
        problems = _NAME_CONTAINS.problems(request["NameContains"], "NameContains")
        if problems:
            raise problems[0]
        where.append(("instr(lower(name), ?) > 0", str(request["NameContains"]).lower()))
    if request.get("WarmPoolStatusEquals") or request.get("TrainingPlanArnEquals"):
        where.append(("0 = ?", 1))
    status = request.get("StatusEquals")
    if status is not None:
        _choice(request, "StatusEquals", STATUSES, "")
        # A job whose runner died is settled first, so filter on status after settling.
    records = store.query(
        where=where,
        order_by=_SORT_COLUMNS[sort_by],
        descending=order == "Descending",
    )
    records = [settle(store, record) if not record.finished else record for record in records]
    if status is not None:
        records = [record for record in records if record.status == status]
    page = records[offset : offset + limit]
    response: dict[str, Any] = {"TrainingJobSummaries": [_summary(record) for record in page]}
    if offset + limit < len(records):
        response["NextToken"] = _token(offset + limit, snapshot)
    return response
