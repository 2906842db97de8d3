"""Checksums patched from fixed payloads equal those computed from the filled bytes.

``PatchedChecksums`` gives a step's scalar records their index checksums without one CRC call a
record; a wrong one would make the trial refuse a record as damaged. Every shape of payload the
writer makes is tried: heads and ends of any size (none included), values of 1 to 8 bytes,
payloads long enough that the distances need more than one byte, and random bytes filled in.
"""

from __future__ import annotations

import numpy as np
import pytest

from trainprobe.storage.patched_checksums import PatchedChecksums
from trainprobe.storage.tfrecord import masked_crc32c


def check_patched(
    rng: np.random.Generator, head_size: int, end_size: int, value_sizes: list[int]
) -> None:
    middles = [rng.integers(0, 256, int(rng.integers(0, 300)), dtype=np.uint8) for _ in value_sizes]
    payloads = [
        np.concatenate([np.zeros(head_size, np.uint8), middle, np.zeros(size + end_size, np.uint8)])
        for middle, size in zip(middles, value_sizes, strict=True)
    ]
    gap = int(rng.integers(0, 20))  # bytes between payloads, as a record's framing
    data = np.zeros(0, np.uint8)
    spans = []
    for payload in payloads:
        data = np.concatenate([data, rng.integers(0, 256, gap, dtype=np.uint8)])
        spans.append((len(data), len(data) + len(payload)))
        data = np.concatenate([data, payload])
    groups: dict[int, list[int]] = {}
    for index, size in enumerate(value_sizes):
        groups.setdefault(size, []).append(index)
    rows = [(np.array(members, dtype=np.intp), size) for size, members in groups.items()]
    patched = PatchedChecksums(data.tobytes(), spans, head_size, end_size, rows)
    for _ in range(3):
        head = rng.integers(0, 256, head_size, dtype=np.uint8).tobytes()
        end = rng.integers(0, 256, end_size, dtype=np.uint8).tobytes()
        values = [
            rng.integers(0, 256, (len(members), size), dtype=np.uint8) for members, size in rows
        ]
        filled = data.copy()
        for (members, size), value in zip(rows, values, strict=True):
            for row, index in enumerate(members):
                _, stop = spans[index]
                filled[stop - end_size - size : stop - end_size] = value[row]
        for start, stop in spans:
            filled[start : start + head_size] = np.frombuffer(head, np.uint8)
            filled[stop - end_size : stop] = np.frombuffer(end, np.uint8)
        expected = [masked_crc32c(filled[start:stop].tobytes()) for start, stop in spans]
        assert patched.checksums(head, end, values) == expected


@pytest.mark.parametrize("seed", range(40))
def test_patched_checksums_equal_the_filled_payloads_checksums(seed: int) -> None:
    rng = np.random.default_rng(seed)
    count = int(rng.integers(1, 60))
    sizes = [int(size) for size in rng.choice([1, 2, 4, 8], count)]
    check_patched(rng, int(rng.integers(0, 24)), int(rng.integers(0, 12)), sizes)
