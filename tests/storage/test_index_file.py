"""An index file's bytes are json.dumps's of smdebug's document, whatever the names and numbers.

The writer encodes the tensor entries from text it keeps for a step's names and lengths, which
recur from step to step; the text must never carry one step's numbers into another, nor break on
a name JSON escapes or that holds ``%``.
"""

from __future__ import annotations

import json
import random

import pytest

from trainprobe.storage.index_file import (
    CHECKSUM_KEY,
    StepIndex,
    TensorColumns,
    TensorLocation,
    decode_index,
    encode_index,
)
from trainprobe.storage.modes import ModeKeys

NAMES = [
    "CrossEntropyLoss_output_0",
    "smdebug/reductions/abs_l2/gradient/Net_fc1.weight",
    "100%/of %d and %s and %%",
    'quote " and back\\slash',
    "größe/ünïcode/☃",
    "control\x01\n\t",
]


def expected(index: StepIndex) -> bytes:
    entries = []
    for name, start, length, checksum in index.tensors:
        entry = {"tensorname": name, "start_idx": start, "length": length}
        if checksum is not None:
            entry[CHECKSUM_KEY] = checksum
        entries.append(entry)
    meta = {"mode": index.mode.name, "mode_step": index.mode_step}
    if index.event_file is not None:
        meta["event_file_name"] = index.event_file
    document = {"meta": meta, "tensor_payload": entries, "shape_payload": []}
    return json.dumps(document).encode()


@pytest.mark.parametrize("with_checksums", ["all", "some", "none"])
def test_the_index_is_json_dumps_text_step_after_step(with_checksums: str) -> None:
    rng = random.Random(with_checksums)
    names = [f"{NAMES[i % len(NAMES)]}/{i}" for i in range(300)]
    lengths = [rng.randrange(20, 5000) for _ in names]
    for step in range(6):  # the same names and lengths each step: the kept text is reused
        start = rng.randrange(0, 2**40)
        tensors = []
        for name, length in zip(names, lengths, strict=True):
            checksum: int | None = rng.randrange(0, 2**32)
            if with_checksums == "none" or (with_checksums == "some" and rng.random() < 0.1):
                checksum = None
            tensors.append(TensorLocation(name, start, length, checksum))
            start += length
        index = StepIndex(step, "worker_0", ModeKeys.TRAIN, step, "events/x.tfevents", tensors)
        data = encode_index(index)
        assert data == expected(index)
        assert decode_index(data, step, "worker_0").tensors == tensors
        # As the step writer gathers them: column by column.
        columns = TensorColumns()
        columns.append(tensors[0])
        columns.extend(*zip(*tensors[1:], strict=True))
        assert list(columns) == tensors and columns[5:9] == tensors[5:9]
        assert (
            encode_index(
                StepIndex(step, "worker_0", ModeKeys.TRAIN, step, "events/x.tfevents", columns)
            )
            == data
        )


def test_an_index_of_other_lengths_is_not_given_the_kept_text() -> None:
    tensors = [TensorLocation(name, 10 * i, 10, i) for i, name in enumerate(NAMES)]
    first = StepIndex(1, "w", ModeKeys.EVAL, 1, None, tensors)
    assert encode_index(first) == expected(first)
    longer = [location._replace(length=11) for location in tensors]
    second = StepIndex(2, "w", ModeKeys.EVAL, 2, None, longer)
    assert encode_index(second) == expected(second)
    empty = StepIndex(3, "w", ModeKeys.GLOBAL, 3, None, [])
    assert encode_index(empty) == expected(empty)
