"""A model under trainprobe does what it does without it: it is deep-copied, pickled, saved whole
and loaded where trainprobe is not installed, scripted, compiled and exported, and the user's own
hooks and their handles work as before.

The model is registered with a hook that follows the training and saves everything every step,
and with a framework profiler (whose hooks were what ``torch.save(model, f)`` tripped on), and is
left in the middle of a saved step: every kind of hook trainprobe attaches is on it.
"""

from __future__ import annotations

import copy
import io
import pickle
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

import trainprobe.pytorch as smd
from trainprobe.capture.pytorch.profiling import FrameworkProfiler
from trainprobe.config.profiler_config import ProfilingPlan
from trainprobe.trials import create_trial

INPUTS = torch.randn(4, 6, generator=torch.Generator().manual_seed(0))


def forward_hooks(model: nn.Module) -> int:
    """How many forward hooks and pre-hooks ``model`` and its submodules hold."""
    return sum(len(m._forward_pre_hooks) + len(m._forward_hooks) for m in model.modules())


USER_CALLS: list[int] = []


def users_pre_hook(module: nn.Module, args: Any) -> None:
    """A forward pre-hook of the user's own (pickled by reference, as a user's is)."""
    USER_CALLS.append(1)


class Hooked:
    """A model under a hook and a profiler, with a forward pre-hook of the user's own."""

    def __init__(self, tmp_path: Path) -> None:
        torch.manual_seed(0)
        self.model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
        self.user_handle = self.model.register_forward_pre_hook(users_pre_hook)
        self.hook = smd.Hook(
            str(tmp_path / "tensors"),
            save_config=smd.SaveConfig(save_interval=1),
            save_all=True,
            follow_training=True,
        )
        # The step timeline, as `trainprobe run` profiles by default.
        self.profiler = FrameworkProfiler(ProfilingPlan(), tmp_path / "profile", "node")
        self.profiler.register_module(self.model)
        self.hook.register_module(self.model)
        optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)
        for _ in range(2):
            optimizer.zero_grad()
            self.model(INPUTS).sum().backward()
            optimizer.step()
        self.model(INPUTS)  # a saved step in progress: its modules are hooked too

    def close(self) -> None:
        self.hook.close()
        self.profiler.close()


@pytest.fixture
def hooked(tmp_path: Path) -> Iterator[Hooked]:
    setup = Hooked(tmp_path)
    yield setup
    setup.close()


def test_trainprobes_hooks_are_on_the_model(hooked: Hooked) -> None:
    # The model's own pre-hooks (the user's, the hook's, the profiler's) and forward hooks, and
    # a forward hook on each submodule saved in this step.
    assert forward_hooks(hooked.model) > 1 + len(hooked.model)


def test_a_deep_copy_has_the_users_hooks_only_and_computes_the_same(hooked: Hooked) -> None:
    copied = copy.deepcopy(hooked.model)
    assert forward_hooks(copied) == 1
    assert torch.equal(copied(INPUTS), hooked.model(INPUTS))
    assert not copied._forward_pre_hooks_with_kwargs  # only the hook's pre-hook takes kwargs


def test_a_pickle_holds_nothing_of_trainprobe(hooked: Hooked) -> None:
    pickled = pickle.dumps(hooked.model)
    assert b"trainprobe" not in pickled
    assert forward_hooks(pickle.loads(pickled)) == 1


def test_saved_whole_it_loads_where_trainprobe_is_not_installed(
    hooked: Hooked, tmp_path: Path
) -> None:
    path = tmp_path / "model.pt"
    hooked.user_handle.remove()  # the user's hook lives in this test module, not loadable there
    torch.save(hooked.model, path)
    site = str(Path(torch.__file__).resolve().parent.parent)
    program = (
        f"import sys; sys.path[:0] = [{site!r}]\n"
        "import importlib.util, torch\n"
        "assert importlib.util.find_spec('trainprobe') is None, 'trainprobe is importable'\n"
        f"model = torch.load({str(path)!r}, weights_only=False)\n"
        "print(sum(len(m._forward_pre_hooks) + len(m._forward_hooks) for m in model.modules()))\n"
        "print(model(torch.ones(1, 6)).shape)\n"
    )
    finished = subprocess.run(
        [sys.executable, "-I", "-S", "-c", program], capture_output=True, text=True, timeout=120
    )
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout.split("\n")[:2] == ["0", "torch.Size([1, 3])"]


def test_torch_save_into_a_buffer_and_back_in_this_process(hooked: Hooked) -> None:
    buffer = io.BytesIO()
    torch.save(hooked.model, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    assert torch.equal(loaded(INPUTS), hooked.model(INPUTS))


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated")
def test_scripted_it_runs_as_the_model_and_the_hook_keeps_following(hooked: Hooked) -> None:
    hooked.user_handle.remove()  # a Python pre-hook of the user's would not script either
    before = forward_hooks(hooked.model)
    scripted = torch.jit.script(hooked.model)
    assert torch.allclose(scripted(INPUTS), hooked.model(INPUTS))
    assert forward_hooks(hooked.model) == before  # set aside while scripting, then put back
    step = hooked.hook.step
    hooked.model.eval()
    hooked.model(INPUTS)
    assert hooked.hook.step == step + 1


def test_exported_and_traced_without_the_hooks_running(hooked: Hooked) -> None:
    hooked.model.eval()
    step = hooked.hook.step
    exported = torch.export.export(hooked.model, (INPUTS,))
    assert torch.allclose(exported.module()(INPUTS), hooked.model(INPUTS))
    assert hooked.hook.step == step + 1  # the comparison's forward alone
    graph = str(exported.graph)
    assert "linear" in graph and graph.count("call_function") <= 4


def test_compiled_it_computes_the_same_and_its_steps_are_followed(
    hooked: Hooked, tmp_path: Path
) -> None:
    torch._dynamo.reset()
    compiled = torch.compile(hooked.model, backend="eager")
    hooked.model.eval()
    step = hooked.hook.step
    with torch.no_grad():
        assert torch.allclose(compiled(INPUTS), hooked.model(INPUTS))
    assert hooked.hook.step == step + 2
    hooked.close()
    assert create_trial(str(tmp_path / "tensors")).steps()[-1] == step + 2


def test_the_users_own_hook_runs_and_its_handle_removes_it(hooked: Hooked) -> None:
    calls = len(USER_CALLS)
    hooked.model(INPUTS)
    assert len(USER_CALLS) == calls + 1
    hooked.user_handle.remove()
    hooked.model(INPUTS)
    assert len(USER_CALLS) == calls + 1
