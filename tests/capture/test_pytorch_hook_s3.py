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
from reference_envs import run_reference
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


# smdebug lists a prefix with StartAfter set to the prefix itself ("<out>/index"). On AWS S3
# every key under "<out>/index/" sorts after it, so that StartAfter skips nothing; SeaweedFS 4.48
# takes it for the folder "index" and skips the whole folder. Dropping exactly that StartAfter
# gives smdebug, on SeaweedFS, the listing it gets from AWS S3.
READ_WITH_SMDEBUG = """
import json, os
os.environ["SMDEBUG_TRAINING_END_DELAY_REFRESH"] = "0"
from smdebug.core.access_layer import s3handler
from smdebug.trials import create_trial

_init = s3handler.ListRequest.__init__
def _listing_as_on_aws(self, Bucket, Prefix="", Delimiter="", StartAfter=""):
    _init(self, Bucket, Prefix, Delimiter, "" if StartAfter == Prefix else StartAfter)
s3handler.ListRequest.__init__ = _listing_as_on_aws
trial = create_trial(URL)
print(json.dumps({
    "steps": trial.steps(),
    "values": {
        name: {str(step): trial.tensor(name).value(step).tolist()
               for step in trial.tensor(name).steps()}
        for name in trial.tensor_names()
    },
}))
"""


@pytest.mark.slow
def test_smdebug_reads_the_hooks_tensors_from_the_bucket(s3_url: str) -> None:
    _train(s3_url)
    ours = create_trial(s3_url)
    read = run_reference("smdebug", f"URL = {s3_url!r}\n" + READ_WITH_SMDEBUG)
    assert isinstance(read, dict)
    assert read["steps"] == ours.steps()
    assert sorted(read["values"]) == ours.tensor_names()
    for name, steps in read["values"].items():
        for step, value in steps.items():
            np.testing.assert_array_equal(np.asarray(value), ours.tensor(name).value(int(step)))
