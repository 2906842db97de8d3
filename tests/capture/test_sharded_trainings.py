"""Sharded trainings read right: FSDP2, HSDP, tensor parallelism and DDP over two ranks (gloo).

The trainings (tests/capture/sharded_training.py) make their own hook, smdebug's way, every
step saved with reductions; each rank writes down what it knows itself (its losses, the full
tensors gathered with ``full_tensor()``). The trial must give back the full tensors, in their
own shapes and values, under the model's own names, with the full tensors' reductions; a NaN
started on one rank is located on that rank; replicas changed on one rank alone are named by
ReplicaDivergence, and healthy ones pass.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from torchrun import torchrun
from trainprobe.exceptions import TensorUnavailableForStep
from trainprobe.rules.builtin import ExplodingTensor, ReplicaDivergence
from trainprobe.rules.rule import InsufficientInformationForRuleInvocation
from trainprobe.trials import create_trial

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).with_name("sharded_training.py")
PARAMETERS = ("norm.weight", "norm.bias", "up.weight", "up.bias", "down.weight", "head.weight")


def train(root: Path, kind: str, *options: str) -> tuple[Path, list[dict]]:
    """Run ``kind`` on two ranks; its output and each rank's own record."""
    out, truth = root / "out", root / "truth"
    torchrun(SCRIPT, kind, str(truth), "--hook", str(out), *options)
    return out, [json.loads((truth / f"rank_{r}.json").read_text()) for r in (0, 1)]


@pytest.fixture(scope="module")
def fsdp2(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict]]:
    return train(tmp_path_factory.mktemp("fsdp2"), "fsdp2")


@pytest.fixture(scope="module")
def tensor_parallel(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict]]:
    # rank 1 alone changes its replica of the norm's weight after step 3's update
    options = ("--drift-rank", "1", "--drift-step", "3", "--drift-parameter", "norm.weight")
    return train(tmp_path_factory.mktemp("tp"), "tp", *options)


@pytest.fixture(scope="module")
def hsdp(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict]]:
    return train(tmp_path_factory.mktemp("hsdp"), "hsdp")


@pytest.fixture(scope="module")
def ddp_nan(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict]]:
    return train(tmp_path_factory.mktemp("ddp"), "ddp", "--nan-rank", "1", "--nan-step", "3")


def check_full_tensors(out: Path, truth: dict, steps: range) -> None:
    """Every parameter and gradient read back whole, and its saved reductions the full
    tensor's, as the rank that gathered it saw them."""
    trial = create_trial(str(out))
    for step in steps:
        for kind, prefix in (("parameters", "Net_"), ("gradients", "gradient/Net_")):
            for name in PARAMETERS:
                known = truth[kind][str(step)][name]
                expected = np.asarray(known["values"]).reshape(known["shape"])
                tensor = trial.tensor(prefix + name)
                value = tensor.value(step)
                assert value.shape == tuple(known["shape"]), (step, prefix + name)
                np.testing.assert_allclose(value, expected, rtol=1e-6, atol=1e-7)
                assert tensor.shape(step) == tuple(known["shape"])
                for reduction, computed in (
                    ("min", expected.min()),
                    ("max", expected.max()),
                    ("mean", expected.mean()),
                    ("l2", np.linalg.norm(expected)),
                    ("std", expected.std()),
                ):
                    assert (reduction, False) in tensor.saved_reductions(step, worker="worker_1")
                    saved = tensor.reduction_value(step, reduction, worker="worker_1")
                    assert float(saved) == pytest.approx(computed, rel=1e-4, abs=1e-6), (
                        step,
                        prefix + name,
                        reduction,
                    )
                saved = tensor.reduction_value(step, "min", worker="worker_0", abs=True)
                assert float(saved) == pytest.approx(np.abs(expected).min(), rel=1e-4, abs=1e-7)


def test_fsdp2_tensors_are_read_back_whole(fsdp2: tuple[Path, list[dict]]) -> None:
    out, truth = fsdp2
    trial = create_trial(str(out))
    assert trial.workers() == ["worker_0", "worker_1"]
    # the model's own names: no FSDP prefix, the class as the model defined it
    assert "Net_up.weight" in trial.tensor_names()
    assert not [name for name in trial.tensor_names() if "FSDP" in name or "_fsdp" in name]
    check_full_tensors(out, truth[0], range(6))
    # each worker saved its own piece: the head's 3 rows split 2 and 1
    head = trial.tensor("Net_head.weight")
    assert head.value(2, worker="worker_0").shape == (2, 6)
    assert head.value(2, worker="worker_1").shape == (1, 6)
    # each rank's own losses
    losses = trial.tensor("MSELoss_output_0")
    for rank in (0, 1):
        saved = [float(losses.value(s, worker=f"worker_{rank}")) for s in range(6)]
        assert saved == pytest.approx([truth[rank]["losses"][str(s)] for s in range(6)])


def test_fsdp2_has_no_replicas_to_compare(fsdp2: tuple[Path, list[dict]]) -> None:
    trial = create_trial(str(fsdp2[0]))
    assert trial.nonfinite_origin() is None
    assert not ExplodingTensor(trial).invoke_at_step(5)
    with pytest.raises(InsufficientInformationForRuleInvocation, match="replicas"):
        ReplicaDivergence(trial).invoke_at_step(0)


def test_tensor_parallel_tensors_are_read_back_whole(
    tensor_parallel: tuple[Path, list[dict]],
) -> None:
    out, truth = tensor_parallel
    # column and row pieces, a replicated bias, the norm's partial gradients (sums of terms),
    # and the head no one sharded
    check_full_tensors(out, truth[0], range(4))


def test_replica_divergence_names_the_rank_that_drifted(
    tensor_parallel: tuple[Path, list[dict]],
) -> None:
    trial = create_trial(str(tensor_parallel[0]))
    rule = ReplicaDivergence(trial)
    assert [rule.invoke_at_step(step) for step in range(4)] == [False] * 4
    assert rule.invoke_at_step(4)
    (evidence,) = rule._evidence
    assert evidence.tensor == "Net_norm.weight"
    assert evidence.step == 4
    assert "worker_1 (rank 1) holds other values than worker_0 (rank 0)" in evidence.message


def test_hsdp_replicas_agree_and_tensors_are_whole(hsdp: tuple[Path, list[dict]]) -> None:
    out, truth = hsdp
    check_full_tensors(out, truth[0], range(0, 6, 5))
    trial = create_trial(str(out))
    rule = ReplicaDivergence(trial)
    assert not any(rule.invoke_at_step(step) for step in trial.steps())
    # one replica of each piece writes it: worker_1's is the second replica
    assert trial.tensor("Net_up.weight").workers(0) == ["worker_0", "worker_1"]
    with pytest.raises(TensorUnavailableForStep):
        trial.tensor("Net_up.weight").value(0, worker="worker_1")


def test_a_nan_of_one_rank_is_located_on_that_rank(ddp_nan: tuple[Path, list[dict]]) -> None:
    out, truth = ddp_nan
    assert np.isnan(truth[1]["losses"]["3"]) and not np.isnan(truth[0]["losses"]["3"])
    origin = create_trial(str(out)).nonfinite_origin()
    assert origin is not None
    assert (origin.step, origin.worker) == (3, "worker_1")
    assert origin.kind in ("output", "loss")
    assert "on worker_1" in origin.describe()
    # healthy replicas until then, NaN on every replica after: nothing to name
    trial = create_trial(str(out))
    rule = ReplicaDivergence(trial)
    assert not any(rule.invoke_at_step(step) for step in trial.steps())
