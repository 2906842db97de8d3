"""Reading a tensor output back: listing and reading index and collections files, and fetching
tensor records by (start, length).

Only the records asked for are read and decoded: an index file says where each record lies,
so one ranged read fetches one tensor, checked against the checksum the index gives for it.

Nothing a file names is followed outside the output: an index whose ``event_file_name`` leaves
``out_dir`` (``..``, an absolute path, a symbolic link pointing out) is refused as damaged.
"""

from __future__ import annotations

import functools
import os
import stat
from collections.abc import Iterable, Iterator, Sequence

import numpy as np

from trainprobe.storage import files, locations
from trainprobe.storage.collections_file import CollectionsFile, read_collections_file
from trainprobe.storage.index_file import (
    IndexFileError,
    StepIndex,
    check_relative_path,
    decode_index,
)
from trainprobe.storage.scalar_events import decode_alone, record_values, scalar_values
from trainprobe.storage.tensor_event import (
    TensorEvent,
    decode_tensor_event,
    decode_tensor_value,
)
from trainprobe.storage.tfrecord import unframe

__all__ = [
    "CollectionsFile",
    "has_collections",
    "list_collections_files",
    "list_index_files",
    "read_collections_file",
    "read_step_index",
    "read_step_indexes",
    "read_tensor_records",
    "read_tensor_value",
    "read_values_of_files",
    "step_written_at",
]


def list_index_files(out_dir: str, from_step: int | None = None) -> list[str]:
    """Every finished index file under ``out_dir``, relative to it, sorted by step then worker.

    With ``from_step``, only those of steps ``from_step`` and later: a reader following a live
    output passes the step before which it has seen everything, and on object storage only the
    keys from there on are listed.
    """
    index_root = locations.join(out_dir, locations.INDEX_DIR)
    start_after = None
    if from_step is not None:
        # Sorts just before every index file of ``from_step`` (their names go on with "_").
        start_after = locations.index_file(from_step, "")[len(locations.INDEX_DIR) + 1 : -6]
    names = files.list_files_after(index_root, ".json", start_after)
    return [
        f"{locations.INDEX_DIR}/{name}"
        for name in names
        if locations.parse_index_file_name(name) is not None
    ]


def list_collections_files(out_dir: str) -> list[str]:
    """Every finished collections file under ``out_dir``, relative to it."""
    root = locations.join(out_dir, locations.COLLECTIONS_DIR)
    return [
        f"{locations.COLLECTIONS_DIR}/{name}"
        for name in files.list_files(root, "_collections.json")
        if "/" not in name
    ]


def has_collections(out_dir: str, names: Iterable[str]) -> bool:
    """Whether a collections file under ``out_dir`` declares every collection of ``names``
    (how a reader tells which hook wrote the tensors); False where none can be read."""
    wanted = set(names)
    try:
        for name in list_collections_files(out_dir):
            if set(read_collections_file(out_dir, name).collections) >= wanted:
                return True
    except (OSError, ValueError):
        return False
    return False


def read_step_index(out_dir: str, relative_path: str) -> StepIndex:
    """Read one index file (``relative_path`` as listed by ``list_index_files``).

    Raises IndexFileError (a ValueError) when the file is not a valid index file or names an
    event file outside ``out_dir``.
    """
    parsed = locations.parse_index_file_name(relative_path)
    if parsed is None:
        raise IndexFileError(f"{relative_path} is not named like an index file")
    step, worker = parsed
    index = decode_index(files.read_bytes(locations.join(out_dir, relative_path)), step, worker)
    if index.event_file is not None:
        _event_path(out_dir, index.event_file)
    return index


def read_step_indexes(
    out_dir: str, relative_paths: Sequence[str]
) -> Iterator[tuple[str, StepIndex | ValueError | OSError]]:
    """Each index file of ``relative_paths`` (as listed by ``list_index_files``), in order, with
    its content or the error reading it gave.

    Local files are read one by one as they are asked for; objects (a URL) are fetched
    together, concurrently, since one request's latency would otherwise add up per step.
    """
    if not files.is_url(out_dir):
        for path in relative_paths:
            try:
                yield path, read_step_index(out_dir, path)
            except (ValueError, OSError) as error:
                yield path, error
        return
    full = [locations.join(out_dir, path) for path in relative_paths]
    contents = files.read_many(full)
    for path, content in zip(relative_paths, contents, strict=True):
        if isinstance(content, OSError):
            yield path, content
            continue
        step, worker = locations.parse_index_file_name(path) or (-1, "")
        try:
            index = decode_index(content, step, worker)
            if index.event_file is not None:
                _event_path(out_dir, index.event_file)
        except ValueError as error:
            yield path, error
        else:
            yield path, index


def read_tensor_records(
    out_dir: str,
    event_file: str,
    ranges: Sequence[tuple[int, int]],
    reader: files.RangeReader | None = None,
    checksums: Sequence[int | None] | None = None,
) -> list[TensorEvent]:
    """Decode the records at each (start, length) of an event file, reading only those bytes.

    ``event_file`` is relative to ``out_dir`` (as in an index file); ``reader`` keeps files
    open between calls; ``checksums`` (from the index, one per range, None where there is none)
    are checked. Raises FileNotFoundError when the event file is missing, EOFError when it is
    shorter than a range, IndexFileError when ``event_file`` leaves ``out_dir``, and ValueError
    (RecordError, RecordChecksumError, WireError) when a record is damaged.
    """
    path = _event_path(out_dir, event_file)
    buffers = (reader or files).read_ranges(path, ranges)
    if checksums is None:
        checksums = [None] * len(buffers)
    return [
        decode_tensor_event(unframe(buffer, checksum=checksum))
        for buffer, checksum in zip(buffers, checksums, strict=True)
    ]


def read_tensor_values(
    out_dir: str,
    event_file: str,
    ranges: Sequence[tuple[int, int]],
    reader: files.RangeReader | None = None,
    checksums: Sequence[int | None] | None = None,
) -> list[np.ndarray]:
    """Just the values of the records at each (start, length) of an event file: as
    ``read_tensor_records`` (same arguments and errors) without decoding the rest of each
    record."""
    path = _event_path(out_dir, event_file)
    together = reader.read_together(path, ranges) if reader is not None else None
    if together is not None:  # side by side (a step's scalars): decoded together
        span, starts = together
        return record_values(span, starts, [length for _, length in ranges], checksums)
    buffers = (reader or files).read_ranges(path, ranges)
    if checksums is None:
        checksums = [None] * len(buffers)
    return [
        decode_tensor_value(unframe(buffer, checksum=checksum))
        for buffer, checksum in zip(buffers, checksums, strict=True)
    ]


def read_values_of_files(
    out_dir: str,
    wanted: Sequence[tuple[str, Sequence[tuple[int, int]], Sequence[int | None]]],
    reader: files.RangeReader,
) -> list[list[np.ndarray] | Exception]:
    """For each (event file, ranges, checksums) of ``wanted``, what ``read_tensor_values``
    returns for it, or the error it raises (OSError, EOFError, ValueError, MemoryError).

    The reader of many steps' scalars: each file's records are read in one read, and the
    records of every file are decoded together (``scalar_events``), where one file at a time
    would pay numpy's cost per call over a few dozen records each time.
    """
    results: list[list[np.ndarray] | Exception | None] = [None] * len(wanted)
    joined = bytearray()
    placed: list[tuple[int, list[int]]] = []  # (index in wanted, starts in joined)
    for position, (event_file, ranges, _) in enumerate(wanted):
        try:
            together = reader.read_together(_event_path(out_dir, event_file), ranges)
            if together is None:
                results[position] = read_tensor_values(
                    out_dir, event_file, ranges, reader, wanted[position][2]
                )
                continue
        except (OSError, EOFError, ValueError, MemoryError) as error:
            results[position] = error
            continue
        span, starts = together
        placed.append((position, [len(joined) + start for start in starts]))
        joined += span
    span = memoryview(joined)
    all_starts = [start for _, starts in placed for start in starts]
    all_lengths = [length for position, _ in placed for _, length in wanted[position][1]]
    all_checksums = [checksum for position, _ in placed for checksum in wanted[position][2]]
    found = scalar_values(span, all_starts, all_lengths, all_checksums)
    at = 0
    for position, starts in placed:
        ranges, checksums = wanted[position][1], wanted[position][2]
        values: list[np.ndarray] = []
        try:
            for offset, (start, (_, length), checksum) in enumerate(
                zip(starts, ranges, checksums, strict=True)
            ):
                value = found[at + offset]
                values.append(
                    value if value is not None else decode_alone(span, start, length, checksum)
                )
        except (ValueError, EOFError, MemoryError) as error:
            results[position] = error
        else:
            results[position] = values
        at += len(starts)
    return [result for result in results if result is not None]


def read_tensor_value(
    out_dir: str,
    event_file: str,
    start: int,
    length: int,
    reader: files.RangeReader,
    checksum: int | None = None,
) -> np.ndarray:
    """The value of the one tensor record at (start, length) of an event file.

    The quickest way to one value; errors as ``read_tensor_records``.
    """
    buffer = reader.read_range(_event_path(out_dir, event_file), start, length)
    return decode_tensor_value(unframe(buffer, checksum=checksum))


@functools.lru_cache(maxsize=4096)
def _event_path(out_dir: str, event_file: str) -> str:
    """The path of ``event_file`` (relative, from an index) under ``out_dir``, once checked
    that it stays there, symbolic links resolved."""
    relative = check_relative_path(event_file)
    path = locations.join(out_dir, relative)
    if files.is_url(out_dir):
        return path  # object keys have no links; the relative path is checked above
    if not _has_link(out_dir, relative):
        return path  # a relative path with no ".." and no link in it stays inside
    root = _real_root(out_dir)
    if os.path.commonpath([root, os.path.realpath(path)]) != root:
        raise IndexFileError(f"event_file_name {event_file!r} leads outside {out_dir}")
    return path


@functools.lru_cache(maxsize=64)
def _real_root(out_dir: str) -> str:
    return os.path.realpath(out_dir)


def _has_link(out_dir: str, relative: str) -> bool:
    """Whether a part of ``relative`` (checked, normalised) under ``out_dir`` is a symbolic
    link (or cannot be looked at): checking each part costs a few calls, where resolving the
    whole path costs one per directory from the root of the file system."""
    path = out_dir
    for part in relative.split("/"):
        path = os.path.join(path, part)
        try:
            if stat.S_ISLNK(os.lstat(path).st_mode):
                return True
        except OSError:
            return True
    return False


def step_written_at(out_dir: str, step: int, workers: Sequence[str]) -> float | None:
    """When ``step`` was written, in seconds since the epoch: the time its last worker's index
    file was; None when none of ``workers`` has written it (or the times cannot be read)."""
    times = []
    for worker in workers:
        try:
            times.append(
                os.path.getmtime(locations.join(out_dir, locations.index_file(step, worker)))
            )
        except OSError:
            continue
    return max(times) if times else None
