"""A tiny XGBoost training on scikit-learn data, without a line of trainprobe unless ``--hook``.

``--task binary|multiclass|regression`` picks the data (breast cancer, wine, diabetes) and the
objective; ``--api train|sklearn`` trains with ``xgb.train`` (evaluation sets ``train`` and
``validation``) or with ``XGBClassifier``/``XGBRegressor`` (``validation_0`` and
``validation_1``); ``--decisive`` replaces the data by one where feature 0 alone decides the
label; ``--noisy`` flips a third of the labels (a deep model then overfits). ``--hook DIR``
saves with trainprobe's hook made by hand, every ``--save-interval`` rounds, with ``--collections``.
It prints ``metric <set>-<name> <round> <value>`` for each round and ``rounds <n>`` at the end.
"""

from __future__ import annotations

import argparse

import numpy as np
import xgboost as xgb
from sklearn.datasets import load_breast_cancer, load_diabetes, load_wine
from sklearn.model_selection import train_test_split


def data(task: str, decisive: bool, noisy: bool) -> tuple[np.ndarray, np.ndarray]:
    if decisive:
        generator = np.random.default_rng(0)
        features = generator.normal(size=(400, 8))
        return features, (features[:, 0] > 0).astype(np.float64)
    loader = {"binary": load_breast_cancer, "multiclass": load_wine, "regression": load_diabetes}
    features, labels = loader[task](return_X_y=True)
    if noisy:
        generator = np.random.default_rng(1)
        flip = generator.random(labels.shape[0]) < 0.33
        labels = np.where(flip, 1 - labels, labels)
    return features, labels.astype(np.float64)


def params(task: str, max_depth: int, eta: float) -> dict[str, object]:
    chosen: dict[str, object] = {"max_depth": max_depth, "eta": eta, "nthread": 1}
    if task == "binary":
        chosen.update(objective="binary:logistic", eval_metric=["logloss", "auc"])
    elif task == "multiclass":
        chosen.update(objective="multi:softprob", num_class=3, eval_metric="mlogloss")
    else:
        chosen.update(objective="reg:squarederror", eval_metric="rmse")
    return chosen


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--task", default="binary")
    parser.add_argument("--api", default="train")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--max-depth", type=int, default=3)
    parser.add_argument("--eta", type=float, default=0.3)
    parser.add_argument("--min-child-weight", type=float, default=1.0)
    parser.add_argument("--decisive", action="store_true")
    parser.add_argument("--noisy", action="store_true")
    parser.add_argument("--hook")
    parser.add_argument("--save-interval", type=int, default=1)
    parser.add_argument("--collections", default="")
    args = parser.parse_args()

    features, labels = data(args.task, args.decisive, args.noisy)
    task = "binary" if args.decisive else args.task
    x_train, x_val, y_train, y_val = train_test_split(features, labels, random_state=0)
    chosen = params(task, args.max_depth, args.eta)
    chosen["min_child_weight"] = args.min_child_weight
    callbacks = []
    dtrain, dval = xgb.DMatrix(x_train, y_train), xgb.DMatrix(x_val, y_val)
    if args.hook:
        import trainprobe.xgboost as smd

        hook = smd.Hook(
            out_dir=args.hook,
            save_config=smd.SaveConfig(save_interval=args.save_interval),
            include_collections=[c for c in args.collections.split(",") if c],
            hyperparameters=chosen,
            train_data=dtrain,
            validation_data=dval,
        )
        callbacks.append(hook)
    if args.api == "train":
        history: dict[str, dict[str, list[float]]] = {}
        xgb.train(
            chosen,
            dtrain,
            args.rounds,
            evals=[(dtrain, "train"), (dval, "validation")],
            evals_result=history,
            callbacks=callbacks,
            verbose_eval=False,
        )
    else:
        estimator = xgb.XGBRegressor if task == "regression" else xgb.XGBClassifier
        keywords = {k: v for k, v in chosen.items() if k not in ("eta", "num_class")}
        model = estimator(
            n_estimators=args.rounds, learning_rate=args.eta, callbacks=callbacks, **keywords
        )
        model.fit(x_train, y_train, eval_set=[(x_train, y_train), (x_val, y_val)], verbose=False)
        history = model.evals_result()
    for data_name, metrics in history.items():
        for metric, values in metrics.items():
            for round_number, value in enumerate(values):
                print(f"metric {data_name}-{metric} {round_number} {value!r}")
    print(f"rounds {args.rounds}")


if __name__ == "__main__":
    main()
