"""The hook's cost, one file per worker: its time per step, its waits on the device and the bytes
it wrote.

::

    <out_dir>/hook-overhead/<worker>.json

``out_dir`` is the hook's output directory (a job's ``debug-output/``). The file is one line of
JSON, totals first, then the seconds of every step as two parallel lists::

    {"version": 1, "worker": "worker_0", "steps": 3, "total_seconds": 0.000913,
     "mean_seconds_per_step": 0.000304, "bytes_written": 5120, "blocked_seconds": 0.0,
     "step": [0, 1, 2], "seconds": [0.000512, 0.000201, 0.0002]}

When the hook stopped saving (a full disk, an unwritable directory: its writer failed), the
header also says where and why, ``"saving_stopped": {"step": 41, "error": "No space left on
device"}``, and ``saving_stopped_message`` puts it in words for the job's description, its live
view, its report and its rules' statuses. smdebug reads nothing under ``hook-overhead/``.

A hook that waited for the device (a GPU, to read a step's non-finite flags) counts those waits
apart: the header's ``device_wait_seconds`` is their total, and ``device_wait`` lists them per
step beside ``seconds`` (left out when the hook never waited, as on a CPU). ``seconds`` never
includes them: while the hook waits, the device runs the training's own work. Files written before
the waits were counted apart have neither; their ``seconds`` include any wait.

Seconds are rounded to the microsecond, which keeps 100 000 steps near 1.5 MB. The file is
replaced atomically, so a reader sees the previous version or the new one; a file that is not
one of these (cut short, corrupt) is skipped with a warning, never an error, since the report
that reads it must not fail on it.
"""

from __future__ import annotations

import json
import logging
import math
import re
from dataclasses import dataclass, field
from typing import Any

from trainprobe.config.errors import ConfigError
from trainprobe.storage import files, locations

__all__ = [
    "FORMAT_VERSION",
    "HOOK_OVERHEAD_DIR",
    "SAVING_STOPPED",
    "HookOverheadRecord",
    "decode_hook_overhead",
    "encode_hook_overhead",
    "hook_overhead_file",
    "read_hook_overhead",
    "saving_stopped_message",
    "write_hook_overhead",
]

log = logging.getLogger(__name__)

HOOK_OVERHEAD_DIR = "hook-overhead"
SAVING_STOPPED = "Debugger stopped saving"
"""How every message about a hook that stopped saving begins."""
FORMAT_VERSION = 1
_SUFFIX = ".json"
_DECIMALS = 6  # a microsecond
_RANKED_WORKER = re.compile(r"^(.*?)(\d+)$")


@dataclass(frozen=True)
class HookOverheadRecord:
    """What the hook of one worker cost the training, as its file holds it.

    ``step`` and ``seconds`` are parallel: the hook spent ``seconds[i]`` of the training thread's
    time in global step ``step[i]``, apart from waiting for the device, which ``device_wait[i]``
    holds (an empty list: the hook never waited). ``bytes_written`` counts every file the hook
    wrote, this one included; ``blocked_seconds`` is how long the training waited for the writer
    to catch up.
    """

    worker: str
    steps: int
    total_seconds: float
    mean_seconds_per_step: float
    bytes_written: int
    blocked_seconds: float
    step: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    device_wait_seconds: float = 0.0
    """The hook's waits for the device over all steps; not part of ``total_seconds``."""
    device_wait: list[float] = field(default_factory=list)
    stopped_step: int | None = None
    """The step whose saving failed, after which the hook saved nothing more; None: it did not
    stop (or it stopped before its first step, then ``stopped_error`` alone is set)."""
    stopped_error: str | None = None
    """Why the hook stopped saving (``No space left on device``); None while it saves."""


def hook_overhead_file(worker: str) -> str:
    """The overhead file of ``worker``, relative to the hook's output directory."""
    if not worker or "/" in worker or "\\" in worker or worker in (".", ".."):
        raise ConfigError("worker", worker, "a worker name usable as a file name (worker_<rank>)")
    return f"{HOOK_OVERHEAD_DIR}/{worker}{_SUFFIX}"


def _rounded(seconds: float) -> float:
    return round(float(seconds), _DECIMALS)


def _header(record: HookOverheadRecord, bytes_written: int) -> bytes:
    head = {
        "version": FORMAT_VERSION,
        "worker": record.worker,
        "steps": record.steps,
        "total_seconds": _rounded(record.total_seconds),
        "mean_seconds_per_step": _rounded(record.mean_seconds_per_step),
        "bytes_written": bytes_written,
        "blocked_seconds": _rounded(record.blocked_seconds),
    }
    if record.device_wait:
        head["device_wait_seconds"] = _rounded(record.device_wait_seconds)
    if record.stopped_error is not None:
        head["saving_stopped"] = {"step": record.stopped_step, "error": record.stopped_error}
    # Without its closing brace: the lists follow.
    return json.dumps(head, separators=(",", ":"), allow_nan=False).encode()[:-1]


def _seconds_list(seconds: list[float]) -> bytes:
    rounded = [_rounded(value) for value in seconds]
    return json.dumps(rounded, separators=(",", ":"), allow_nan=False).encode()


def encode_hook_overhead(record: HookOverheadRecord, *, count_itself: bool = False) -> bytes:
    """The file's bytes for ``record``.

    With ``count_itself``, ``bytes_written`` is raised by the size of these very bytes, for a
    writer whose count must include the overhead file it is writing (the hook's does).
    """
    if len(record.step) != len(record.seconds):
        raise ConfigError(
            "seconds",
            f"{len(record.seconds)} values for {len(record.step)} steps",
            "one value per step (step and seconds are parallel lists)",
        )
    if record.device_wait and len(record.device_wait) != len(record.step):
        raise ConfigError(
            "device_wait",
            f"{len(record.device_wait)} values for {len(record.step)} steps",
            "one value per step, or none (the hook never waited for the device)",
        )
    waits = b""
    if record.device_wait:
        waits = b',"device_wait":' + _seconds_list(record.device_wait)
    tail = b"".join(
        (
            b',"step":',
            json.dumps([int(step) for step in record.step], separators=(",", ":")).encode(),
            b',"seconds":',
            _seconds_list(record.seconds),
            waits,
            b"}\n",
        )
    )
    own = 0
    while True:
        data = _header(record, record.bytes_written + own) + tail
        # The size only grows with the count, so this settles within a digit or two.
        if not count_itself or len(data) == own:
            return data
        own = len(data)


def write_hook_overhead(out_dir: str, data: bytes, worker: str) -> int:
    """Replace ``worker``'s overhead file under ``out_dir`` atomically with ``data``
    (from ``encode_hook_overhead``); returns its size in bytes."""
    return files.write_atomic(locations.join(out_dir, hook_overhead_file(worker)), data)


def _number(document: dict[str, Any], name: str) -> float:
    value = document.get(name)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name} is {value!r}; expected a finite number")
    return float(value)


def _count(document: dict[str, Any], name: str) -> int:
    value = document.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} is {value!r}; expected a whole number, 0 or more")
    return value


def _list_of(document: dict[str, Any], name: str, kind: type | tuple[type, ...]) -> list[Any]:
    value = document.get(name)
    if not isinstance(value, list) or not all(
        isinstance(item, kind) and not isinstance(item, bool) for item in value
    ):
        raise ValueError(f"{name} is not a list of {'numbers' if kind is not int else 'steps'}")
    return value


def decode_hook_overhead(data: bytes) -> HookOverheadRecord:
    """The record an overhead file holds. Raises ValueError (naming the field) when it is not
    one; later versions' extra fields are ignored."""
    document = json.loads(data)
    if not isinstance(document, dict):
        raise ValueError("not a JSON object")
    worker = document.get("worker")
    if not isinstance(worker, str) or not worker:
        raise ValueError(f"worker is {worker!r}; expected a worker name")
    step = [int(value) for value in _list_of(document, "step", int)]
    seconds = [float(value) for value in _list_of(document, "seconds", (int, float))]
    if not all(math.isfinite(value) for value in seconds):
        raise ValueError("seconds holds a value that is not a finite number")
    if len(step) != len(seconds):
        raise ValueError(f"step has {len(step)} values but seconds has {len(seconds)}")
    device_wait: list[float] = []
    if "device_wait" in document:
        device_wait = [float(value) for value in _list_of(document, "device_wait", (int, float))]
        if len(device_wait) != len(step) or not all(math.isfinite(v) for v in device_wait):
            raise ValueError("device_wait is not one finite number per step")
    stopped = document.get("saving_stopped")
    stopped_step = stopped_error = None
    if isinstance(stopped, dict) and isinstance(stopped.get("error"), str):
        stopped_error = stopped["error"]
        step_value = stopped.get("step")
        if isinstance(step_value, int) and not isinstance(step_value, bool):
            stopped_step = step_value
    return HookOverheadRecord(
        worker=worker,
        stopped_step=stopped_step,
        stopped_error=stopped_error,
        steps=_count(document, "steps"),
        total_seconds=_number(document, "total_seconds"),
        mean_seconds_per_step=_number(document, "mean_seconds_per_step"),
        bytes_written=_count(document, "bytes_written"),
        blocked_seconds=_number(document, "blocked_seconds"),
        step=step,
        seconds=seconds,
        device_wait_seconds=(
            _number(document, "device_wait_seconds") if "device_wait_seconds" in document else 0.0
        ),
        device_wait=device_wait,
    )


def _worker_order(record: HookOverheadRecord) -> tuple[str, int, str]:
    # worker_2 before worker_10
    match = _RANKED_WORKER.match(record.worker)
    if match is None:
        return (record.worker, -1, "")
    return (match.group(1), int(match.group(2)), record.worker)


def read_hook_overhead(debug_output_dir: str) -> list[HookOverheadRecord]:
    """One record per worker that wrote an overhead file under ``debug_output_dir``, by rank.

    Empty when there is none (no directory: an older run, or a hook that never wrote one). A
    file that cannot be read as one is skipped with a warning.
    """
    root = locations.join(debug_output_dir, HOOK_OVERHEAD_DIR)
    found: list[HookOverheadRecord] = []
    for name in files.list_files(root, _SUFFIX):
        if "/" in name:
            continue
        path = locations.join(root, name)
        try:
            found.append(decode_hook_overhead(files.read_bytes(path)))
        except FileNotFoundError:
            continue  # removed since it was listed
        except (OSError, ValueError) as error:
            log.warning("skipping %s, which is not a hook overhead file: %s", path, error)
    found.sort(key=_worker_order)
    return found


def saving_stopped_message(records: list[HookOverheadRecord]) -> str | None:
    """Where and why the hook stopped saving, in words (``Debugger stopped saving at step 41: No
    space left on device``; naming the worker when there are several); None when it saved all
    along."""
    stopped = [record for record in records if record.stopped_error is not None]
    if not stopped:
        return None
    parts = []
    for record in stopped:
        where = "" if record.stopped_step is None else f" at step {record.stopped_step}"
        who = f" ({record.worker})" if len(records) > 1 else ""
        parts.append(f"{SAVING_STOPPED}{where}{who}: {record.stopped_error}")
    return "; ".join(parts)
