"""The XGBoost hook on real trainings: what it saves is what the training printed and holds.

The trainings are ``tests/capture/xgboost_training.py`` (scikit-learn data, a few rounds), run as
a user runs a script, with the hook made by hand in it (``--hook``); the output is read back
with the trial API.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import xgboost as xgb

import trainprobe.xgboost as smd
from trainprobe.trials import create_trial

pytestmark = pytest.mark.slow

TRAINING = Path(__file__).resolve().parent / "xgboost_training.py"
EVERYTHING = (
    "hyperparameters,predictions,labels,feature_importance,average_shap,full_shap,trees,losses"
)


def train(*arguments: str) -> tuple[subprocess.CompletedProcess[str], dict[str, dict[int, float]]]:
    finished = subprocess.run(
        [sys.executable, str(TRAINING), *arguments],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert finished.returncode == 0, finished.stderr
    metrics: dict[str, dict[int, float]] = {}
    for line in finished.stdout.splitlines():
        if line.startswith("metric "):
            _, name, round_number, value = line.split()
            metrics.setdefault(name, {})[int(round_number)] = float(value)
    return finished, metrics


@pytest.mark.parametrize(
    ("task", "api", "classes"),
    [("binary", "train", 2), ("multiclass", "sklearn", 3), ("regression", "train", 0)],
)
def test_every_collection_of_a_training_by_hand(
    tmp_path: Path, task: str, api: str, classes: int
) -> None:
    out = tmp_path / "out"
    _, printed = train(
        "--task", task, "--api", api, "--rounds", "4", "--hook", str(out),
        "--collections", EVERYTHING,
    )  # fmt: skip
    trial = create_trial(str(out))
    assert trial.steps() == [0, 1, 2, 3]
    sets = ("validation_0", "validation_1") if api == "sklearn" else ("train", "validation")
    metric_names = set(trial.tensor_names(collection="metrics"))
    assert metric_names == set(printed)
    assert {name.split("-")[0] for name in metric_names} == set(sets)
    for name, by_round in printed.items():
        saved = {step: float(trial.tensor(name).value(step)[0]) for step in trial.steps()}
        assert saved == pytest.approx(by_round, rel=1e-6), name
    assert set(trial.tensor_names(collection="losses")) == {
        name for name in metric_names if not name.endswith("-auc")
    }

    labels = trial.tensor("labels").value(3)
    predictions = trial.tensor("predictions").value(3)
    assert predictions.shape == ((labels.size, 3) if classes == 3 else labels.shape)
    if classes:
        assert set(np.unique(labels)) <= set(range(classes))
        predicted = np.argmax(predictions, axis=-1) if classes == 3 else predictions > 0.5
        assert np.mean(predicted == labels) > 0.85  # the model's own output on the labels
    else:
        assert np.corrcoef(predictions, labels)[0, 1] > 0.5
    assert int(trial.tensor("hyperparameters/max_depth").value(0)[0]) == 3

    for kind in ("weight", "gain", "cover", "total_gain", "total_cover"):
        names = [n for n in trial.tensor_names() if n.startswith(f"feature_importance/{kind}/")]
        assert names, kind
        assert sum(float(trial.tensor(n).value(3)[0]) for n in names) == pytest.approx(1.0)

    features = [n for n in trial.tensor_names(collection="average_shap")]
    assert features and "average_shap/bias" not in features
    full = trial.tensor(features[0].replace("average_shap", "full_shap")).value(3)
    assert float(np.mean(full)) == pytest.approx(
        float(trial.tensor(features[0]).value(3)[0]), rel=1e-4
    )

    per_round = 3 if classes == 3 else 1
    for step in trial.steps():
        trees = trial.tensor("trees/Tree").value(step)
        assert set(trees.tolist()) == set(range(step * per_round, (step + 1) * per_round))
        ids = trial.tensor("trees/ID").value(step)
        assert all(ident.split("-")[0] == str(tree) for ident, tree in zip(ids, trees, strict=True))
    assert {"trees/Node", "trees/Feature", "trees/Gain", "trees/Cover"} <= set(
        trial.tensor_names(collection="trees")
    )


def test_the_defaults_save_the_metrics_every_10_rounds(tmp_path: Path) -> None:
    dtrain = xgb.DMatrix(np.arange(40.0).reshape(20, 2), np.arange(20.0) % 2)
    hook = smd.Hook(str(tmp_path / "out"))
    xgb.train(
        {"objective": "binary:logistic", "nthread": 1},
        dtrain,
        12,
        evals=[(dtrain, "train")],
        callbacks=[hook],
        verbose_eval=False,
    )
    hook.close()
    trial = create_trial(str(tmp_path / "out"))
    assert trial.steps() == [0, 10]
    assert trial.tensor_names() == ["train-logloss"]
    assert (tmp_path / "out" / "training_job_end.ts").exists()
    overhead = json.loads((tmp_path / "out" / "hook-overhead" / "worker_0.json").read_text())
    assert overhead["steps"] == 12


def test_a_hook_configuration_file_sets_collections_and_intervals(tmp_path: Path) -> None:
    config = tmp_path / "debughookconfig.json"
    config.write_text(
        json.dumps(
            {
                "LocalPath": str(tmp_path / "out"),
                "CollectionConfigurations": [
                    {"CollectionName": "metrics"},
                    {
                        "CollectionName": "hyperparameters",
                        "CollectionParameters": {"save_steps": "0"},
                    },
                    {"CollectionName": "trees", "CollectionParameters": {"save_interval": "3"}},
                ],
            }
        )
    )
    hook = smd.Hook.create_from_json_file(str(config))
    assert smd.get_hook() is hook  # the process's hook, as the zero-code-change path finds it
    hook.hyperparameters = {"objective": "reg:squarederror", "eta": 0.5}
    dtrain = xgb.DMatrix(np.arange(60.0).reshape(30, 2), np.arange(30.0))
    xgb.train({"eta": 0.5, "nthread": 1}, dtrain, 11, evals=[(dtrain, "train")], callbacks=[hook])
    hook.close()
    trial = create_trial(str(tmp_path / "out"))
    assert trial.tensor("train-rmse").steps() == [0, 10]
    assert trial.tensor("trees/Node").steps() == [0, 3, 6, 9]
    # save_steps adds steps to the hook's interval, as in smdebug.
    assert trial.tensor("hyperparameters/eta").steps() == [0, 10]
    assert str(trial.tensor("hyperparameters/objective").value(0)[0]) == "reg:squarederror"


def test_a_failing_hook_never_stops_the_training(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    dtrain = xgb.DMatrix(np.arange(40.0).reshape(20, 2), np.arange(20.0) % 2)
    hook = smd.Hook(str(blocker / "out"), save_config=smd.SaveConfig(save_interval=1))
    booster = xgb.train(
        {"objective": "binary:logistic", "nthread": 1},
        dtrain,
        5,
        evals=[(dtrain, "train")],
        callbacks=[hook],
        verbose_eval=False,
    )
    hook.close()
    assert booster.num_boosted_rounds() == 5
    failures = [r for r in caplog.records if "saving the XGBoost rounds failed" in r.getMessage()]
    assert len(failures) == 1


def test_bad_arguments_name_the_field() -> None:
    with pytest.raises(Exception, match="validation_data"):
        smd.Hook("out", validation_data=("missing.csv", "parquet"))
    with pytest.raises(Exception, match="include_workers"):
        smd.Hook("out", include_workers="some")
