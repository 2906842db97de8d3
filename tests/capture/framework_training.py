"""A small real PyTorch training with a real DataLoader, and readers of what profiling wrote.

The framework profiling tests share it: an MLP fed by a ``DataLoader`` with worker processes,
SGD, a train phase and optionally an eval phase; each forward of the model is one step.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from torch.optim import optimizer as torch_optimizer
from torch.utils.data import DataLoader, Dataset, TensorDataset

from trainprobe.capture.pytorch.profiling import FrameworkProfiler, dataloader_patch
from trainprobe.config.framework_profile import FrameworkProfile
from trainprobe.config.profiler_config import ProfilerConfig, ProfilingPlan
from trainprobe.storage.modes import ModeKeys
from trainprobe.storage.trace_file import (
    ProfilePoint,
    TraceEvent,
    TraceFileReader,
    parse_python_stats_dir,
)

FEATURES = 16
CLASSES = 4


@pytest.fixture(autouse=True)
def nothing_left_running() -> Iterator[None]:
    """Fail a test that leaves a profiler's hooks or a Python profiler behind; remove them."""
    yield
    listeners = list(dataloader_patch._listeners)
    for listener in listeners:
        dataloader_patch.remove_listener(listener)
    hooks = [*torch_optimizer._global_optimizer_pre_hooks.values()]
    hooks += torch_optimizer._global_optimizer_post_hooks.values()
    torch_optimizer._global_optimizer_pre_hooks.clear()
    torch_optimizer._global_optimizer_post_hooks.clear()
    # Only a profiler's own hooks are this check's concern (an optimizer hook that another test
    # in this process left behind with its trainprobe Hook open is that test's).
    hooks = [
        hook for hook in hooks if isinstance(getattr(hook, "__self__", None), FrameworkProfiler)
    ]
    profiling = sys.getprofile()
    sys.setprofile(None)
    assert not listeners and not hooks, "a FrameworkProfiler was left open"
    assert profiling is None, "a Python profiler was left running"


class Net(nn.Module):
    """Two linear layers; ``pause`` seconds of sleep and ``spin`` seconds of busy Python each."""

    def __init__(self, pause: float = 0.0, spin: float = 0.0) -> None:
        super().__init__()
        self.fc1 = nn.Linear(FEATURES, 32)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(32, CLASSES)
        self.pause = pause
        self.spin = spin

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.pause:
            sleep_a_while(self.pause)
        if self.spin:
            spin_a_while(self.spin)
        return self.fc2(self.relu(self.fc1(x)))


def sleep_a_while(seconds: float) -> None:
    """Off the CPU for ``seconds``."""
    time.sleep(seconds)


def spin_a_while(seconds: float) -> None:
    """On the CPU for ``seconds`` of its own time."""
    end = time.thread_time() + seconds
    total = 0
    while time.thread_time() < end:
        total += 1


def make_loader(
    batches: int = 8,
    batch_size: int = 8,
    num_workers: int = 2,
    pin_memory: bool = False,
    persistent_workers: bool = False,
) -> DataLoader[Any]:
    """A DataLoader over random data: ``batches`` batches an epoch."""
    generator = torch.Generator().manual_seed(0)
    count = batches * batch_size
    dataset = TensorDataset(
        torch.randn(count, FEATURES, generator=generator),
        torch.randint(0, CLASSES, (count,), generator=generator),
    )
    return DataLoader(
        dataset,
        batch_size=batch_size,
        num_workers=num_workers,
        pin_memory=pin_memory,
        persistent_workers=persistent_workers and num_workers > 0,
    )


def mark_worker(worker_id: int) -> None:
    """A user's ``worker_init_fn``: marks the worker process with its id."""
    os.environ["FRAMEWORK_TRAINING_WORKER"] = str(worker_id)


class WorkerMarkedDataset(Dataset[tuple[torch.Tensor, int]]):
    """Random features, each with the mark ``mark_worker`` left in the process that loaded it."""

    def __init__(self, count: int) -> None:
        self.features = torch.randn(count, FEATURES, generator=torch.Generator().manual_seed(0))

    def __len__(self) -> int:
        return len(self.features)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        return self.features[index], int(os.environ.get("FRAMEWORK_TRAINING_WORKER", "-1"))


@dataclass
class Ran:
    """What the training did: the global steps of each mode, and when each step began."""

    train_steps: list[int]
    eval_steps: list[int]
    started: dict[int, float]


def train(
    profiler: FrameworkProfiler | None,
    steps: int,
    *,
    model: Net | None = None,
    loader: DataLoader[Any] | None = None,
    eval_steps: int = 0,
    before_step: Callable[[int], None] | None = None,
) -> Ran:
    """Train ``steps`` steps (over as many epochs as needed), then evaluate ``eval_steps``.

    ``before_step(global_step)`` runs before each step's batch is fetched.
    """
    model = model or Net()
    loader = loader or make_loader()
    if profiler is not None:
        profiler.register_module(model)
        profiler.set_mode(ModeKeys.TRAIN)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    loss_fn = nn.CrossEntropyLoss()
    ran = Ran([], [], {})
    step = 0
    while len(ran.train_steps) < steps:
        batches = iter(loader)
        while len(ran.train_steps) < steps:
            if before_step is not None:
                before_step(step)
            try:
                inputs, labels = next(batches)
            except StopIteration:
                break
            ran.started[step] = time.time()
            optimizer.zero_grad()
            loss = loss_fn(model(inputs), labels)
            loss.backward()
            optimizer.step()
            ran.train_steps.append(step)
            step += 1
        del batches
    if eval_steps:
        if profiler is not None:
            profiler.set_mode(ModeKeys.EVAL)
        model.eval()
        with torch.no_grad():
            for inputs, _ in loader:
                if len(ran.eval_steps) == eval_steps:
                    break
                if before_step is not None:
                    before_step(step)
                ran.started[step] = time.time()
                model(inputs)
                ran.eval_steps.append(step)
                step += 1
    return ran


def plan_of(framework_profile: FrameworkProfile) -> ProfilingPlan:
    """The plan of ``ProfilerConfig(framework_profile_params=framework_profile)``."""
    return ProfilerConfig(framework_profile_params=framework_profile).profiling_plan()


def write_config(path: Path, config: ProfilerConfig) -> None:
    """Write ``config`` as the job runner does: its request JSON, replaced atomically."""
    temporary = path.with_suffix(".writing")
    temporary.write_text(json.dumps(config.to_request_dict()))
    os.replace(temporary, path)


def timeline(out_dir: Path) -> list[TraceEvent]:
    """Every event of the finished timeline files under ``out_dir``."""
    return TraceFileReader(str(out_dir)).events()


def steps_of(events: list[TraceEvent], phase_prefix: str = "Step:") -> list[int]:
    """The global steps of the events whose phase starts with ``phase_prefix``."""
    return [e.args["global_step"] for e in events if e.phase.startswith(phase_prefix)]


@dataclass(frozen=True)
class PythonProfile:
    """One Python profile on disk."""

    profiler: str
    start: ProfilePoint
    end: ProfilePoint
    directory: Path


def python_profiles(out_dir: Path) -> list[PythonProfile]:
    """Every Python profile directory under ``out_dir``, in time order."""
    found = []
    root = out_dir / "framework" / "pytorch"
    for profiler in ("cprofile", "pyinstrument"):
        for directory in sorted((root / profiler).glob("*/*")):
            points = parse_python_stats_dir(directory.name)
            assert points is not None, directory
            found.append(PythonProfile(profiler, points[0], points[1], directory))
    found.sort(key=lambda profile: profile.start.time_us)
    return found


def detailed_traces(out_dir: Path) -> list[Path]:
    """Every detailed profiling trace under ``out_dir``."""
    root = out_dir / "framework" / "pytorch" / "detailed_profiling"
    return sorted(root.glob("*/*/*.pt.trace.json"))


def profiler_steps(trace: Path) -> list[int]:
    """The steps a torch.profiler trace marks (``ProfilerStep#<n>``)."""
    content = json.loads(trace.read_text())
    events = content["traceEvents"] if isinstance(content, dict) else content
    names = {str(event.get("name", "")) for event in events}
    return sorted(int(name.split("#")[1]) for name in names if name.startswith("ProfilerStep#"))
