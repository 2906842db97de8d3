"""SageMaker's built-in XGBoost algorithm, for a job that names the XGBoost container and no script.

A CreateTrainingJob request whose ``AlgorithmSpecification.TrainingImage`` is SageMaker's XGBoost
image (``...sagemaker-xgboost:1.7-1``) and that gives no script trains as the container's
algorithm mode does:

- the ``train`` channel (and the ``validation`` channel, if any) is a local directory holding a
  CSV file (the label in the first column, no header) or a LIBSVM file; the first data file of
  each, by name, is read;
- the HyperParameters are XGBoost's: ``num_round`` (required) rounds with the others as the
  booster's parameters, evaluated on ``train`` and ``validation`` every round;
- the model is saved as ``xgboost-model`` in the job's model directory.

The job's hook comes in as for any XGBoost script (``xgboost_auto_hook``): this module is run as
the job's training script.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from trainprobe import settings

__all__ = ["main", "read_channel"]


def _first_data_file(directory: str) -> str:
    names = sorted(
        name
        for name in os.listdir(directory)
        if not name.startswith((".", "_")) and os.path.isfile(os.path.join(directory, name))
    )
    if not names:
        raise SystemExit(f"xgboost algorithm: the channel directory {directory} has no data file")
    return os.path.join(directory, names[0])


def read_channel(directory: str) -> Any:
    """The DMatrix of a channel's first data file (CSV with the label first, or LIBSVM)."""
    import numpy as np
    import xgboost as xgb

    path = _first_data_file(directory)
    with open(path, encoding="utf-8") as file:
        first = file.readline()
    if ":" in first.split(",")[-1] or (" " in first.strip() and "," not in first):
        return xgb.DMatrix(f"{path}?format=libsvm")
    table = np.loadtxt(path, delimiter=",", ndmin=2)
    return xgb.DMatrix(table[:, 1:], label=table[:, 0])


def main() -> None:
    """Train as SageMaker's XGBoost algorithm does (see the module docstring)."""
    import xgboost as xgb

    hyperparameters: dict[str, Any] = json.loads(settings.HYPERPARAMETERS.get() or "{}")
    if "num_round" not in hyperparameters:
        raise SystemExit("xgboost algorithm: the hyperparameter num_round is required")
    rounds = int(hyperparameters.pop("num_round"))
    train_dir = settings.TRAIN_CHANNEL.get()
    if not train_dir:
        raise SystemExit("xgboost algorithm: the job has no train channel (InputDataConfig)")
    dtrain = read_channel(train_dir)
    evals = [(dtrain, "train")]
    validation_dir = settings.VALIDATION_CHANNEL.get()
    if validation_dir:
        evals.append((read_channel(validation_dir), "validation"))
    booster = xgb.train(hyperparameters, dtrain, rounds, evals=evals, verbose_eval=True)
    model_dir = settings.MODEL_DIR.get()
    os.makedirs(model_dir, exist_ok=True)
    booster.save_model(os.path.join(model_dir, "xgboost-model"))
    print(f"xgboost algorithm: {rounds} rounds, model saved in {model_dir}", file=sys.stderr)


if __name__ == "__main__":
    main()
