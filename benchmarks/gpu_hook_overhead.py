"""What the PyTorch hook costs a training on a GPU, and what the hook says it cost.

Two CNNs on synthetic ImageNet-sized batches already on the device, SGD with momentum:
ResNet-50 under bf16 autocast, batch 128, and ResNet-18 in float32, batch 256 (torchvision's
models where it is installed, else the same shapes built here from torch alone). For each, these
configurations run interleaved in one process, a chunk of steps each in turn (the order rotating
every round), so that drifts in the machine's speed hit them all alike:

- no hook;
- the default hook (losses every 500 steps, the non-finite guard on);
- the default hook with ``nonfinite_guard=False``;
- weights, biases, gradients and losses, raw, every 100 steps;
- the same as reductions (mean, max, min, abs l2) every step;
- the same raw every step;
- no hook, but a thread writing the bytes raw every step writes, laid out as the hook lays
  them out (``hook_overhead.py``'s plain writer): the floor the disk sets for raw every step.

Each chunk ends with the device synchronised and the writer drained, so its time holds all the
work it queued. Per configuration it prints steps/s, the ratio to no hook, the wall-clock ms a
step over no hook, and what the hook recorded of itself (``hook.overhead``): its own time on the
training thread and, apart from it, its waits for the device, in ms a step. The hook's own time
should come near the wall-clock difference; the waits overlap the GPU's work and cost little.

Then a Hugging Face ``Trainer`` training a GPT-2 built from a config (6 layers, 512 wide, bf16,
batch 16 x 256 tokens, random tokens) alone and under ``trainprobe run`` with its defaults, in
turn (this file is its training script): steps/s after a warm-up, the ratio, and the hook's own
and waiting ms a step from the job's overhead file. Skipped where transformers is missing.

Last, the non-finite guard on a training whose fourth layer takes the log of zero from step 4:
the origin it recorded, and the steps saved (every 100 steps, and those it saved in full).

With ``--profile CONFIGURATION`` (``reductions every step``, say), after each CNN's measurement
that configuration trains a few more steps under cProfile, and the functions that took the
training thread's time are printed: trainprobe's by time inside them, and the calls into
PyTorch by their own time (where a launch, an allocation or a hidden wait shows).

Nothing is asserted::

    python benchmarks/gpu_hook_overhead.py                        # on the GPU, ~3 minutes
    python benchmarks/gpu_hook_overhead.py --device cpu --quick   # tiny shapes: does it run
    python benchmarks/gpu_hook_overhead.py --skip gpt2 --profile "reductions every step"
    python benchmarks/gpu_hook_overhead.py --steps 80 --gpt2-rounds 2 --dir DIR
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from hook_overhead import (
    CONFIGS,
    NO_GUARD,
    PLAIN,
    PlainWriter,
    make_hook,
    plain_write_seconds,
    step_sizes,
)

REPO = Path(__file__).resolve().parent.parent
# trainprobe is imported where it is used: the GPT-2 training, run alone, holds none of it.
sys.path.insert(0, str(REPO / "src"))

NO_HOOK, DEFAULT, RAW_100, REDUCTIONS, RAW = CONFIGS
ORDER = [NO_HOOK, DEFAULT, NO_GUARD, RAW_100, REDUCTIONS, RAW, PLAIN]
GPT2_ALONE, GPT2_RUN = "alone", "under trainprobe run"


@dataclass(frozen=True)
class Model:
    """One CNN of the benchmark: its shape, precision and batch."""

    name: str
    blocks: tuple[int, int, int, int]
    bottleneck: bool
    bf16: bool
    batch: int
    image: int = 224
    width: int = 64


def models(quick: bool) -> list[Model]:
    """ResNet-50 bf16 batch 128 and ResNet-18 fp32 batch 256; with ``quick``, a few images of
    32 x 32 through the same layers eight times narrower."""
    full = [
        Model("ResNet-50, bf16 autocast", (3, 4, 6, 3), True, True, 128),
        Model("ResNet-18, float32", (2, 2, 2, 2), False, False, 256),
    ]
    if not quick:
        return full
    return [Model(m.name, m.blocks, m.bottleneck, m.bf16, 2, image=32, width=8) for m in full]


class Block(nn.Module):
    """A residual block: two 3x3 convolutions (basic), or 1x1, 3x3, 1x1 (bottleneck)."""

    def __init__(self, channels: int, width: int, stride: int, bottleneck: bool) -> None:
        super().__init__()
        out = width * (4 if bottleneck else 1)
        if bottleneck:
            shapes = [(channels, width, 1, 1), (width, width, 3, stride), (width, out, 1, 1)]
        else:
            shapes = [(channels, width, 3, stride), (width, out, 3, 1)]
        layers: list[nn.Module] = []
        for index, (inputs, outputs, kernel, step) in enumerate(shapes):
            conv = nn.Conv2d(inputs, outputs, kernel, step, kernel // 2, bias=False)
            layers += [conv, nn.BatchNorm2d(outputs)]
            if index < len(shapes) - 1:
                layers.append(nn.ReLU(inplace=True))
        self.body = nn.Sequential(*layers)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or channels != out:
            self.shortcut = nn.Sequential(
                nn.Conv2d(channels, out, 1, stride, bias=False), nn.BatchNorm2d(out)
            )
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.body(x) + self.shortcut(x))


def resnet(model: Model, classes: int = 1000) -> nn.Module:
    """A ResNet of torchvision's layout: a 7x7 stem, four stages, pooling, a linear head."""
    width = model.width
    layers: list[nn.Module] = [
        nn.Conv2d(3, width, 7, 2, 3, bias=False),
        nn.BatchNorm2d(width),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(3, 2, 1),
    ]
    channels = width
    for stage, count in enumerate(model.blocks):
        for index in range(count):
            stride = 2 if stage > 0 and index == 0 else 1
            layers.append(Block(channels, width << stage, stride, model.bottleneck))
            channels = (width << stage) * (4 if model.bottleneck else 1)
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(channels, classes)]
    return nn.Sequential(*layers)


def build(model: Model) -> tuple[nn.Module, str]:
    """The network, and where it came from."""
    if model.width == 64:
        try:
            import torchvision  # type: ignore[import-untyped]
        except ImportError:
            pass
        else:
            maker = torchvision.models.resnet50 if model.bottleneck else torchvision.models.resnet18
            return maker(weights=None), "torchvision"
    return resnet(model), "built from torch"


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@dataclass
class Run:
    """One configuration's training, and what it measured."""

    name: str
    model: nn.Module
    optimizer: torch.optim.Optimizer
    loss: nn.Module
    hook: Any
    out: str
    plain: PlainWriter | None = None
    done: int = 0
    seconds: float = 0.0
    steps: int = 0
    hook_before: tuple[float, float, int] = (0.0, 0.0, 0)
    bytes_before: int = 0
    figures: dict[str, float] = field(default_factory=dict)

    def written(self) -> int:
        if self.plain is not None:
            return self.plain.bytes_written
        return int(self.hook.overhead.bytes_written) if self.hook is not None else 0

    def hook_totals(self) -> tuple[float, float, int]:
        overhead = self.hook.overhead
        return overhead.total_seconds, overhead.device_wait_seconds, overhead.steps


def measure_cnn(
    model: Model, device: torch.device, arguments: argparse.Namespace, root: str
) -> tuple[dict[str, dict[str, float]], str, str]:
    """Every configuration of ``model``, interleaved; the figures of each, the net's origin and
    the profile asked for (or "")."""
    import trainprobe.pytorch as smd

    torch.manual_seed(0)
    inputs = torch.randn(model.batch, 3, model.image, model.image, device=device)
    labels = torch.randint(0, 1000, (model.batch,), device=device)
    runs: dict[str, Run] = {}
    origin = ""
    for name in ORDER:
        net, origin = build(model)
        net = net.to(device)
        loss = nn.CrossEntropyLoss()
        out = os.path.join(root, name.split(" (")[0].replace(" ", "-").replace(",", ""))
        hook = make_hook(smd, name, out)
        if hook is not None:
            hook.register_module(net)
            hook.register_loss(loss)
            hook.set_mode(smd.modes.TRAIN)
        optimizer = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
        runs[name] = Run(name, net, optimizer, loss, hook, out)

    def train(run: Run, count: int) -> float:
        started = time.perf_counter()
        for _ in range(count):
            run.optimizer.zero_grad(set_to_none=True)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=model.bf16):
                value = run.loss(run.model(inputs), labels)
            value.backward()
            run.optimizer.step()
            if run.plain is not None:
                run.plain.step(run.done)
            run.done += 1
        synchronize(device)
        for writer in (run.hook, run.plain):
            if writer is not None:
                writer.flush()
        return time.perf_counter() - started

    try:
        for name, run in runs.items():
            if name == PLAIN:
                run.plain = PlainWriter(run.out, *step_sizes(runs[RAW].out))
            train(run, arguments.warmup)
            run.bytes_before = run.written()
            if run.hook is not None:
                run.hook_before = run.hook_totals()
        chunk = min(arguments.chunk, arguments.steps)
        for index in range(max(1, arguments.steps // chunk)):
            turn = index % len(ORDER)
            for name in ORDER[turn:] + ORDER[:turn]:
                run = runs[name]
                run.seconds += train(run, chunk)
                run.steps += chunk
        for run in runs.values():
            run.figures = {
                "steps_per_second": run.steps / run.seconds,
                "bytes": run.written() - run.bytes_before,
                "seconds": run.seconds,
                "steps": run.steps,
            }
            if run.hook is not None:
                total, waited, steps = run.hook_totals()
                before_total, before_waited, before_steps = run.hook_before
                counted = max(1, steps - before_steps)
                run.figures["hook_ms"] = 1e3 * (total - before_total) / counted
                run.figures["wait_ms"] = 1e3 * (waited - before_waited) / counted
        profiled = ""
        if arguments.profile is not None:
            run = runs[arguments.profile]
            profiled = profile(run.name, lambda: train(run, chunk))
        return {name: run.figures for name, run in runs.items()}, origin, profiled
    finally:
        for run in runs.values():
            if run.hook is not None:
                run.hook.close()
            if run.plain is not None:
                run.plain.close()
            shutil.rmtree(run.out, ignore_errors=True)


def profile(name: str, train: Callable[[], float]) -> str:
    """Where the training thread's time went while ``train`` trained configuration ``name``
    under cProfile, as text."""
    import cProfile
    import io
    import pstats

    profiler = cProfile.Profile()
    profiler.enable()
    seconds = train()
    profiler.disable()
    text = io.StringIO()
    text.write(f"\n{name}, profiled: {seconds:.2f} s for the chunk\n")
    stats = pstats.Stats(profiler, stream=text)
    stats.sort_stats("cumulative").print_stats(r"trainprobe", 15)
    stats.sort_stats("tottime").print_stats(r"\{(built-in )?method", 15)
    return text.getvalue()


def print_cnn(title: str, results: dict[str, dict[str, float]], root: str) -> None:
    """One line per configuration, then raw every step's write rate beside plain writes."""
    base = results[NO_HOOK]["steps_per_second"]
    print(f"\n{title}")
    print(
        f"{'configuration':38s} {'steps/s':>8s} {'ratio':>6s} {'+ms/step':>8s} "
        f"{'hook ms':>8s} {'wait ms':>8s} {'MB':>8s}"
    )
    for name in ORDER:
        entry = results[name]
        speed = entry["steps_per_second"]
        extra_ms = 1e3 * (1 / speed - 1 / base)
        hook_ms = f"{entry['hook_ms']:8.2f}" if "hook_ms" in entry else f"{'':8s}"
        wait_ms = f"{entry['wait_ms']:8.2f}" if "wait_ms" in entry else f"{'':8s}"
        print(
            f"{name:38s} {speed:8.2f} {speed / base:6.3f} {extra_ms:8.2f} "
            f"{hook_ms} {wait_ms} {entry['bytes'] / 1e6:8.1f}"
        )
    raw = results[RAW]
    hook_rate = raw["bytes"] / raw["seconds"] / 1e6
    plain = results[PLAIN]
    thread_rate = plain["bytes"] / plain["seconds"] / 1e6
    sequential = plain_write_seconds(int(raw["bytes"]), int(raw["steps"]), root)
    sequential_rate = raw["bytes"] / sequential / 1e6 if sequential > 0 else float("inf")
    print(
        f"raw every step wrote {hook_rate:.0f} MB/s while training; the plain writer "
        f"{thread_rate:.0f} MB/s beside the same training; a plain sequential write of the same "
        f"bytes alone {sequential_rate:.0f} MB/s"
    )
    print(
        f"the hook's writer reached {hook_rate / thread_rate:.3f} of the plain writer's "
        "throughput (goal: 0.9 or more; its copies and checksums overlap its writes)"
    )


# ----- GPT-2 under Hugging Face's Trainer ---------------------------------------------------


def gpt2_training(arguments: argparse.Namespace) -> None:
    """The training script: a Trainer on a GPT-2 from a config; writes its steps/s after the
    warm-up to ``arguments.gpt2_training``."""
    from transformers import (
        GPT2Config,
        GPT2LMHeadModel,
        Trainer,
        TrainerCallback,
        TrainingArguments,
    )

    cuda = arguments.device == "cuda"
    if arguments.quick:
        config = GPT2Config(n_layer=2, n_head=2, n_embd=64, n_positions=32, vocab_size=512)
        batch, length = 2, 32
    else:
        config = GPT2Config(n_layer=6, n_head=8, n_embd=512, n_positions=256)
        batch, length = 16, 256
    steps, warmup = arguments.gpt2_steps, arguments.gpt2_warmup
    torch.manual_seed(0)
    tokens = torch.randint(0, config.vocab_size, (steps * batch, length))

    class Tokens(torch.utils.data.Dataset[dict[str, torch.Tensor]]):
        def __len__(self) -> int:
            return len(tokens)

        def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
            return {"input_ids": tokens[index], "labels": tokens[index]}

    class Clock(TrainerCallback):  # type: ignore[misc]
        started = ended = 0.0

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if state.global_step == warmup:
                synchronize(torch.device(arguments.device))
                self.started = time.perf_counter()

        def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            synchronize(torch.device(arguments.device))
            self.ended = time.perf_counter()

    clock = Clock()
    with tempfile.TemporaryDirectory(prefix="gpt2-") as output:
        trainer = Trainer(
            model=GPT2LMHeadModel(config),
            args=TrainingArguments(
                output_dir=output,
                max_steps=steps,
                per_device_train_batch_size=batch,
                learning_rate=5e-4,
                bf16=cuda,
                use_cpu=not cuda,
                save_strategy="no",
                report_to=[],
                dataloader_num_workers=0,
                disable_tqdm=True,
            ),
            train_dataset=Tokens(),
            callbacks=[clock],
        )
        trainer.train()
    speed = (steps - warmup) / (clock.ended - clock.started)
    Path(arguments.gpt2_training).write_text(json.dumps({"steps_per_second": speed}))


def gpt2_once(how: str, arguments: argparse.Namespace, root: str) -> dict[str, float]:
    """One GPT-2 training, alone or under ``trainprobe run``; its steps/s, and the hook's
    figures from the job's overhead file."""
    from trainprobe.storage.hook_overhead import read_hook_overhead

    scratch = tempfile.mkdtemp(prefix="gpt2-", dir=root)
    result = os.path.join(scratch, "result.json")
    script = [f"--gpt2-training={result}", f"--device={arguments.device}"]
    script += [f"--gpt2-steps={arguments.gpt2_steps}", f"--gpt2-warmup={arguments.gpt2_warmup}"]
    script += ["--quick"] if arguments.quick else []
    env = {**os.environ, "TRAINPROBE_HOME": os.path.join(scratch, "home")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), env.get("PYTHONPATH", "")])
    if how == GPT2_ALONE:
        command = [sys.executable, __file__, *script]
    else:
        output = os.path.join(scratch, "jobs")
        command = [sys.executable, "-m", "trainprobe.cli.main", "run", "--plain", "--quiet"]
        command += ["--output", output, "--name", "gpt2", __file__, "--", *script]
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0 or not os.path.exists(result):
            tail = (done.stdout + done.stderr)[-1500:]
            raise RuntimeError(f"GPT-2 {how} exited {done.returncode}:\n{tail}")
        figures: dict[str, float] = json.loads(Path(result).read_text())
        for found in Path(scratch).rglob("hook-overhead"):
            for record in read_hook_overhead(str(found.parent)):
                steps = max(1, record.steps)
                figures["hook_ms"] = 1e3 * record.total_seconds / steps
                figures["wait_ms"] = 1e3 * record.device_wait_seconds / steps
        return figures
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def measure_gpt2(arguments: argparse.Namespace, root: str) -> None:
    try:
        import transformers  # noqa: F401
    except ImportError:
        print("\nGPT-2 under Trainer: skipped, transformers is not installed")
        return
    speeds: dict[str, list[float]] = {GPT2_ALONE: [], GPT2_RUN: []}
    hook: dict[str, float] = {}
    for index in range(arguments.gpt2_rounds):
        order = [GPT2_ALONE, GPT2_RUN] if index % 2 == 0 else [GPT2_RUN, GPT2_ALONE]
        for how in order:
            figures = gpt2_once(how, arguments, root)
            speeds[how].append(figures["steps_per_second"])
            if how == GPT2_RUN:
                hook = figures
    alone, under = speeds[GPT2_ALONE], speeds[GPT2_RUN]
    ratios = [b / a for a, b in zip(alone, under, strict=True)]
    print(
        f"\nGPT-2 under Trainer ({arguments.gpt2_steps} steps, "
        f"{arguments.gpt2_warmup} of warm-up, {arguments.gpt2_rounds} round(s)): alone "
        f"{statistics.median(alone):.2f} steps/s, under trainprobe run "
        f"{statistics.median(under):.2f} steps/s (medians); ratio of each round's pair "
        f"{statistics.median(ratios):.3f} median, {min(ratios):.3f}-{max(ratios):.3f}; the hook's "
        "own time "
        f"{hook.get('hook_ms', float('nan')):.2f} ms/step, waiting for the device "
        f"{hook.get('wait_ms', float('nan')):.2f} ms/step"
    )


# ----- the non-finite guard --------------------------------------------------------------

BAD_STEP = 4


class Logarithm(nn.Module):
    """The log of its input's magnitude, scaled to zero from call BAD_STEP on: -infinity."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = 0.0 if self.calls >= BAD_STEP else 1.0
        self.calls += 1
        return torch.log(x.abs() * scale)


def nan_origin(device: torch.device, root: str) -> None:
    """Train until a layer takes the log of zero; print the origin the guard recorded."""
    import trainprobe.pytorch as smd
    from trainprobe.storage.nonfinite_file import read_nonfinite_origin
    from trainprobe.trials import create_trial

    out = tempfile.mkdtemp(prefix="nan-", dir=root)
    try:
        torch.manual_seed(0)
        net = nn.Sequential(
            nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 64), Logarithm(), nn.Linear(64, 10)
        ).to(device)
        hook = smd.Hook(out, save_config=smd.SaveConfig(save_interval=100))
        hook.register_module(net)
        loss = nn.MSELoss()
        hook.register_loss(loss)
        optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
        for _ in range(BAD_STEP + 4):
            optimizer.zero_grad()
            inputs = torch.randn(32, 64, device=device)
            loss(net(inputs), torch.zeros(32, 10, device=device)).backward()
            optimizer.step()
        hook.close()
        origin = read_nonfinite_origin(out)
        said = origin.describe() if origin is not None else "nothing recorded"
        steps = create_trial(out).steps()
        print(
            f"\nnon-finite guard on {device.type} (layer `3` takes the log of 0 from step "
            f"{BAD_STEP}): "
            f"{said}; steps saved: {steps}"
        )
    finally:
        shutil.rmtree(out, ignore_errors=True)


def describe(device: torch.device) -> str:
    if device.type == "cuda":
        return f"{torch.cuda.get_device_name(device)}, PyTorch {torch.__version__}"
    return f"CPU, PyTorch {torch.__version__}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--quick", action="store_true", help="tiny shapes and few steps")
    parser.add_argument("--steps", type=int, default=None, help="measured steps a configuration")
    parser.add_argument("--warmup", type=int, default=None)
    parser.add_argument("--chunk", type=int, default=None, help="steps a turn when interleaving")
    parser.add_argument("--gpt2-steps", type=int, default=None)
    parser.add_argument("--gpt2-warmup", type=int, default=None)
    parser.add_argument("--gpt2-rounds", type=int, default=1, help="alone/under-run pairs")
    parser.add_argument("--skip", action="append", default=[], choices=["cnn", "gpt2", "nan"])
    parser.add_argument("--profile", choices=ORDER[1:-1], help="profile this configuration")
    parser.add_argument("--dir", default=None, help="where to write (default: the temp dir)")
    parser.add_argument("--gpt2-training", default=None, help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    quick = arguments.quick
    for name, full, small in (
        ("steps", 40, 2),
        ("warmup", 5, 2),
        ("chunk", 10, 1),
        ("gpt2_steps", 300, 12),
        ("gpt2_warmup", 50, 4),
    ):
        if getattr(arguments, name) is None:
            setattr(arguments, name, small if quick else full)
    if arguments.gpt2_training is not None:
        gpt2_training(arguments)
        return
    device = torch.device(arguments.device)
    root = tempfile.mkdtemp(prefix="gpu-hook-overhead-", dir=arguments.dir)
    sections: dict[str, Callable[[], None]] = {
        "cnn": lambda: cnn(device, arguments, root),
        "gpt2": lambda: measure_gpt2(arguments, root),
        "nan": lambda: nan_origin(device, root),
    }
    print(f"trainprobe's hook on {describe(device)}", flush=True)
    failed = []
    try:
        for name, section in sections.items():
            if name in arguments.skip:
                continue
            # One check's failure must not hide the others' figures (a GPU machine is lent once).
            try:
                section()
            except Exception:
                failed.append(name)
                print(f"\n{name}: failed\n{traceback.format_exc()[-3000:]}")
            sys.stdout.flush()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if failed:
        raise SystemExit(f"failed: {', '.join(failed)}")


def cnn(device: torch.device, arguments: argparse.Namespace, root: str) -> None:
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
    for model in models(arguments.quick):
        results, origin, profiled = measure_cnn(model, device, arguments, root)
        title = (
            f"{model.name}, batch {model.batch} of {model.image}x{model.image} ({origin}); "
            f"{arguments.steps} steps each, interleaved in chunks of {arguments.chunk}"
        )
        print_cnn(title, results, root)
        print(profiled, end="")
        if device.type == "cuda":
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
