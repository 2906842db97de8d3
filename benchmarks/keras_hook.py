"""What the Keras hook costs ``fit``, next to ``fit`` without it, on each of Keras's backends.

The training is the CPU benchmark model of ``hook_overhead.py`` written in Keras: an MLP
784-1024-1024-10 (1.86 M parameters), batches of 256 random samples, plain SGD, one CPU thread.
For each backend (each in a process of its own: ``KERAS_BACKEND`` is read when keras is
imported) these configurations run in turn, ``--repeat`` times each, the order rotating, every
run a ``fit`` of ``--steps`` batches after one warm-up ``fit``:

- no hook;
- the default hook (losses, metrics and sm_metrics every 500 steps, and at the epoch's end; the
  non-finite check inside every step);
- the default hook without its in-training checks (``nonfinite_guard=False``);
- the default hook with LossSpike and GradientNormSpike judging every step, SkipStep armed;
- weights, biases, gradients and losses as reductions (min, max, mean, l2 norm) every step;
- the same raw every step.

Printed per configuration: the median time of a step (wall clock, and the process's CPU time:
with one thread, the steadier measure on a shared machine; and the ratio of the fastest runs'
CPU times, which other processes can only slow), their ratios to no hook, and the
hook's own time a step in its callbacks (``hook.overhead``) as a share of the step without a
hook; the checks run inside the compiled step, so their cost shows in the step's time, not in
the callbacks'. On the PyTorch backend, whose step runs one operation at a time, the operations
dispatched a step (counted with a ``TorchDispatchMode`` over a few steps) measure the same
without the machine's noise. A run's time includes waiting for the hook's writer at the end.
Nothing is asserted.

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

CONFIGS = [
    "no hook",
    "default hook",
    "default hook, no checks",
    "default hook, spike rules",
    "reductions every step",
    "raw every step",
]
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
    from trainprobe.debugger import Rule, rule_configs

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
        if config == "default hook, no checks":
            return tk.Hook(directory, nonfinite_guard=False)
        if config == "default hook, spike rules":
            skip = rule_configs.ActionList(rule_configs.SkipStep())
            rules = [rule_configs.loss_spike(), rule_configs.gradient_norm_spike()]
            return tk.Hook(
                directory, training_rules=[Rule.sagemaker(r, actions=skip) for r in rules]
            )
        reductions = tk.ReductionConfig(reductions=["min", "max", "mean"], norms=["l2"])
        return tk.Hook(
            directory,
            save_config=tk.SaveConfig(save_interval=1),
            include_collections=EVERY_STEP,
            reduction_config=reductions if config == "reductions every step" else None,
        )

    times: dict[str, list[float]] = {config: [] for config in CONFIGS}
    cpu: dict[str, list[float]] = {config: [] for config in CONFIGS}
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
                started, cpu_started = time.perf_counter(), time.process_time()
                model.fit(x, y, batch_size=256, epochs=1, verbose=0, callbacks=callbacks)
                if hook is not None:
                    spent[config].append((hook.spent_seconds - before) / steps)
                    hook.close()
                times[config].append((time.perf_counter() - started) / steps)
                cpu[config].append((time.process_time() - cpu_started) / steps)
        operations = {}
        if backend == "torch":
            for config in CONFIGS:
                hook = hook_for(config, os.path.join(root, f"count-{config}"))
                callbacks = [hook] if hook is not None else []
                model.fit(x[:512], y[:512], batch_size=256, verbose=0, callbacks=callbacks)
                operations[config] = _dispatched(model, x[:2560], y[:2560], callbacks) / 10
                if hook is not None:
                    hook.close()
    return {"times": times, "cpu": cpu, "spent": spent, "operations": operations}


def _dispatched(model: object, x: object, y: object, callbacks: list[object]) -> int:
    """How many operations PyTorch dispatches while ``model`` fits ``x`` and ``y``."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):  # type: ignore[misc]
        count = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            Count.count += 1
            return func(*args, **(kwargs or {}))

    with Count():
        model.fit(x, y, batch_size=256, verbose=0, callbacks=callbacks)  # type: ignore[attr-defined]
    return Count.count


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
        cpu_base = statistics.median(found["cpu"]["no hook"])
        fastest = min(found["cpu"]["no hook"])
        print(f"{backend} (median of {arguments.repeat}, {arguments.steps} steps a run):")
        for config in CONFIGS:
            step = statistics.median(found["times"][config])
            cpu = statistics.median(found["cpu"][config])
            least = min(found["cpu"][config])
            line = (
                f"  {config:26s} {step * 1e3:7.2f} ms a step {step / base:6.3f} of no hook, "
                f"CPU {cpu * 1e3:7.2f} ms {cpu / cpu_base:6.3f} (fastest {least / fastest:6.3f})"
            )
            if found["spent"][config]:
                own = statistics.median(found["spent"][config])
                line += f"  hook's own {own * 1e3:6.3f} ms ({own / base * 100:5.2f} % of a step)"
            if config in found["operations"]:
                line += f"  {found['operations'][config]:.0f} operations a step"
            print(line)


if __name__ == "__main__":
    main()
