"""What the XGBoost hook costs a training, next to no hook (and next to smdebug's XGBoost hook).

The training: binary classification of synthetic data (2 000 training rows, 1 000 validation
rows, 20 features), ``max_depth`` 6, 30 rounds, one thread, evaluated on both sets every round.
These configurations run in turn, ``--repeat`` times each (the order rotating), and the median
time of each is printed with its ratio to no hook:

- no hook;
- the default hook (the metrics every 10 rounds);
- everything every round: metrics, losses, hyperparameters, predictions, labels, the 5 feature
  importances, average and full SHAP values on the training data, and the trees.

A run's time includes closing the hook (waiting for its writer to finish). If the smdebug
XGBoost reference environment exists (``.cache/smdebug-xgboost``, built by the tests), the same
configurations are measured with smdebug's hook there, in a subprocess, against that
environment's own no-hook time (it has XGBoost 1.7, whose speed differs from this one's).
Nothing is asserted.

    python benchmarks/xgboost_hook.py [--rounds 30] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
CONFIGS = ["no hook", "default hook (metrics every 10 rounds)", "everything every round"]
EVERYTHING = [
    "metrics",
    "losses",
    "hyperparameters",
    "predictions",
    "labels",
    "feature_importance",
    "average_shap",
    "full_shap",
    "trees",
]


def _data() -> tuple[Any, Any]:
    import numpy as np
    import xgboost as xgb

    generator = np.random.default_rng(0)
    features = generator.normal(size=(3000, 20))
    signal = features[:, 0] + 0.5 * features[:, 1] * features[:, 2] - 0.3 * features[:, 3]
    labels = (signal + generator.normal(scale=0.5, size=3000) > 0).astype(float)
    return xgb.DMatrix(features[:2000], labels[:2000]), xgb.DMatrix(features[2000:], labels[2000:])


def _bytes(directory: str) -> int:
    return sum(path.stat().st_size for path in Path(directory).rglob("*") if path.is_file())


def _run_once(smd: Any, config: str, rounds: int, root: str) -> tuple[float, int]:
    import xgboost as xgb

    dtrain, dval = _data()
    params = {"objective": "binary:logistic", "max_depth": 6, "eta": 0.1, "nthread": 1}
    out = tempfile.mkdtemp(dir=root)
    shutil.rmtree(out)
    hook = None
    if config == CONFIGS[1]:
        hook = smd.Hook(out_dir=out)
    elif config == CONFIGS[2]:
        hook = smd.Hook(
            out_dir=out,
            save_config=smd.SaveConfig(save_interval=1),
            include_collections=EVERYTHING,
            hyperparameters=params,
            train_data=dtrain,
            validation_data=dval,
        )
    started = time.perf_counter()
    xgb.train(
        params,
        dtrain,
        rounds,
        evals=[(dtrain, "train"), (dval, "validation")],
        callbacks=[hook] if hook is not None else [],
        verbose_eval=False,
    )
    if hook is not None and hasattr(hook, "close"):
        hook.close()
    elapsed = time.perf_counter() - started
    written = _bytes(out) if os.path.isdir(out) else 0
    shutil.rmtree(out, ignore_errors=True)
    return elapsed, written


def measure(module: str, rounds: int, repeat: int) -> dict[str, dict[str, float]]:
    """Median seconds and bytes of each configuration, with ``module``'s hook."""
    import importlib

    smd = importlib.import_module(module)
    root = tempfile.mkdtemp(prefix="xgboost-hook-bench-")
    times: dict[str, list[float]] = {config: [] for config in CONFIGS}
    written: dict[str, int] = {}
    try:
        _run_once(smd, CONFIGS[0], 5, root)  # warm-up: imports, first DMatrix
        for index in range(repeat):
            order = CONFIGS[index % len(CONFIGS) :] + CONFIGS[: index % len(CONFIGS)]
            for config in order:
                seconds, size = _run_once(smd, config, rounds, root)
                times[config].append(seconds)
                written[config] = size
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return {
        config: {"seconds": statistics.median(times[config]), "bytes": written[config]}
        for config in CONFIGS
    }


def _print(title: str, results: dict[str, dict[str, float]]) -> None:
    base = results[CONFIGS[0]]["seconds"]
    print(f"\n{title}")
    print(f"  {'configuration':<42} {'seconds':>8} {'vs no hook':>10} {'written':>12}")
    for config in CONFIGS:
        row = results[config]
        ratio = base / row["seconds"]
        print(f"  {config:<42} {row['seconds']:>8.3f} {ratio:>9.2f}x {int(row['bytes']):>12,}")


def _smdebug(rounds: int, repeat: int) -> dict[str, dict[str, float]] | str:
    cache = Path(os.environ.get("TRAINPROBE_TEST_CACHE", REPO / ".cache"))
    python = cache / "smdebug-xgboost" / "bin" / "python"
    if not python.exists():
        return f"not measured: no smdebug-xgboost environment at {python.parent.parent}"
    finished = subprocess.run(
        [str(python), __file__, "--module", "smdebug.xgboost", "--rounds", str(rounds),
         "--repeat", str(repeat), "--json"],
        capture_output=True,
        text=True,
        timeout=3600,
    )  # fmt: skip
    if finished.returncode != 0:
        return "failed: " + finished.stderr.strip().splitlines()[-1]
    result: dict[str, dict[str, float]] = json.loads(finished.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--module", default="trainprobe.xgboost", help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.json:
        print(json.dumps(measure(arguments.module, arguments.rounds, arguments.repeat)))
        return
    import xgboost

    ours = measure("trainprobe.xgboost", arguments.rounds, arguments.repeat)
    _print(f"trainprobe's hook (XGBoost {xgboost.__version__}), median of {arguments.repeat}", ours)
    theirs = _smdebug(arguments.rounds, arguments.repeat)
    if isinstance(theirs, str):
        print(f"\nsmdebug 1.0.34's hook: {theirs}")
    else:
        _print(f"smdebug 1.0.34's hook (XGBoost 1.7.6), median of {arguments.repeat}", theirs)


if __name__ == "__main__":
    main()
