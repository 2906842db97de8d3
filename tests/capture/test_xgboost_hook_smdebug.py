"""smdebug 1.0.34 and trainprobe read each other's XGBoost output.

One training script runs twice: with ``smdebug.xgboost`` in the smdebug-xgboost reference
environment (XGBoost 1.7) and with ``trainprobe.xgboost`` here (XGBoost 3.2). smdebug's
``create_trial`` reads both outputs, trainprobe's trial reads both, and the four readings must
agree on the names, the steps and the values, up to what the two XGBoost versions compute
differently in the last digits. ``full_shap`` is compared by name only: smdebug saved the whole
SHAP matrix under each feature's name, trainprobe saves the feature's column; and a feature no
tree uses yet has no importance in smdebug's output, an importance of 0 in trainprobe's.
"""

from __future__ import annotations

import inspect
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

import trainprobe.xgboost as smd
from reference_envs import reference_python, run_reference
from trainprobe.trials import create_trial

pytestmark = pytest.mark.slow

TRAINING = """
import sys
import numpy as np
import xgboost as xgb
out = sys.argv[1]
generator = np.random.default_rng(0)
features = generator.normal(size=(300, 4))
labels = (features[:, 0] + 0.5 * features[:, 1] - features[:, 2] * features[:, 3] > 0) * 1.0
dtrain = xgb.DMatrix(features[:200], labels[:200])
dval = xgb.DMatrix(features[200:], labels[200:])
params = {"objective": "binary:logistic", "max_depth": 3, "eta": 0.3, "nthread": 1,
          "base_score": 0.5, "tree_method": "exact",
          "eval_metric": "logloss"}
hook = smd.Hook(out_dir=out, save_config=smd.SaveConfig(save_interval=1),
                include_collections=["metrics", "hyperparameters", "predictions", "labels",
                                     "feature_importance", "average_shap", "full_shap", "trees"],
                hyperparameters={"max_depth": 3, "eta": 0.3},
                train_data=dtrain, validation_data=dval)
xgb.train(params, dtrain, 4, evals=[(dtrain, "train"), (dval, "validation")], callbacks=[hook],
          verbose_eval=False)
hook.close() if hasattr(hook, "close") else None
"""

SMDEBUG_READS = """
import inspect, json, sys
import numpy as np
import smdebug.xgboost
from smdebug.trials import create_trial
result = {"Hook": list(inspect.signature(smdebug.xgboost.Hook.__init__).parameters)[1:]}
for path in sys.argv[1:]:
    trial = create_trial(path)
    names = sorted(trial.tensor_names())
    values = {}
    for name in names:
        if name.startswith("full_shap/"):
            continue
        value = trial.tensor(name).value(3)
        values[name] = value.tolist() if value.dtype.kind != "U" else [str(v) for v in value]
    result[path] = {"names": names, "steps": trial.steps(), "values": values,
                    "collections": sorted(trial.collections())}
print(json.dumps(result))
"""


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    root = tmp_path_factory.mktemp("xgboost-outputs")
    theirs, ours = root / "smdebug", root / "trainprobe"
    python = reference_python("smdebug-xgboost")
    for interpreter, module, out in ((python, "smdebug.xgboost", theirs), (None, None, ours)):
        prefix = f"import {module} as smd\n" if module else "import trainprobe.xgboost as smd\n"
        script = root / f"train_{out.name}.py"
        script.write_text(prefix + TRAINING)
        finished = subprocess.run(
            [str(interpreter or sys.executable), str(script), str(out)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert finished.returncode == 0, finished.stderr[-3000:]
    return str(theirs), str(ours)


def _close(a: Any, b: Any) -> bool:
    left, right = np.asarray(a), np.asarray(b)
    if left.dtype.kind in "US" or right.dtype.kind in "US":
        return left.tolist() == right.tolist()
    return left.shape == right.shape and np.allclose(
        left, right, rtol=1e-3, atol=1e-6, equal_nan=True
    )


def test_smdebug_reads_both_outputs_alike(outputs: tuple[str, str]) -> None:
    theirs, ours = outputs
    read = run_reference("smdebug-xgboost", SMDEBUG_READS.replace("sys.argv[1:]", repr(outputs)))
    assert isinstance(read, dict)
    # trainprobe's hook takes smdebug's arguments, in smdebug's order (and strict, by keyword).
    parameters = list(inspect.signature(smd.Hook.__init__).parameters)[1:]
    assert parameters == [*read["Hook"], "strict"]
    assert callable(smd.Hook.create_from_json_file) and callable(smd.get_hook)
    smdebug_own, smdebug_ours = read[theirs], read[ours]
    assert smdebug_ours["steps"] == smdebug_own["steps"] == [0, 1, 2, 3]
    assert smdebug_ours["names"] == smdebug_own["names"]
    assert set(smdebug_own["collections"]) <= set(smdebug_ours["collections"])
    different = [
        name
        for name, value in smdebug_own["values"].items()
        if not _close(value, smdebug_ours["values"][name])
    ]
    assert different == []


def test_trainprobe_reads_both_outputs_alike(outputs: tuple[str, str]) -> None:
    theirs, ours = (create_trial(path) for path in outputs)
    assert theirs.tensor_names() == ours.tensor_names()
    assert theirs.steps() == ours.steps() == [0, 1, 2, 3]
    for name in theirs.tensor_names():
        if name.startswith("full_shap/"):
            continue
        for step in {0, 3} & set(theirs.tensor(name).steps()):
            assert _close(theirs.tensor(name).value(step), ours.tensor(name).value(step)), name
    assert theirs.tensor_names(collection="metrics") == ["train-logloss", "validation-logloss"]
    assert ours.tensor_names(collection="metrics") == ["train-logloss", "validation-logloss"]
