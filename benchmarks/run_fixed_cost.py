"""What ``trainprobe run`` adds at a training's two ends, against ``python script.py``.

A small PyTorch training (an MLP, ``--seconds`` of steps) prints a line when its imports are done
and a line when its last step is, and runs, in turn, ``--rounds`` times each:

- ``python train.py``;
- ``trainprobe run train.py --plain`` with its defaults (the hook, the system monitor, the step
  timeline, ProfilerReport), in a throwaway trainprobe home.

From the command's start, the time to the training's first line (its start-up: for trainprobe,
the CLI, the job's runner and the training's entry before the script's own imports); and from
the training's last line, the time to the verdicts (trainprobe's ``Rules:``) and to the
command's exit (trainprobe's: the report written), against ``python train.py``'s time from its
last line to its exit. Printed: the median of each, and trainprobe's minus python's (its fixed
cost at each end). Nothing is asserted::

    python benchmarks/run_fixed_cost.py [--rounds 3] [--seconds 3] [--src OTHER/src]

``--src`` runs the trainprobe in another checkout's ``src`` (both the CLI and the job's
processes, through PYTHONPATH), for a before and after on one machine in the same minutes.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

TRAINING = """
import time

import torch
from torch import nn

print("first line", flush=True)
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
loss_fn = nn.CrossEntropyLoss()
inputs, labels = torch.randn(64, 32), torch.randint(0, 4, (64,))
end, step = time.monotonic() + {seconds}, 0
while time.monotonic() < end:
    optimizer.zero_grad()
    loss_fn(model(inputs), labels).backward()
    optimizer.step()
    step += 1
    time.sleep(0.01)
print("last line", step, flush=True)
"""


def timed_lines(command: list[str], environment: dict[str, str]) -> dict[str, float]:
    """Seconds from the start of ``command`` to its first line, its last line, trainprobe's
    ``Rules:`` line, and its exit."""
    started = time.monotonic()
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=environment
    )
    assert process.stdout is not None
    marks: dict[str, float] = {}
    for line in process.stdout:
        now = time.monotonic() - started
        for mark, text in (("first", "first line"), ("last", "last line"), ("rules", "Rules:")):
            if mark not in marks and line.startswith(text):
                marks[mark] = now
    process.wait()
    marks["exit"] = time.monotonic() - started
    if process.returncode != 0 or "last" not in marks:
        raise SystemExit(f"{' '.join(command)} failed (exit status {process.returncode})")
    return marks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0, help="the training's length")
    parser.add_argument("--src", default=str(REPO / "src"), help="the trainprobe to measure")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="trainprobe-fixed-cost-"))
    try:
        script = root / "train.py"
        script.write_text(textwrap.dedent(TRAINING.format(seconds=args.seconds)))
        environment = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(
                [os.path.abspath(args.src), *filter(None, [os.environ.get("PYTHONPATH")])]
            ),
            "TRAINPROBE_HOME": str(root / "home"),
            "PYTHONUNBUFFERED": "1",
        }
        plain = [sys.executable, str(script)]
        under = [sys.executable, "-m", "trainprobe.cli.main", "run", str(script), "--plain"]
        under += ["--output", str(root / "out")]
        runs: dict[str, list[dict[str, float]]] = {"python": [], "trainprobe run": []}
        for _ in range(args.rounds):
            runs["python"].append(timed_lines(plain, environment))
            runs["trainprobe run"].append(timed_lines(under, environment))
        print(f"{args.rounds} rounds, a {args.seconds:g} s training, trainprobe from {args.src}")

        def median(name: str, since: str, until: str) -> float:
            return statistics.median(run[until] - run.get(since, 0.0) for run in runs[name])

        start = {name: median(name, "", "first") for name in runs}
        end = {name: median(name, "last", "exit") for name in runs}
        verdicts = median("trainprobe run", "last", "rules")
        print(f"{'':38s} {'python':>8s} {'run':>8s} {'run - python':>13s}")
        print(
            f"{'command to first line (s)':38s} {start['python']:8.2f} "
            f"{start['trainprobe run']:8.2f} {start['trainprobe run'] - start['python']:13.2f}"
        )
        print(
            f"{'last line to verdicts (s)':38s} {end['python']:8.2f} {verdicts:8.2f} "
            f"{verdicts - end['python']:13.2f}"
        )
        print(
            f"{'last line to exit, report written (s)':38s} {end['python']:8.2f} "
            f"{end['trainprobe run']:8.2f} {end['trainprobe run'] - end['python']:13.2f}"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
