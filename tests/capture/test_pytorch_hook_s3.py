"""The PyTorch hook writing to S3 (a real SeaweedFS server, tests/seaweedfs.py).

The same training runs once into a local directory and once into ``s3://bucket/prefix``; the
trial reads the bucket and finds what it finds locally, value for value, and smdebug 1.0.34's
own ``create_trial`` (its S3 reader, pointed at the server by ``AWS_ENDPOINT_URL``) reads the
bucket too.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from hook_training import Net, run

import trainprobe.pytorch as smd
from smdebug_s3 import read_with_smdebug
from trainprobe.trials import create_trial

TRAIN, EVAL = smd.modes.TRAIN, smd.modes.EVAL


def _train(out: str) -> None:
    torch.manual_seed(0)
    model = Net(8)
    hook = smd.Hook(
        out,
        save_config=smd.SaveConfig(save_interval=1),
        include_collections=["weights", "gradients", "losses"],
    )
    hook.register_module(model)
    run(hook, model, [(TRAIN, 3), (EVAL, 2)])
    hook.close()


def test_the_hook_writes_to_a_bucket_what_it_writes_to_disk(tmp_path: Path, s3_url: str) -> None:
    _train(str(tmp_path))
    _train(s3_url)
    local, remote = create_trial(str(tmp_path)), create_trial(s3_url)
    assert remote.steps() == local.steps() == list(range(5))
    assert remote.steps(mode=EVAL) == [0, 1]
    assert remote.tensor_names() == local.tensor_names()
    assert remote.loaded_all_steps
    for name in local.tensor_names():
        for step in local.tensor(name).steps():
            np.testing.assert_array_equal(
                remote.tensor(name).value(step), local.tensor(name).value(step)
            )


@pytest.mark.slow
def test_smdebug_reads_the_hooks_tensors_from_the_bucket(s3_url: str) -> None:
    _train(s3_url)
    ours = create_trial(s3_url)
    read = read_with_smdebug(s3_url)
    assert read["steps"] == ours.steps()
    assert sorted(read["values"]) == ours.tensor_names()
    for name, steps in read["values"].items():
        for step, value in steps.items():
            np.testing.assert_array_equal(np.asarray(value), ours.tensor(name).value(int(step)))
