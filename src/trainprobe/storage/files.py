"""Every filesystem call of the storage layer: atomic writes, listing, whole and ranged reads.

A file appears under its final name only once it is complete: writers write to a temporary
name beside it and rename it into place, so a reader never sees half a file and a crash leaves
at most a stray temporary file (``*.tmp``, which listings skip). Paths are local for now; object
storage (fsspec URLs) will plug in here and nowhere else.
"""

from __future__ import annotations

import contextlib
import io
import os
import threading
import uuid
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import BinaryIO

import numpy as np

__all__ = [
    "TEMP_SUFFIX",
    "AtomicFile",
    "RangeReader",
    "exists",
    "is_dir",
    "list_files",
    "read_bytes",
    "read_ranges",
    "rename",
    "size",
    "write_atomic",
]

TEMP_SUFFIX = ".tmp"

Chunk = bytes | bytearray | memoryview

_PREADV = getattr(os, "preadv", None)


class AtomicFile:
    """A file written piece by piece under a temporary name and renamed into place on commit.

    ``discard()`` (or garbage) leaves nothing under the final name. Not thread-safe: one
    writer owns it.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        parent = os.path.dirname(path)
        if parent:
            os.makedirs(parent, exist_ok=True)
        self._temp = f"{path}.{uuid.uuid4().hex[:12]}{TEMP_SUFFIX}"
        self._file: BinaryIO | None = open(self._temp, "wb")  # noqa: SIM115
        self.size = 0

    def write(self, chunk: Chunk) -> int:
        """Append ``chunk``; returns the number of bytes written."""
        if self._file is None:
            raise ValueError(f"{self.path} is already closed")
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
        self._file.close()
        self._file = None
        os.replace(self._temp, self.path)  # its directory was made when it was opened

    def discard(self) -> None:
        """Close and delete the temporary file; nothing appears under the final name."""
        if self._file is None:
            return
        self._file.close()
        self._file = None
        with contextlib.suppress(FileNotFoundError):
            os.remove(self._temp)


def write_atomic(path: str, data: Chunk) -> int:
    """Write ``data`` to ``path`` so that readers see either no file or all of it."""
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
    never a mix. The target's directory is made if missing.
    """
    parent = os.path.dirname(target)
    if parent:
        os.makedirs(parent, exist_ok=True)
    os.replace(source, target)


def exists(path: str) -> bool:
    """Whether a file or directory exists at ``path``."""
    return os.path.exists(path)


def is_dir(path: str) -> bool:
    """Whether ``path`` is a directory."""
    return os.path.isdir(path)


def list_files(directory: str, suffix: str = "") -> list[str]:
    """Every finished file under ``directory`` (recursively) whose name ends with ``suffix``.

    Returned as ``/``-separated paths relative to ``directory``, sorted; temporary files are
    skipped. A missing directory lists as empty.
    """
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


def being_written(directory: str) -> list[str]:
    """The names of the temporary files directly under ``directory``: files a writer has open
    and will rename when they are whole (none for a missing directory)."""
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    return sorted(name for name in names if name.endswith(TEMP_SUFFIX))


def read_bytes(path: str) -> bytes:
    """The whole content of a file."""
    with open(path, "rb") as file:
        return file.read()


def size(path: str) -> int:
    """The size of a file in bytes."""
    return os.path.getsize(path)


def _read_into(file: io.FileIO, path: str, start: int, length: int) -> memoryview:
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


class RangeReader:
    """Reads byte ranges of finished files, keeping the most recently used ones open.

    For readers that fetch many small pieces of the same few files (a trial reading tensor
    records): it saves an open and a close per piece. Files must not change once written,
    which holds for everything the storage layer writes (atomic renames).
    """

    def __init__(self, max_open: int = 64) -> None:
        self._max_open = max_open
        self._open: OrderedDict[str, io.FileIO] = OrderedDict()
        self._lock = threading.Lock()

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
            return _read_into(self._file(path), path, start, length)

    def read_ranges(self, path: str, ranges: Sequence[tuple[int, int]]) -> list[memoryview]:
        """The bytes at each (start, length) of a file, as ``read_range`` reads one."""
        with self._lock:
            file = self._file(path)
            return [_read_into(file, path, start, length) for start, length in ranges]

    def close(self) -> None:
        """Close every file kept open."""
        with self._lock:
            while self._open:
                self._open.popitem()[1].close()

    def __del__(self) -> None:
        for file in self._open.values():
            file.close()
