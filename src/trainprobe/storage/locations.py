"""Where every file of a tensor output lives: the one source of path and file-name templates.

The layout is smdebug's, so that either tool reads the other's output::

    <out_dir>/events/<step:012>/<step:012>_<worker>.tfevents
    <out_dir>/index/<step//1000:09>/<step:012>_<worker>.json
    <out_dir>/collections/000000000/<worker>_collections.json
    <out_dir>/training_job_end.ts
    <out_dir>/tensorboard/<MODE>/<step:012>_<pid>_<hostname>.tfevents
    <out_dir>/scalars/<worker>/<first:012>-<last:012>.chunk   (trainprobe's alone)

Steps in paths are always global steps. Paths inside an index file (``event_file_name``) are
relative to ``out_dir`` and always use ``/``.
"""

from __future__ import annotations

import posixpath
import re

from trainprobe.storage.modes import ModeKeys

__all__ = [
    "COLLECTIONS_DIR",
    "EVENTS_DIR",
    "INDEX_DIR",
    "SCALARS_DIR",
    "TRAINING_END_FILE",
    "collections_file",
    "event_file",
    "index_dir_for_step",
    "index_file",
    "join",
    "parse_collections_file_name",
    "parse_index_file_name",
    "scalar_chunks_dir",
    "tensorboard_file",
]

EVENTS_DIR = "events"
INDEX_DIR = "index"
COLLECTIONS_DIR = "collections/000000000"
TRAINING_END_FILE = "training_job_end.ts"
TENSORBOARD_DIR = "tensorboard"
SCALARS_DIR = "scalars"

_INDEX_NAME = re.compile(r"^(\d{12})_(.+)\.json$")
_COLLECTIONS_NAME = re.compile(r"^(.+)_collections\.json$")


def join(out_dir: str, relative: str) -> str:
    """``relative`` (a ``/``-separated path from this module) placed under ``out_dir``."""
    if not out_dir:
        return relative
    return out_dir.rstrip("/") + "/" + relative


def event_file(step: int, worker: str) -> str:
    """The event file of one (global step, worker), relative to the output directory."""
    return f"{EVENTS_DIR}/{step:012d}/{step:012d}_{worker}.tfevents"


def index_dir_for_step(step: int) -> str:
    """The index sub-directory holding a step's index files: one per thousand steps."""
    return f"{INDEX_DIR}/{step // 1000:09d}"


def index_file(step: int, worker: str) -> str:
    """The index file of one (global step, worker), relative to the output directory."""
    return f"{index_dir_for_step(step)}/{step:012d}_{worker}.json"


def collections_file(worker: str) -> str:
    """The collections file a worker writes, relative to the output directory."""
    return f"{COLLECTIONS_DIR}/{worker}_collections.json"


def tensorboard_file(mode: ModeKeys, step: int, pid: int, hostname: str) -> str:
    """A TensorBoard event file for one mode and step, relative to the output directory."""
    return f"{TENSORBOARD_DIR}/{mode.name}/{step:012d}_{pid}_{hostname}.tfevents"


def scalar_chunks_dir(worker: str) -> str:
    """Where a worker keeps the scalars it wrote as chunks (``storage.written_scalars``),
    relative to the output directory. smdebug never looks there."""
    return f"{SCALARS_DIR}/{worker}"


def parse_index_file_name(path: str) -> tuple[int, str] | None:
    """(global step, worker) of an index file path, or None when it is not an index file."""
    match = _INDEX_NAME.match(posixpath.basename(path))
    if match is None:
        return None
    return int(match.group(1)), match.group(2)


def parse_collections_file_name(path: str) -> str | None:
    """The worker that wrote a collections file, or None when it is not one."""
    match = _COLLECTIONS_NAME.match(posixpath.basename(path))
    return match.group(1) if match else None
