"""Comparing trainprobe's index files with smdebug's, whose entries carry no checksum."""

from __future__ import annotations

import json
from pathlib import Path

from trainprobe.storage.tfrecord import HEADER_SIZE, masked_crc32c


def without_checksums(out_dir: Path, index_bytes: bytes) -> bytes:
    """The index file ``index_bytes`` of the output at ``out_dir`` as smdebug writes it: each
    entry's ``masked_crc32c`` checked against its record's payload, then left out."""
    index = json.loads(index_bytes)
    events = (out_dir / index["meta"]["event_file_name"]).read_bytes()
    for entry in index["tensor_payload"]:
        start, length = entry["start_idx"], entry["length"]
        payload = events[start + HEADER_SIZE : start + length - 4]
        assert entry.pop("masked_crc32c") == masked_crc32c(payload), entry
    return json.dumps(index).encode()
