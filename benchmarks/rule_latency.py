"""How fast rules catch an issue in a live PyTorch job, and what following the job costs it.

One run holds both measurements, interleaved over ``--rounds`` rounds, on the same machine:

- the baseline: the training with the trainprobe hook and no rule;
- the same training while the 20 built-in debugging rules follow it live, in one process, as a
  job's runner starts a job's built-in rules (``--layout group``, the default: one rule engine
  reading each new step once for all of them); ``--layout processes`` starts each in its own
  process (``trainprobe rules run``), as a job's runner did until it grouped them.

The training (an MLP 784-1024-1024-10, batch 256, SGD, one CPU thread, an EVAL pass every 200
steps) saves weights, biases, gradients, losses, ReLU inputs and outputs, labels, predictions and
input images every ``--save-interval`` steps. It carries two offending tensors: at
``--zero-step`` the first layer's weights and biases become zero (AllZero, VanishingGradient,
WeightUpdateRatio and others fire), and from ``--nan-step`` on, an input holds a NaN
(ExplodingTensor fires). The rules are started, and ready, before the training begins, as a job
runner should start them: at niceness 10, with one BLAS thread each (idle BLAS threads spin on
every core). SimilarAcrossRuns compares with the round's baseline.

Latency, for each rule that finds an issue: from the moment the step it fired at was written
(its index file's time) to the moment its status became IssuesFound (``LastModifiedTime`` in its
``status.json``). Slowdown: the training's own time (first step to last, inside the script)
with rules over without; and, less noisy on a shared machine, the CPU time the rule processes
used while the training ran, as a share of one core. Targets: latency median < 1 s and max < 3 s;
slowdown < 5 %. Prints the figures; asserts nothing::

    python benchmarks/rule_latency.py [--rounds 3] [--steps 600] [--save-interval 25]
    python benchmarks/rule_latency.py [...] --layout processes  # one process per rule
    python benchmarks/rule_latency.py --rounds 1 --steps 200    # quick smoke run

``--baseline-src DIR`` also follows each round's training with the rules of another checkout
(``DIR`` is its ``src``; ``git worktree add /tmp/old COMMIT`` makes one), in the same run and
on the same training, and prints both sets of figures: on a shared machine the only fair
comparison with an older commit. ``--baseline-layout`` starts those rules another way (an older
job's runner started one process per rule)::

    python benchmarks/rule_latency.py --baseline-src /tmp/old/src [--baseline-layout processes]

``--busy-rule`` measures rule isolation instead: one custom rule that burns the CPU at every step
(BLAS on every core it may use), started as a plain process and then as a job's runner starts
rules (``trainprobe.jobs.runner.process_settings``: lower priority, a memory limit, a share of the
cores, thread pools sized to it); the training's own time with each, over its time alone in the
same round::

    python benchmarks/rule_latency.py --busy-rule [--rounds 3] [--steps 300]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
ENVIRONMENT = {**os.environ, "PYTHONPATH": str(REPO / "src"), "PYTHONUNBUFFERED": "1"}
# Rule processes are background work, started as a job runner should start them: at a lower
# priority than the training, and with one BLAS thread each (idle BLAS threads spin on every
# core and take it from the training).
RULE_NICENESS = 10
RULE_ENVIRONMENT = {
    **ENVIRONMENT,
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}

TARGET_MEDIAN_S = 1.0
TARGET_MAX_S = 3.0
TARGET_SLOWDOWN = 0.05

SAVED_COLLECTIONS = ["weights", "biases", "gradients", "losses", "relu_input", "relu_output"]

# The 20 built-in debugging rules, with the parameters this training needs to feed them.
RULES: dict[str, dict[str, str]] = {
    "VanishingGradient": {},
    "ExplodingTensor": {},
    "AllZero": {"collection_names": "weights"},
    "LossNotDecreasing": {},
    "Overfit": {},
    "Overtraining": {},
    "WeightUpdateRatio": {},
    "UnchangedTensor": {"collection_names": "weights"},
    "DeadRelu": {},
    "SaturatedActivation": {},
    "TensorVariance": {"collection_names": "weights", "max_threshold": "1e6"},
    "PoorWeightInitialization": {},
    "StalledTrainingRule": {},
    "SimilarAcrossRuns": {},
    "ClassImbalance": {"samples": "64"},
    "Confusion": {},
    "CheckInputImages": {"regex": ".*input_image", "threshold_samples": "64"},
    "NLPSequenceRatio": {},
    "FeatureImportanceOverweight": {},
    "TreeDepth": {},
}


# ----- the training (run as a subprocess: ``rule_latency.py train OUT ...``) ----------------


def train(arguments: argparse.Namespace) -> None:
    """The training both runs of a round share; writes its own timing to ``--result``."""
    import torch
    from torch import nn

    import trainprobe.pytorch as smd

    torch.set_num_threads(1)
    torch.manual_seed(0)

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1, self.layer1_relu = nn.Linear(784, 1024), nn.ReLU()
            self.fc2, self.layer2_relu = nn.Linear(1024, 1024), nn.ReLU()
            self.fc3 = nn.Linear(1024, 10)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            hidden = self.layer2_relu(self.fc2(self.layer1_relu(self.fc1(x))))
            return self.fc3(hidden)

    model = Net()
    loss_fn = nn.CrossEntropyLoss()
    hook = smd.Hook(
        out_dir=arguments.out,
        save_config=smd.SaveConfig(save_interval=arguments.save_interval),
        include_collections=SAVED_COLLECTIONS,
    )
    hook.register_module(model)
    hook.register_loss(loss_fn)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    generator = torch.Generator().manual_seed(1)
    teacher = torch.randn(784, 10, generator=generator)

    def batch(size: int = 256) -> tuple[torch.Tensor, torch.Tensor]:
        inputs = torch.randn(size, 784, generator=generator)
        return inputs, (inputs @ teacher).argmax(dim=1)

    started = time.perf_counter()
    for step in range(arguments.steps):
        hook.set_mode(smd.modes.TRAIN)
        inputs, labels = batch()
        if step >= arguments.nan_step:
            inputs[0, 0] = float("nan")
        if step == arguments.zero_step:
            with torch.no_grad():
                model.fc1.weight.zero_()
                model.fc1.bias.zero_()
        optimizer.zero_grad()
        outputs = model(inputs)
        loss = loss_fn(outputs, labels)
        loss.backward()
        optimizer.step()
        hook.save_tensor("labels", labels, "labels")
        hook.save_tensor("predictions", outputs.detach(), "predictions")
        hook.save_tensor("input_image", inputs.view(-1, 1, 28, 28), "input_image")
        if step % 200 == 199:
            hook.set_mode(smd.modes.EVAL)
            with torch.no_grad():
                for _ in range(5):
                    inputs, labels = batch()
                    loss_fn(model(inputs), labels)
    hook.close()
    seconds = time.perf_counter() - started
    Path(arguments.result).write_text(json.dumps({"seconds": seconds, "steps": arguments.steps}))


# ----- the measurement -----------------------------------------------------------------------


def run_training(out: Path, result: Path, arguments: argparse.Namespace) -> float:
    command = [sys.executable, __file__, "train", str(out), "--result", str(result)]
    command += ["--steps", str(arguments.steps), "--save-interval", str(arguments.save_interval)]
    command += ["--zero-step", str(arguments.zero_step), "--nan-step", str(arguments.nan_step)]
    subprocess.run(command, check=True, env=ENVIRONMENT, cwd=REPO)
    return float(json.loads(result.read_text())["seconds"])


def rule_parameters(name: str, baseline: Path) -> dict[str, str]:
    parameters = dict(RULES[name])
    if name == "SimilarAcrossRuns":
        parameters["other_trial_0"] = str(baseline)
    return parameters


def start_rules(
    job: Path, baseline: Path, layout: str, scratch: Path, src: Path = REPO / "src"
) -> list[subprocess.Popen[str]]:
    """Start the 20 rules (trainprobe from ``src``) on ``job`` (not written yet); return once
    every one is waiting."""
    environment = {**RULE_ENVIRONMENT, "PYTHONPATH": str(src)}
    # The CLI decides between a job and a plain output when it first looks: make it a job.
    (job / "debug-output").mkdir(parents=True, exist_ok=True)
    processes = []
    if layout == "processes":
        for name in RULES:
            command = [sys.executable, "-m", "trainprobe.cli.main", "rules", "run", name]
            for key, value in rule_parameters(name, baseline).items():
                command += ["--param", f"{key}={value}"]
            command += ["--wait", "600", "--quiet", str(job)]
            processes.append(_popen(command, scratch / f"{name}.log", environment))
    else:
        script = scratch / "group.py"
        definitions = {name: rule_parameters(name, baseline) for name in RULES}
        script.write_text(
            "import json, sys\n"
            "from trainprobe.rules.definition import RuleDefinition\n"
            "from trainprobe.rules.runner import RuleRunner\n"
            f"definitions = json.loads({json.dumps(json.dumps(definitions))})\n"
            "rules = [RuleDefinition.for_builtin(n, p) for n, p in definitions.items()]\n"
            f"RuleRunner(rules, {str(job / 'debug-output')!r},\n"
            f"           output_dir={str(job / 'rule-output')!r}, no_data_timeout=600).run()\n"
        )
        processes.append(_popen([sys.executable, str(script)], scratch / "group.log", environment))
    # Ready = each rule has written its first status (InProgress, waiting for tensors).
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        ready = [(job / "rule-output" / name / "status.json").exists() for name in RULES]
        if all(ready):
            break
        if any(process.poll() not in (None, 0, 1, 2) for process in processes):
            raise RuntimeError(f"a rule process failed; see the logs in {scratch}")
        time.sleep(0.2)
    return processes


def _popen(command: list[str], log: Path, environment: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        command,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        text=True,
        env=environment,
        cwd=REPO,
        preexec_fn=lambda: os.nice(RULE_NICENESS),
    )


class RuleCpu(threading.Thread):
    """The CPU time the rule processes spend from the training's first saved step (the
    collections file appears): until ``stop()`` (the training's end), and until they end (a
    process that falls behind does the rest of its work after the training)."""

    def __init__(self, processes: list[subprocess.Popen[str]], out: Path) -> None:
        super().__init__(daemon=True)
        self.processes = [psutil.Process(process.pid) for process in processes]
        self.out = out
        self.started: float | None = None
        self._last = [0.0] * len(self.processes)  # each one's CPU seconds when last seen

    def total(self) -> float:
        for place, process in enumerate(self.processes):
            with contextlib.suppress(psutil.Error):
                times = process.cpu_times()
                self._last[place] = times.user + times.system
        return sum(self._last)

    def run(self) -> None:
        while not (self.out / "collections").exists():
            time.sleep(0.01)
        self.started = self.total()
        while any(_alive(process) for process in self.processes):
            self.total()
            time.sleep(0.05)

    def stop(self) -> float:
        """CPU seconds used since the training's first save."""
        after = self.total()
        return after - (self.started if self.started is not None else after)

    def until_end(self) -> float:
        """CPU seconds used since the training's first save until the processes ended (call
        once they have)."""
        self.join(timeout=5)
        return sum(self._last) - (self.started or 0.0)


def _alive(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def step_written_at(out: Path, step: int) -> float:
    """When ``step`` was written: the latest mtime of its index files."""
    index_dir = out / "index" / f"{step // 1000:09d}"
    times = [path.stat().st_mtime for path in index_dir.glob(f"{step:012d}_*.json")]
    if not times:
        raise FileNotFoundError(f"no index file for step {step} in {index_dir}")
    return max(times)


def latencies(job: Path) -> list[tuple[str, int, float]]:
    """(rule, step it fired at, latency in seconds) for every rule that found an issue."""
    found = []
    for name in RULES:
        directory = job / "rule-output" / name
        status = json.loads((directory / "status.json").read_text())
        if status["RuleEvaluationStatus"] != "IssuesFound":
            continue
        lines = (directory / "evaluations.jsonl").read_text().splitlines()
        fired = [json.loads(line) for line in lines if '"IssuesFound"' in line]
        step = int(fired[0]["step"])
        written = step_written_at(job / "debug-output", step)
        found.append((name, step, status["LastModifiedTime"] - written))
    return found


BUSY_RULE = """
import numpy as np

from trainprobe.rules import Rule


class Busy(Rule):
    def __init__(self, base_trial):
        super().__init__(base_trial, other_trials=None)
        self.matrix = np.random.default_rng(0).standard_normal((600, 600))

    def invoke_at_step(self, step):
        for _ in range(20):
            self.matrix = np.tanh(self.matrix @ self.matrix / 600.0)
        return False
"""


def start_busy_rule(job: Path, scratch: Path, isolated: bool) -> subprocess.Popen[bytes]:
    """Start the busy rule on ``job``, plain or as a job's runner starts rules; returns once it
    waits for tensors."""
    from trainprobe.jobs.child_process import ChildProcess
    from trainprobe.jobs.runner.process_settings import process_settings

    (job / "debug-output").mkdir(parents=True, exist_ok=True)
    source = scratch / "busy_rule.py"
    source.write_text(BUSY_RULE)
    script = scratch / "busy.py"
    script.write_text(
        "from trainprobe.rules.definition import RuleDefinition\n"
        "from trainprobe.rules.runner import RuleRunner\n"
        f"rule = RuleDefinition.for_custom({str(source)!r}, 'Busy', {{}}, name='Busy')\n"
        f"RuleRunner(rule, {str(job / 'debug-output')!r}, output_dir={str(job / 'rule-output')!r},"
        " no_data_timeout=600, every_step=True).run()\n"
    )
    settings = process_settings()
    environment = {**ENVIRONMENT, **(settings.rule_environment() if isolated else {})}
    child = ChildProcess(
        "busy rule",
        [sys.executable, str(script)],
        cwd=str(REPO),
        environment=environment,
        log_path=str(scratch / f"busy-{'isolated' if isolated else 'plain'}.log"),
        limits=settings.rule_limits() if isolated else None,
    )
    status = job / "rule-output" / "Busy" / "status.json"
    deadline = time.monotonic() + 300
    while not status.exists() and time.monotonic() < deadline:
        if child.poll() is not None:
            raise RuntimeError(f"the busy rule failed; see the logs in {scratch}")
        time.sleep(0.2)
    return child.process


def busy_rule(arguments: argparse.Namespace) -> None:
    """The training alone, with the busy rule as a plain process, and with it isolated."""
    sys.path.insert(0, str(REPO / "src"))
    from trainprobe.jobs.runner.process_settings import process_settings

    plain_ratios: list[float] = []
    isolated_ratios: list[float] = []
    with tempfile.TemporaryDirectory() as scratch_name:
        scratch = Path(scratch_name)
        for round_number in range(arguments.rounds):
            alone = run_training(scratch / f"alone-{round_number}", scratch / "a.json", arguments)
            timed = []
            for isolated in (False, True):
                job = scratch / f"{'isolated' if isolated else 'plain'}-{round_number}"
                rule = start_busy_rule(job, scratch, isolated)
                try:
                    timed.append(run_training(job / "debug-output", scratch / "b.json", arguments))
                finally:
                    rule.terminate()
                    rule.wait(timeout=60)
            plain_ratios.append(timed[0] / alone)
            isolated_ratios.append(timed[1] / alone)
            print(
                f"round {round_number + 1}: training {alone:.2f} s alone, {timed[0]:.2f} s beside "
                f"a busy rule ({timed[0] / alone:.2f}x), {timed[1]:.2f} s beside it isolated "
                f"({timed[1] / alone:.2f}x)",
                flush=True,
            )
    settings = process_settings()
    print(
        f"a busy custom rule's effect on the training's time (ratio to the training alone, "
        f"median of {arguments.rounds}): as a plain process "
        f"{statistics.median(plain_ratios):.2f}x; isolated as a job's runner starts rules "
        f"(niceness {settings.rule_niceness}, {settings.rule_memory_limit_mb} MB, "
        f"{settings.rule_cpus or os.cpu_count()} of {os.cpu_count()} cores) "
        f"{statistics.median(isolated_ratios):.2f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--save-interval", type=int, default=25)
    parser.add_argument("--zero-step", type=int, default=None, help="default: steps * 0.4")
    parser.add_argument("--nan-step", type=int, default=None, help="default: steps * 0.7")
    parser.add_argument("--layout", choices=("processes", "group"), default="group")
    parser.add_argument(
        "--busy-rule", action="store_true", help="measure a busy rule's effect instead"
    )
    parser.add_argument(
        "--baseline-src", help="also follow each training with the rules of this src (compare)"
    )
    parser.add_argument(
        "--baseline-layout",
        choices=("processes", "group"),
        help="how the --baseline-src rules are started (default: --layout)",
    )
    arguments = parser.parse_args()
    if arguments.zero_step is None:
        arguments.zero_step = int(arguments.steps * 0.4)
    if arguments.nan_step is None:
        arguments.nan_step = int(arguments.steps * 0.7)
    if arguments.busy_rule:
        busy_rule(arguments)
        return

    variants = {"this checkout": (REPO / "src", arguments.layout)}
    if arguments.baseline_src:
        baseline_layout = arguments.baseline_layout or arguments.layout
        variants["baseline"] = (Path(arguments.baseline_src).resolve(), baseline_layout)
    figures = {label: Figures() for label in variants}
    with tempfile.TemporaryDirectory() as scratch_name:
        scratch = Path(scratch_name)
        for round_number in range(arguments.rounds):
            baseline = scratch / f"baseline-{round_number}"
            alone = run_training(baseline, scratch / "alone.json", arguments)
            for index, (label, (src, layout)) in enumerate(variants.items()):
                job = scratch / f"job-{round_number}-{index}"
                processes = start_rules(job, baseline, layout, scratch, src)
                cpu = RuleCpu(processes, job / "debug-output")
                cpu.start()
                followed = run_training(job / "debug-output", scratch / "followed.json", arguments)
                share = cpu.stop() / followed
                for process in processes:
                    process.wait(timeout=600)
                share_to_end = cpu.until_end() / followed
                found = figures[label].add(job, alone, followed, share, share_to_end)
                print(
                    f"round {round_number + 1} ({label}, {src}, {layout}): training "
                    f"{alone:.2f} s alone, "
                    f"{followed:.2f} s with 20 rules ({followed / alone - 1:+.1%}), which used "
                    f"{share:.0%} of a core ({share_to_end:.0%} counting their work after the "
                    f"training's end); {len(found)} rules found issues",
                    flush=True,
                )
                for name, step, latency in found:
                    print(f"    {name:<27} fired at step {step:>5}: {latency * 1000:7.0f} ms")
    for label, measured in figures.items():
        src, layout = variants[label]
        print()
        print(f"{label} ({src}):")
        measured.report(arguments, layout)


class Figures:
    """What the rounds measured for one set of rules."""

    def __init__(self) -> None:
        self.samples: list[tuple[str, int, float]] = []
        self.ratios: list[float] = []
        self.shares: list[float] = []
        self.shares_to_end: list[float] = []
        self.statuses: dict[str, set[str]] = {name: set() for name in RULES}
        self.details: dict[str, str] = {}

    def add(
        self, job: Path, alone: float, followed: float, share: float, share_to_end: float
    ) -> list[tuple[str, int, float]]:
        """Take one round's figures; the detections it made."""
        found = latencies(job)
        self.samples += found
        self.ratios.append(followed / alone)
        self.shares.append(share)
        self.shares_to_end.append(share_to_end)
        for name in RULES:
            status = json.loads((job / "rule-output" / name / "status.json").read_text())
            self.statuses[name].add(status["RuleEvaluationStatus"])
            self.details[name] = status["StatusDetails"]
        return found

    def report(self, arguments: argparse.Namespace, layout: str) -> None:
        print(f"statuses over {arguments.rounds} round(s), and the last round's details:")
        for name, seen in self.statuses.items():
            print(f"    {name:<27} {', '.join(sorted(seen))}: {self.details[name][:150]}")
        print()
        if self.samples:
            values = [latency for _, _, latency in self.samples]
            median, worst = statistics.median(values), max(values)
            print(
                f"latency over {len(values)} detections: median {median * 1000:.0f} ms "
                f"(target < {TARGET_MEDIAN_S * 1000:.0f}), max {worst * 1000:.0f} ms "
                f"(target < {TARGET_MAX_S * 1000:.0f})"
            )
        else:
            print("latency: no rule found an issue")
        slowdown = statistics.median(self.ratios) - 1
        print(
            f"training slowdown with 20 rules following ({layout}): median "
            f"{slowdown:+.1%} over {len(self.ratios)} round(s) (target < {TARGET_SLOWDOWN:.0%}); "
            + ", ".join(f"{ratio - 1:+.1%}" for ratio in self.ratios)
        )
        print(
            f"CPU the rules used while following: median {statistics.median(self.shares):.1%} "
            f"of one core (the machine has {os.cpu_count()} cores); counting the work they did "
            f"after the training's end, {statistics.median(self.shares_to_end):.1%}"
        )


def parse_train(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--result", required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--save-interval", type=int, required=True)
    parser.add_argument("--zero-step", type=int, required=True)
    parser.add_argument("--nan-step", type=int, required=True)
    return parser.parse_args(argv)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "train":
        train(parse_train(sys.argv[2:]))
    else:
        main()
