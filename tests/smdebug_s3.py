"""Reading a bucket with smdebug 1.0.34's own ``create_trial``, in its reference environment.

smdebug lists a prefix with StartAfter set to the prefix itself (``<out>/index``). On AWS S3
every key under ``<out>/index/`` sorts after it, so that StartAfter skips nothing; SeaweedFS 4.48
takes it for the folder ``index`` and skips the whole folder. Dropping exactly that StartAfter
gives smdebug, on SeaweedFS, the listing it gets from AWS S3.
"""

from __future__ import annotations

from typing import Any

from reference_envs import run_reference

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


def read_with_smdebug(url: str) -> dict[str, Any]:
    """Every step and every tensor's value at each step, as smdebug reads them from ``url``
    (the AWS settings of this process's environment point it at the server)."""
    read = run_reference("smdebug", f"URL = {url!r}\n" + READ_WITH_SMDEBUG)
    assert isinstance(read, dict)
    return read
