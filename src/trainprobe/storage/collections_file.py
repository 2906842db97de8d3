"""The collections file each worker writes: which collections exist and how many workers write.

smdebug's JSON::

    {"collections": {"<name>": {"name": ..., "include_regex": [...], "tensor_names": [...],
                                "reduction_config": {...} | null, "save_config": {...} | null,
                                "save_histogram": true}, ...},
     "_meta": {"num_workers": 1}}

``num_workers`` is the number of workers expected to write each step: a step is complete once
that many have. The collection entries are written as given (the hook builds them); readers
get them back as plain dicts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trainprobe.config.errors import ConfigError
from trainprobe.storage import files, locations

__all__ = [
    "CollectionsFile",
    "decode_collections",
    "encode_collections",
    "read_collections_file",
    "write_collections_file",
]


@dataclass(frozen=True)
class CollectionsFile:
    """The content of one worker's collections file."""

    worker: str
    collections: dict[str, dict[str, Any]]
    num_workers: int


def encode_collections(collections: Mapping[str, Mapping[str, Any]], num_workers: int) -> bytes:
    """The JSON bytes of a collections file."""
    if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 1:
        raise ConfigError("num_workers", num_workers, "a whole number of workers, at least 1")
    entries = {name: dict(entry) for name, entry in collections.items()}
    for name, entry in entries.items():
        entry.setdefault("name", name)
    return json.dumps({"collections": entries, "_meta": {"num_workers": num_workers}}).encode()


def decode_collections(data: bytes, worker: str) -> CollectionsFile:
    """A collections file's content. Raises ValueError when it is not one."""
    try:
        document = json.loads(data)
        collections = {str(name): dict(entry) for name, entry in document["collections"].items()}
        num_workers = int(document.get("_meta", {}).get("num_workers", 1))
    except (KeyError, TypeError, AttributeError) as error:
        raise ValueError(f"not a collections file: {error!r}") from error
    return CollectionsFile(worker, collections, num_workers)


def write_collections_file(
    out_dir: str, worker: str, collections: Mapping[str, Mapping[str, Any]], num_workers: int
) -> None:
    """Write (or replace, atomically) ``worker``'s collections file under ``out_dir``.

    ``collections`` maps each collection's name to its smdebug JSON dict (name, include_regex,
    tensor_names, reduction_config, save_config, save_histogram).
    """
    data = encode_collections(collections, num_workers)
    files.write_atomic(locations.join(out_dir, locations.collections_file(worker)), data)


def read_collections_file(out_dir: str, relative_path: str) -> CollectionsFile:
    """Read one collections file (``relative_path`` as listed under ``out_dir``)."""
    worker = locations.parse_collections_file_name(relative_path)
    if worker is None:
        raise ValueError(f"{relative_path} is not named like a collections file")
    return decode_collections(files.read_bytes(locations.join(out_dir, relative_path)), worker)
