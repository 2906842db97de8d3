"""Read every tensor of every step of a raw run: trainprobe's trial against smdebug's.

The run is written once by trainprobe's StepWriter: the parameters and gradients of a model,
raw, every step. ``--model resnet`` (the default) is a CIFAR ResNet-20's 65 parameters (many
small and mid-sized tensors, 1.1 MB a step); ``--model mlp`` is a 784-256-128-64-10 MLP (few
large tensors, 1.9 MB a step), where the time goes mostly to copying bytes. Both trials then
read every value in full in the same process, alternating, and the ratio of the median times is
printed (target: trainprobe at least 5x faster). Both must read the same numbers; the script
checks that first.

It needs smdebug, so it runs in the smdebug reference environment; started with another
python, it builds or finds that environment (tests/reference_envs.py) and re-runs itself there::

    python benchmarks/trial_read.py [--model resnet|mlp] [--steps 100] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

import numpy as np  # noqa: E402


def _resnet20() -> dict[str, tuple[int, ...]]:
    """Parameter shapes of a CIFAR ResNet-20: 3 stages of 3 blocks of two 3x3 convolutions."""
    shapes: dict[str, tuple[int, ...]] = {"conv1.weight": (16, 3, 3, 3)}
    shapes |= {"bn1.weight": (16,), "bn1.bias": (16,)}
    channels_in = 16
    for stage, channels in enumerate((16, 32, 64), start=1):
        for block in range(3):
            for conv in (1, 2):
                prefix = f"layer{stage}.{block}"
                shapes[f"{prefix}.conv{conv}.weight"] = (channels, channels_in, 3, 3)
                shapes[f"{prefix}.bn{conv}.weight"] = (channels,)
                shapes[f"{prefix}.bn{conv}.bias"] = (channels,)
                channels_in = channels
    return shapes | {"fc.weight": (10, 64), "fc.bias": (10,)}


def _mlp() -> dict[str, tuple[int, ...]]:
    layers = [(784, 256), (256, 128), (128, 64), (64, 10)]
    shapes: dict[str, tuple[int, ...]] = {}
    for index, (fan_in, fan_out) in enumerate(layers):
        shapes[f"fc{index}.weight"] = (fan_out, fan_in)
        shapes[f"fc{index}.bias"] = (fan_out,)
    return shapes


MODELS = {"resnet": _resnet20, "mlp": _mlp}


def _in_smdebug_environment() -> None:
    try:
        import smdebug  # noqa: F401
    except ImportError:
        sys.path.insert(0, str(REPO / "tests"))
        from reference_envs import SMDEBUG, _build

        python = _build("smdebug", SMDEBUG)
        os.execv(str(python), [str(python), *sys.argv])


def write_run(out_dir: str, steps: int, model: str = "resnet") -> int:
    """A finished raw run of ``steps`` TRAIN steps; returns the bytes written."""
    from trainprobe.storage.modes import ModeKeys
    from trainprobe.storage.step_file import (
        StepWriter,
        write_collections_file,
        write_training_end,
    )

    rng = np.random.default_rng(0)
    tensors = {
        f"Net_{name}": rng.standard_normal(shape, np.float32)
        for name, shape in MODELS[model]().items()
    }
    tensors["CrossEntropyLoss_output_0"] = np.array(1.0, dtype=np.float32)
    written = 0
    for step in range(steps):
        writer = StepWriter(out_dir, step, "worker_0")
        for name, array in tensors.items():
            writer.add(name, array + step, mode=ModeKeys.TRAIN, mode_step=step)
            if not name.startswith("CrossEntropy"):
                writer.add(f"gradient/{name}", array - step, mode=ModeKeys.TRAIN, mode_step=step)
        written += writer.close()
    collection = {"include_regex": [".*"], "tensor_names": [], "save_config": None}
    write_collections_file(out_dir, "worker_0", {"all": collection}, num_workers=1)
    write_training_end(out_dir)
    return written


def read_all(create_trial: Callable[[str], object], path: str) -> tuple[int, float]:
    """Create a trial and read every value of every tensor; (values read, checksum)."""
    trial = create_trial(path)
    count = 0
    checksum = 0.0
    for name in trial.tensor_names():  # type: ignore[attr-defined]
        tensor = trial.tensor(name)  # type: ignore[attr-defined]
        for step in tensor.steps():
            value = tensor.value(step)
            checksum += float(value.reshape(-1)[-1]) if value.size else 0.0
            count += 1
    return count, checksum


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=sorted(MODELS), default="resnet")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    _in_smdebug_environment()
    os.environ["SMDEBUG_TRAINING_END_DELAY_REFRESH"] = "0"  # no 1 s sleep at the end
    import logging

    from smdebug.trials import create_trial as smdebug_trial

    from trainprobe.trials import create_trial as trainprobe_trial

    logging.getLogger("smdebug").setLevel(logging.WARNING)
    with tempfile.TemporaryDirectory() as out_dir:
        size = write_run(out_dir, args.steps, args.model)
        readers = {"smdebug": smdebug_trial, "trainprobe": trainprobe_trial}
        results = {name: read_all(reader, out_dir) for name, reader in readers.items()}
        if results["smdebug"] != results["trainprobe"]:
            raise SystemExit(f"the trials disagree: {results}")
        count = results["trainprobe"][0]
        times: dict[str, list[float]] = {name: [] for name in readers}
        for _ in range(args.repeats):
            for name, reader in readers.items():
                start = time.perf_counter()
                read_all(reader, out_dir)
                times[name].append(time.perf_counter() - start)
    medians = {name: statistics.median(values) for name, values in times.items()}
    print(f"run: {args.model}, {args.steps} steps, {count} tensor values, {size / 1e6:.1f} MB")
    for name, median in medians.items():
        rate = count / median
        print(f"{name:>10}: {median:.3f} s, median of {args.repeats} ({rate:,.0f} values/s)")
    print(f"trainprobe is {medians['smdebug'] / medians['trainprobe']:.1f}x faster than smdebug")


if __name__ == "__main__":
    main()
