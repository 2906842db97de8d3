"""What the Keras hook costs ``fit``, next to ``fit`` without it, on each of Keras's backends.

The training is the CPU benchmark model of ``hook_overhead.py`` written in Keras: an MLP
784-1024-1024-10 (1.86 M parameters), batches of 256 random samples, plain SGD, one CPU thread.
For each backend (each in a process of its own: ``KERAS_BACKEND`` is read when keras is
imported) these configurations run in turn, ``--repeat`` times each, the order rotating, every
run a ``fit`` of ``--steps`` batches after one warm-up ``fit``:

- no hook;
- the default hook (losses, metrics and sm_metrics every 500 steps, and at the epoch's end);
- weights, biases, gradients and losses as reductions (min, max, mean, l2 norm) every step;
- the same raw every step.

Printed per configuration: the median time of a step, its ratio to no hook, and the hook's own
time a step inside the training's thread (``hook.overhead``) as a share of the step without a
hook. A run's time includes waiting for the hook's writer at the end. Nothing is asserted.

    python benchmarks/keras_hook.py [--backends tensorflow,jax,torch] [--steps 60] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CONFIGS = ["no hook", "default hook", "reductions every step", "raw every step"]
EVERY_STEP = ["weights", "biases", "gradients", "losses"]


def _one_thread() -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("TF_NUM_INTRAOP_THREADS", "1")
    os.environ.setdefault("TF_NUM_INTEROP_THREADS", "1")
    os.environ.setdefault(
        "XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    )


def _measure(backend: str, steps: int, repeat: int) -> dict[str, object]:
    """Run in the backend's own process: the configurations' step times and hook times."""
    _one_thread()
    import keras
    import numpy as np

    if backend == "torch":
        import torch

        torch.set_num_threads(1)
    elif backend == "tensorflow":
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(1)

    import trainprobe.keras as tk

    keras.utils.set_random_seed(0)
    x = np.random.default_rng(0).normal(size=(256 * steps, 784)).astype("float32")
    y = np.random.default_rng(1).integers(0, 10, size=(256 * steps,))
    model = keras.Sequential(
        [
            keras.Input((784,)),
            keras.layers.Dense(1024, activation="relu"),
            keras.layers.Dense(1024, activation="relu"),
            keras.layers.Dense(10),
        ]
    )
    model.compile(
        keras.optimizers.SGD(0.01),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    model.fit(x[:2560], y[:2560], batch_size=256, epochs=1, verbose=0)  # compile, warm up

    def hook_for(config: str, directory: str) -> tk.Hook | None:
        if config == "no hook":
            return None
        if config == "default hook":
            return tk.Hook(directory)
        reductions = tk.ReductionConfig(reductions=["min", "max", "mean"], norms=["l2"])
        return tk.Hook(
            directory,
            save_config=tk.SaveConfig(save_interval=1),
            include_collections=EVERY_STEP,
            reduction_config=reductions if config == "reductions every step" else None,
        )

    times: dict[str, list[float]] = {config: [] for config in CONFIGS}
    spent: dict[str, list[float]] = {config: [] for config in CONFIGS}
    with tempfile.TemporaryDirectory() as root:
        for round_ in range(repeat):
            order = CONFIGS[round_ % len(CONFIGS) :] + CONFIGS[: round_ % len(CONFIGS)]
            for config in order:
                hook = hook_for(config, os.path.join(root, f"{round_}-{config}"))
                callbacks = [hook] if hook is not None else []
                # The hook's first fit installs its taps and traces the step again: not timed.
                model.fit(
                    x[:512], y[:512], batch_size=256, epochs=1, verbose=0, callbacks=callbacks
                )
                before = hook.spent_seconds if hook is not None else 0.0
                started = time.perf_counter()
                model.fit(x, y, batch_size=256, epochs=1, verbose=0, callbacks=callbacks)
                if hook is not None:
                    spent[config].append((hook.spent_seconds - before) / steps)
                    hook.close()
                times[config].append((time.perf_counter() - started) / steps)
    return {"times": times, "spent": spent}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="tensorflow,jax,torch")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--inner", default="", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.inner:
        print(json.dumps(_measure(arguments.inner, arguments.steps, arguments.repeat)))
        return
    for backend in arguments.backends.split(","):
        finished = subprocess.run(
            [
                sys.executable,
                str(Path(__file__).resolve()),
                "--inner",
                backend,
                "--steps",
                str(arguments.steps),
                "--repeat",
                str(arguments.repeat),
            ],
            env={**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3"},
            capture_output=True,
            text=True,
            check=False,
        )
        if finished.returncode != 0:
            print(f"{backend}: failed\n{finished.stderr[-3000:]}")
            continue
        found = json.loads(finished.stdout.strip().splitlines()[-1])
        base = statistics.median(found["times"]["no hook"])
        print(f"{backend} (median of {arguments.repeat}, {arguments.steps} steps a run):")
        for config in CONFIGS:
            step = statistics.median(found["times"][config])
            line = f"  {config:24s} {step * 1e3:7.2f} ms a step  {step / base:6.3f} of no hook"
            if found["spent"][config]:
                own = statistics.median(found["spent"][config])
                line += f"  hook's own {own * 1e3:6.3f} ms ({own / base * 100:5.2f} % of a step)"
            print(line)


if __name__ == "__main__":
    main()
