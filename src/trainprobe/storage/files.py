"""Every filesystem call of the storage layer: atomic writes, listing, whole and ranged reads.

A file appears under its final name only once it is complete: writers write to a temporary
name beside it and rename it into place, so a reader never sees half a file and a crash leaves
at most a stray temporary file (``*.tmp``, which listings skip).

A path may also be an object storage URL (``s3://bucket/prefix/...``): each function then goes
through ``storage.object_store``, where an object appears whole on commit (no temporary name is
needed). This module and that one are the only places that know the difference.
"""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
import threading
import uuid
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import BinaryIO

from trainprobe.storage import object_store

__all__ = [
    "TEMP_SUFFIX",
    "AtomicFile",
    "RangeReader",
    "absolute",
    "child_names",
    "exists",
    "holds_files",
    "is_dir",
    "is_url",
    "list_files",
    "list_files_after",
    "listing_stamp",
    "modified_time",
    "prepare_directory",
    "read_bytes",
    "read_many",
    "read_ranges",
    "rename",
    "scratch_path",
    "size",
    "write_atomic",
]

TEMP_SUFFIX = ".tmp"

Chunk = bytes | bytearray | memoryview

is_url = object_store.is_url

_PREADV = getattr(os, "preadv", None)


class AtomicFile:
    """A file written piece by piece under a temporary name and renamed into place on commit.

    ``discard()`` (or garbage) leaves nothing under the final name. Not thread-safe: one
    writer owns it.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._remote = is_url(path)
        self._temp = path
        self._file: BinaryIO | None
        if self._remote:
            self._file = object_store.open_for_write(path)
        else:
            parent = os.path.dirname(path)
            if parent:
                os.makedirs(parent, exist_ok=True)
            self._temp = f"{path}.{uuid.uuid4().hex[:12]}{TEMP_SUFFIX}"
            self._file = open(self._temp, "wb")  # noqa: SIM115
        self.size = 0

    def write(self, chunk: Chunk) -> int:
        """Append ``chunk``; returns the number of bytes written."""
        if self._file is None:
            raise ValueError(f"{self.path} is already closed")
        if self._remote:
            # fsspec counts len(), which is not the byte count of a typed memoryview.
            view = memoryview(chunk)
            self._file.write(view.cast("B") if view.format != "B" else view)
            written = view.nbytes
        else:
            written = self._file.write(chunk)
        self.size += written
        return written

    def writelines(self, chunks: Iterable[Chunk]) -> int:
        """Append every chunk in order; returns the number of bytes written."""
        return sum(self.write(chunk) for chunk in chunks)

    def commit(self) -> None:
        """Close the temporary file and give it its final name (replacing any older one)."""
        if self._file is None:
            return
        self._file.close()  # an object upload completes here
        self._file = None
        if not self._remote:
            os.replace(self._temp, self.path)  # its directory was made when it was opened

    def discard(self) -> None:
        """Close and delete the temporary file; nothing appears under the final name."""
        if self._file is None:
            return
        file, self._file = self._file, None
        if self._remote:
            file.discard()  # type: ignore[attr-defined]  # fsspec's: aborts the upload
            file.closed = True  # type: ignore[misc]  # nothing left to upload when collected
            return
        file.close()
        with contextlib.suppress(FileNotFoundError):
            os.remove(self._temp)


def write_atomic(path: str, data: Chunk) -> int:
    """Write ``data`` to ``path`` so that readers see either no file or all of it."""
    if is_url(path):
        view = memoryview(data)
        object_store.filesystem(path).pipe_file(path, view.tobytes())
        return view.nbytes
    file = AtomicFile(path)
    try:
        file.write(data)
    except BaseException:
        file.discard()
        raise
    file.commit()
    return file.size


def rename(source: str, target: str) -> None:
    """Give the finished file ``source`` the name ``target`` at once, replacing any file there.

    How a file written under a temporary name appears: readers see the old file or the new one,
    never a mix. The target's directory is made if missing. ``source`` may be a local file
    (from ``scratch_path``) and ``target`` a URL: the file is uploaded, then removed.
    """
    if is_url(target):
        fs = object_store.filesystem(target)
        if is_url(source):
            fs.mv(source, target)
        else:
            fs.put_file(source, target)
            os.remove(source)
        return
    parent = os.path.dirname(target)
    if parent:
        os.makedirs(parent, exist_ok=True)
    os.replace(source, target)


def remove(path: str) -> None:
    """Remove the file (or object) ``path``; one that is not there is not an error."""
    if is_url(path):
        with contextlib.suppress(FileNotFoundError):
            object_store.filesystem(path).rm_file(path)
        return
    with contextlib.suppress(FileNotFoundError):
        os.remove(path)


def scratch_path(path: str) -> str:
    """Where to write a file that ``rename`` will give the name ``path`` once it is whole:
    ``path`` itself for a local file, a local temporary file for a URL (objects cannot be
    appended to; the finished file is uploaded by ``rename``)."""
    if not is_url(path):
        return path
    handle, local = tempfile.mkstemp(prefix="trainprobe-", suffix=TEMP_SUFFIX)
    os.close(handle)
    return local


def exists(path: str) -> bool:
    """Whether a file or directory exists at ``path``."""
    if is_url(path):
        return bool(object_store.filesystem(path).exists(path))
    return os.path.exists(path)


def is_dir(path: str) -> bool:
    """Whether ``path`` is a directory (for a URL: a prefix holding objects)."""
    if is_url(path):
        return bool(object_store.filesystem(path).isdir(path))
    return os.path.isdir(path)


def absolute(path: str) -> str:
    """``path`` made absolute: from the current directory for a local path; a URL as it is."""
    return path if is_url(path) else os.path.abspath(path)


def holds_files(directory: str) -> bool:
    """Whether anything is under ``directory`` (False when it is missing). On object storage
    one listing request answers, however many objects there are."""
    if is_url(directory):
        return next(iter(object_store.list_keys_after(directory, None)), None) is not None
    try:
        return bool(os.listdir(directory))
    except OSError:
        return False


def prepare_directory(directory: str) -> None:
    """Make ``directory`` if missing; PermissionError when this user cannot write in it. In
    object storage there is nothing to make: a prefix appears with its first object."""
    if is_url(directory):
        return
    os.makedirs(directory, exist_ok=True)
    if not os.access(directory, os.W_OK):
        raise PermissionError(f"{directory} is not writable")


def listing_stamp(directory: str) -> tuple[tuple[str, int, int], ...] | None:
    """(name, modification time in ns, size) of each file directly under ``directory``, sorted:
    it changes when one of them does, at the cost of one listing (empty for a missing
    directory). None in object storage, where seeing a change costs about what reading the
    files does."""
    if is_url(directory):
        return None
    try:
        with os.scandir(directory) as entries:
            found = [
                (entry.name, entry.stat().st_mtime_ns, entry.stat().st_size)
                for entry in entries
                if entry.is_file()
            ]
    except OSError:
        return ()
    return tuple(sorted(found))


def modified_time(path: str) -> float:
    """When ``path`` last changed, in seconds since the epoch. For a URL naming a prefix (a
    directory): when its newest object was written."""
    if not is_url(path):
        return os.path.getmtime(path)
    fs = object_store.filesystem(path)
    found = fs.find(path.rstrip("/"), detail=True)
    times = [entry["LastModified"].timestamp() for entry in found.values()]
    if not times:
        raise FileNotFoundError(path)
    return float(max(times))


def child_names(directory: str) -> list[str]:
    """The names of the directories directly under ``directory`` (for a URL: the prefixes
    holding objects), sorted; none for a missing directory."""
    if is_url(directory):
        fs = object_store.filesystem(directory)
        try:
            entries = fs.ls(directory.rstrip("/"), detail=True)
        except FileNotFoundError:
            return []
        return sorted(
            entry["name"].rstrip("/").rsplit("/", 1)[-1]
            for entry in entries
            if entry["type"] == "directory"
        )
    try:
        with os.scandir(directory) as entries:
            return sorted(entry.name for entry in entries if entry.is_dir())
    except OSError:
        return []


def list_files(directory: str, suffix: str = "") -> list[str]:
    """Every finished file under ``directory`` (recursively) whose name ends with ``suffix``.

    Returned as ``/``-separated paths relative to ``directory``, sorted; temporary files are
    skipped. A missing directory lists as empty.
    """
    if is_url(directory):
        return list_files_after(directory, suffix, None)
    found: list[str] = []
    for root, dirs, names in os.walk(directory):
        dirs.sort()
        relative_root = os.path.relpath(root, directory).replace(os.sep, "/")
        prefix = "" if relative_root == "." else relative_root + "/"
        found.extend(
            prefix + name
            for name in names
            if name.endswith(suffix) and not name.endswith(TEMP_SUFFIX)
        )
    found.sort()
    return found


def list_files_after(directory: str, suffix: str, start_after: str | None) -> list[str]:
    """``list_files``, keeping only paths that sort after ``start_after`` (a path relative to
    ``directory``; None: all). On object storage only those keys are listed, which keeps a
    reader following a growing output from listing it whole at each poll."""
    if is_url(directory):
        return [
            name
            for name in object_store.list_keys_after(directory, start_after)
            if name.endswith(suffix) and not name.endswith(TEMP_SUFFIX)
        ]
    if start_after is None:
        return list_files(directory, suffix)
    found: list[str] = []
    for root, dirs, names in os.walk(directory):
        relative_root = os.path.relpath(root, directory).replace(os.sep, "/")
        prefix = "" if relative_root == "." else relative_root + "/"
        # A folder whose every path sorts before ``start_after`` is not walked: a reader
        # following a long output lists only its last folders (``index/<step // 1000>``).
        dirs[:] = sorted(
            name
            for name in dirs
            if prefix + name + "/" > start_after or start_after.startswith(prefix + name + "/")
        )
        found.extend(
            prefix + name
            for name in names
            if name.endswith(suffix)
            and not name.endswith(TEMP_SUFFIX)
            and prefix + name > start_after
        )
    found.sort()
    return found


def being_written(directory: str) -> list[str]:
    """The names of the temporary files directly under ``directory``: files a writer has open
    and will rename when they are whole (none for a missing directory, nor on object storage,
    where a file is invisible until it is whole)."""
    if is_url(directory):
        return []
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    return sorted(name for name in names if name.endswith(TEMP_SUFFIX))


def read_bytes(path: str) -> bytes:
    """The whole content of a file."""
    if is_url(path):
        return bytes(object_store.filesystem(path).cat_file(path))
    with open(path, "rb") as file:
        return file.read()


def read_many(paths: Sequence[str]) -> list[bytes | OSError]:
    """The whole content of each file, or the OSError reading it gave (FileNotFoundError for
    a missing one). Objects (URLs) are fetched concurrently."""
    if paths and all(is_url(path) for path in paths):
        fs = object_store.filesystem(paths[0])
        found = fs.cat(list(paths), on_error="return")
        # fsspec names what it fetched without the scheme.
        by_path = {fs._strip_protocol(path): content for path, content in found.items()}
        results: list[bytes | OSError] = []
        for path in paths:
            content = by_path.get(fs._strip_protocol(path))
            if isinstance(content, bytes | OSError):
                results.append(content)
            else:
                results.append(OSError(f"{path}: {content!r}"))
        return results
    contents: list[bytes | OSError] = []
    for path in paths:
        try:
            contents.append(read_bytes(path))
        except OSError as error:
            contents.append(error)
    return contents


def size(path: str) -> int:
    """The size of a file in bytes."""
    if is_url(path):
        return int(object_store.filesystem(path).size(path))
    return os.path.getsize(path)


def _read_into(file: io.FileIO, path: str, start: int, length: int) -> memoryview:
    import numpy as np  # here, not above: what only writes or lists files starts without it

    # numpy's empty() leaves the memory uninitialised: nothing is zero-filled only to be
    # read over. The memoryview is writable, so arrays made from it are too, without a copy.
    buffer = np.empty(length, dtype=np.uint8).data
    if _PREADV is not None:  # one system call instead of a seek and a read
        got = _PREADV(file.fileno(), [buffer], start)
    else:
        file.seek(start)
        got = file.readinto(buffer)
    if got != length:
        raise EOFError(f"{path}: wanted {length} bytes at {start}, found {got}")
    return buffer


def read_ranges(path: str, ranges: Sequence[tuple[int, int]]) -> list[bytearray]:
    """The bytes at each (start, length) of a file, opening it once.

    Raises EOFError when a range runs past the end of the file (a truncated file).
    """
    if is_url(path):
        return [bytearray(piece) for piece in _ranges_of(read_bytes(path), path, ranges)]
    results: list[bytearray] = []
    with io.FileIO(path, "rb") as file:
        for start, length in ranges:
            buffer = bytearray(length)
            file.seek(start)
            got = file.readinto(buffer)
            if got != length:
                raise EOFError(f"{path}: wanted {length} bytes at {start}, found {got}")
            results.append(buffer)
    return results


def _ranges_of(content: bytes, path: str, ranges: Sequence[tuple[int, int]]) -> list[memoryview]:
    view = memoryview(content)
    pieces = []
    for start, length in ranges:
        if start + length > len(content):
            raise EOFError(
                f"{path}: wanted {length} bytes at {start}, found {len(content) - start}"
            )
        pieces.append(view[start : start + length])
    return pieces


_SLACK_BYTES = 64 * 1024
"""Bytes between the records asked for that ``RangeReader.read_ranges`` reads over rather than
making one read per record."""


class RangeReader:
    """Reads byte ranges of finished files, keeping the most recently used ones open.

    For readers that fetch many small pieces of the same few files (a trial reading tensor
    records): it saves an open and a close per piece. Files must not change once written,
    which holds for everything the storage layer writes (atomic renames). An object (a URL)
    is fetched whole, once, and kept while ``max_cached_bytes`` allows: a step's records are
    read together, and one GET costs far less than one per tensor.
    """

    def __init__(self, max_open: int = 64, max_cached_bytes: int = 256 * 1024 * 1024) -> None:
        self._max_open = max_open
        self._open: OrderedDict[str, io.FileIO] = OrderedDict()
        self._lock = threading.Lock()
        self._max_cached_bytes = max_cached_bytes
        self._objects: OrderedDict[str, bytes] = OrderedDict()
        self._cached_bytes = 0

    def _object(self, path: str) -> bytes:
        content = self._objects.get(path)
        if content is not None:
            self._objects.move_to_end(path)
            return content
        content = read_bytes(path)
        while self._objects and self._cached_bytes + len(content) > self._max_cached_bytes:
            self._cached_bytes -= len(self._objects.popitem(last=False)[1])
        if len(content) <= self._max_cached_bytes:
            self._objects[path] = content
            self._cached_bytes += len(content)
        return content

    def _remote_ranges(self, path: str, ranges: Sequence[tuple[int, int]]) -> list[memoryview]:
        # Writable copies, as the local reads give: arrays made from them may be changed.
        return [
            memoryview(bytearray(piece)) for piece in _ranges_of(self._object(path), path, ranges)
        ]

    def _file(self, path: str) -> io.FileIO:
        file = self._open.get(path)
        if file is None:
            file = io.FileIO(path, "rb")
            while len(self._open) >= self._max_open:
                self._open.popitem(last=False)[1].close()
            self._open[path] = file
        else:
            self._open.move_to_end(path)
        return file

    def read_range(self, path: str, start: int, length: int) -> memoryview:
        """The bytes at (start, length) of a file, as a writable memoryview.

        Raises EOFError when the range runs past the end of the file (a truncated file).
        """
        with self._lock:
            if is_url(path):
                return self._remote_ranges(path, [(start, length)])[0]
            return _read_into(self._file(path), path, start, length)

    def read_ranges(self, path: str, ranges: Sequence[tuple[int, int]]) -> list[memoryview]:
        """The bytes at each (start, length) of a file, as ``read_range`` reads one."""
        if len(ranges) > 1 and not is_url(path):
            together = self.read_together(path, ranges)
            if together is not None:
                span, starts = together
                return [
                    span[start : start + length]
                    for start, (_, length) in zip(starts, ranges, strict=True)
                ]
        with self._lock:
            if is_url(path):
                return self._remote_ranges(path, ranges)
            file = self._file(path)
            return [_read_into(file, path, start, length) for start, length in ranges]

    def read_together(
        self, path: str, ranges: Sequence[tuple[int, int]]
    ) -> tuple[memoryview, list[int]] | None:
        """The bytes of a file from the first of ``ranges`` to the end of the last, in one
        read, with where each range starts in them; None when that span would hold much more
        than the ranges (then read them apart). Records read together usually lie together
        (a step's scalars): one read costs far less than one per record."""
        if not ranges:
            return None
        first = min(start for start, _ in ranges)
        end = max(start + length for start, length in ranges)
        if end - first > sum(length for _, length in ranges) + _SLACK_BYTES:
            return None
        return self.read_range(path, first, end - first), [start - first for start, _ in ranges]

    def close(self) -> None:
        """Close every file kept open."""
        with self._lock:
            while self._open:
                self._open.popitem()[1].close()
            self._objects.clear()
            self._cached_bytes = 0

    def __del__(self) -> None:
        for file in self._open.values():
            file.close()
