"""Several training processes per host (``trainprobe run --nproc-per-node``, the estimator's
``distribution``): each process is one rank of one torch.distributed job (gloo), saves its own
tensors as a worker, and the host has one system monitor watching them all.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from trainprobe.analysis.profiling_data.output import ProfilerOutput
from trainprobe.config.errors import ConfigError
from trainprobe.debugger import DebuggerHookConfig
from trainprobe.estimator import PyTorch
from trainprobe.jobs import JobStore
from trainprobe.storage.spike_records import SpikeAction, read_spikes
from trainprobe.trials import create_trial

HERE = Path(__file__).resolve().parent
DDP = HERE / "ddp_plain_training.py"
SHARDED = HERE.parent / "capture" / "sharded_training.py"
LIGHTNING = HERE.parent / "frameworks" / "lightning_model_parallel.py"


def trainprobe_run(tmp_path: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trainprobe.cli.main", "run", *arguments],
        env={**os.environ, "TRAINPROBE_HOME": str(tmp_path / "home")},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow
def test_trainprobe_run_starts_two_processes_of_an_fsdp2_training(tmp_path: Path) -> None:
    out, truth = tmp_path / "out", tmp_path / "truth"
    finished = trainprobe_run(
        tmp_path,
        *("--nproc-per-node", "2", "--save-interval", "1", "--plain", "--output", str(out)),
        *("--name", "fsdp2", "--rule", "VanishingGradient", "--rule", "ExplodingTensor"),
        *(str(SHARDED), "--", "fsdp2", str(truth), "--steps", "4"),
    )
    assert finished.returncode == 0, finished.stdout + finished.stderr
    assert "Training job fsdp2: Completed" in finished.stdout
    assert "VanishingGradient: NoIssuesFound" in finished.stdout
    assert "ExplodingTensor: NoIssuesFound" in finished.stdout
    known = [json.loads((truth / f"rank_{rank}.json").read_text()) for rank in (0, 1)]
    job = out / "fsdp2"
    trial = create_trial(str(job / "debug-output"))
    assert trial.workers() == ["worker_0", "worker_1"]
    # each process's own losses, and the full gradients, as rank 0 gathered them
    losses = trial.tensor("MSELoss_output_0")
    for rank in (0, 1):
        saved = [float(losses.value(step, worker=f"worker_{rank}")) for step in range(4)]
        assert saved == pytest.approx([known[rank]["losses"][str(step)] for step in range(4)])
    for step in range(4):
        expected = known[0]["gradients"][str(step)]["up.weight"]
        value = trial.tensor("gradient/Net_up.weight").value(step)
        assert value.shape == tuple(expected["shape"])
        np.testing.assert_allclose(value.reshape(-1), expected["values"], rtol=1e-6, atol=1e-7)
    # one host, one system monitor; both processes' step timelines on it
    profiler = ProfilerOutput(str(job / "profiler-output"))
    assert profiler.system_hosts() == ["algo-1"]
    assert set(profiler.host_of().values()) == {"algo-1"}
    assert len(profiler.framework_nodes()) == 2


@pytest.mark.slow
def test_a_gradient_norm_spike_of_one_rank_is_judged_on_the_global_norm_and_skipped_by_all(
    tmp_path: Path,
) -> None:
    out, truth = tmp_path / "out", tmp_path / "truth"
    finished = trainprobe_run(
        tmp_path,
        *("--nproc-per-node", "2", "--plain", "--output", str(out), "--name", "spike"),
        *("--rule", "GradientNormSpike:warmup_steps=3", "--on-spike", "skip"),
        *(str(SHARDED), "--", "fsdp2", str(truth), "--steps", "8"),
        *("--spike-rank", "1", "--spike-step", "6"),
    )
    assert finished.returncode == 0, finished.stdout + finished.stderr
    known = [json.loads((truth / f"rank_{rank}.json").read_text()) for rank in (0, 1)]
    gradients = known[0]["gradients"]["6"]
    global_norm = float(np.sqrt(sum(g["l2"] ** 2 for g in gradients.values())))
    spikes = read_spikes(str(out / "spike" / "debug-output"))
    assert spikes, finished.stdout
    assert {spike.step for spike in spikes} == {6}
    for spike in spikes:  # the full gradients' norm, not a shard's
        assert spike.value == pytest.approx(global_norm, rel=1e-5)
        assert spike.action is SpikeAction.SKIP
    # both ranks skipped the update: the full weights after step 6 are those before it
    for rank in (0, 1):
        before = known[rank]["parameters"]["6"]["up.weight"]["values"]
        after = known[rank]["parameters"]["7"]["up.weight"]["values"]
        assert after == before


@pytest.mark.slow
def test_lightning_model_parallel_gradients_are_read_back_whole(tmp_path: Path) -> None:
    pytest.importorskip("lightning")
    out, truth = tmp_path / "out", tmp_path / "truth"
    finished = trainprobe_run(
        tmp_path,
        *("--nproc-per-node", "2", "--save-interval", "1", "--plain", "--output", str(out)),
        *("--name", "lightning", "--rule", "VanishingGradient"),
        *(str(LIGHTNING), "--", str(truth)),
    )
    assert finished.returncode == 0, finished.stdout + finished.stderr
    assert "VanishingGradient: NoIssuesFound" in finished.stdout
    known = json.loads((truth / "rank_0.json").read_text())
    trial = create_trial(str(out / "lightning" / "debug-output"))
    assert trial.workers() == ["worker_0", "worker_1"]
    [name] = [n for n in trial.tensor_names() if n.startswith("gradient/") and "0.weight" in n]
    gradient = trial.tensor(name)
    assert gradient.steps() == [0, 1, 2, 3]
    for step in range(4):
        # each rank holds 8 of the 16 rows; the trial gives the whole gradient
        assert gradient.value(step, worker="worker_1").shape == (8, 8)
        np.testing.assert_allclose(gradient.value(step).reshape(-1), known[step], rtol=1e-6)


@pytest.mark.slow
def test_the_estimators_distribution_starts_processes_per_host(
    store: JobStore, tmp_path: Path
) -> None:
    estimator = PyTorch(
        entry_point=DDP.name,
        source_dir=str(DDP.parent),
        hyperparameters={"steps": 4},
        distribution={"torch_distributed": {"enabled": True, "processes_per_host": 2}},
        debugger_hook_config=DebuggerHookConfig(
            hook_parameters={"save_interval": "1", "include_workers": "all"}
        ),
        output_path=str(tmp_path / "out"),
        base_job_name="estimator-processes",
        store=store,
    )
    estimator.fit(logs=False)
    job = estimator.latest_training_job
    assert job is not None
    assert job.describe()["TrainingJobStatus"] == "Completed"
    tensors = estimator.latest_job_debugger_artifacts_path()
    assert tensors is not None
    trial = create_trial(tensors)
    assert trial.workers() == ["worker_0", "worker_1"]
    loss = trial.tensor("CrossEntropyLoss_output_0")
    # each rank trains on its own batches: two losses at every step
    assert all(
        float(loss.value(step, worker="worker_0")) != float(loss.value(step, worker="worker_1"))
        for step in loss.steps()
    )
    log = (Path(tensors).parent / "logs" / "training.log").read_text()
    assert 'host algo-1 rank 1 of 2 in ["algo-1"]' in log, log


def test_the_request_carries_the_distribution_as_sagemaker_does(tmp_path: Path) -> None:
    estimator = PyTorch(
        entry_point=str(DDP),
        distribution={"mpi": {"enabled": True, "processes_per_host": 3}},
        output_path=str(tmp_path / "out"),
    )
    hyperparameters = estimator._request("job")["HyperParameters"]
    assert hyperparameters["sagemaker_mpi_enabled"] == "true"
    assert hyperparameters["sagemaker_mpi_num_of_processes_per_host"] == "3"


@pytest.mark.parametrize(
    ("distribution", "message"),
    [
        ({"smdistributed": {"enabled": True}}, r"^distribution: 'smdistributed' is not valid"),
        (
            {"torch_distributed": {"enabled": True, "processes_per_host": 0}},
            r"^distribution.torch_distributed.processes_per_host: 0 is not valid; a whole "
            r"number from 1 to 64",
        ),
    ],
)
def test_a_distribution_trainprobe_cannot_run_is_refused(
    distribution: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        PyTorch(entry_point=str(DDP), distribution=distribution)


def test_trainprobe_run_refuses_a_bad_process_count(tmp_path: Path) -> None:
    for count in ("0", "two"):
        finished = trainprobe_run(tmp_path, "--nproc-per-node", count, str(DDP))
        assert finished.returncode != 0
        assert f"--nproc-per-node: '{count}' is not valid; a whole number from 1 to 64" in (
            finished.stderr
        )
