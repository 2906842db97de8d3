"""Jobs of several hosts (``InstanceCount``, ``trainprobe run --hosts``, the estimator's
``instance_count``): each host ``algo-<n>`` is a torchrun node of one DDP training, with its own
process group and system monitor, all writing to the job's storage; a host that dies fails the
job, naming it, and ends the others.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
from job_helpers import request, wait_for

from trainprobe.analysis.profiling_data.output import ProfilerOutput
from trainprobe.config.errors import ConfigError
from trainprobe.debugger import DebuggerHookConfig
from trainprobe.estimator import Estimator, PyTorch
from trainprobe.jobs import JobStore, create_training_job
from trainprobe.jobs.runner.hosts import Rendezvous
from trainprobe.storage.job_layout import launch_file_of
from trainprobe.trials import create_trial

TRAINING = Path(__file__).resolve().parent / "ddp_plain_training.py"
LOSS = "CrossEntropyLoss_output_0"
GONE_WITHIN_SECONDS = 60.0


def assert_both_hosts_trained(job: Path) -> None:
    """Both hosts' workers saved their own losses, knowing their host; each host has system
    metrics."""
    trial = create_trial(str(job / "debug-output"))
    assert trial.workers() == ["worker_0", "worker_1"]
    loss = trial.tensor(LOSS)
    assert loss.steps()[:4] == [0, 1, 2, 3]
    for step in loss.steps():
        values = {worker: float(loss.value(step, worker=worker)) for worker in trial.workers()}
        # Each rank trains on its own batches: two losses at every step.
        assert values["worker_0"] != values["worker_1"]
    assert ProfilerOutput(str(job / "profiler-output")).system_hosts() == ["algo-1", "algo-2"]
    log = (job / "logs" / "training.log").read_text()
    hosts = json.dumps(["algo-1", "algo-2"])
    assert f"host algo-1 rank 0 of 2 in {hosts}" in log, log
    assert f"host algo-2 rank 1 of 2 in {hosts}" in log, log


@pytest.mark.slow
def test_trainprobe_run_with_two_hosts_trains_across_them_and_reports_both(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    finished = subprocess.run(
        [
            *(sys.executable, "-m", "trainprobe.cli.main", "run", "--hosts", "2"),
            *("--save-interval", "1", "--profiler-interval-ms", "100", "--plain"),
            *("--output", str(out), "--name", "two-hosts", str(TRAINING)),
            *("--", "--steps", "8", "--sleep", "0.1"),
        ],
        env={**os.environ, "TRAINPROBE_HOME": str(tmp_path / "home")},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert finished.returncode == 0, finished.stdout + finished.stderr
    assert "Training job two-hosts: Completed" in finished.stdout
    job = out / "two-hosts"
    assert_both_hosts_trained(job)
    # Each host's training process has its own step timeline, placed on its host.
    profiler_output = ProfilerOutput(str(job / "profiler-output"))
    assert profiler_output.framework_nodes() == ["0-algo-1", "1-algo-2"]
    assert profiler_output.host_of() == {"0-algo-1": "algo-1", "1-algo-2": "algo-2"}
    [report] = job.glob("rule-output/ProfilerReport-*/profiler-output/profiler-report.html")
    page = report.read_text()
    shown = json.loads(page.split('id="report-data">', 1)[1].split("</script>", 1)[0])
    assert shown["Job"]["Hosts"] == ["algo-1", "algo-2"]
    assert shown["Job"]["TrainingProcesses"] == ["0-algo-1", "1-algo-2"]
    assert [host["Node"] for host in shown["SystemUsage"]["Hosts"]] == ["algo-1", "algo-2"]
    [usage] = job.glob(
        "rule-output/ProfilerReport-*/profiler-output/profiler-reports/OverallSystemUsage.json"
    )
    assert set(json.loads(usage.read_text())["Details"]["nodes"]) == {"algo-1", "algo-2"}


@pytest.mark.slow
def test_a_create_training_job_of_two_instances_runs_two_hosts(
    store: JobStore, tmp_path: Path
) -> None:
    output = tmp_path / "out"
    create_training_job(
        request(
            "two-instances",
            output,
            "--steps",
            "6",
            "--sleep",
            "0.1",
            script=TRAINING,
            ResourceConfig={"InstanceCount": 2, "InstanceType": "ml.m5.xlarge"},
            DebugHookConfig={"HookParameters": {"save_interval": "1", "include_workers": "all"}},
            ProfilerConfig={"ProfilingIntervalInMilliseconds": 100},
        ),
        store=store,
    )
    described = wait_for(store, "two-instances")

    assert described["TrainingJobStatus"] == "Completed", described.get("FailureReason")
    assert described["ResourceConfig"]["InstanceCount"] == 2
    assert_both_hosts_trained(output / "two-instances")


@pytest.mark.slow
def test_the_estimators_instance_count_runs_that_many_hosts(
    store: JobStore, tmp_path: Path
) -> None:
    estimator = PyTorch(
        entry_point=TRAINING.name,
        source_dir=str(TRAINING.parent),
        hyperparameters={"steps": 6},
        instance_count=2,
        debugger_hook_config=DebuggerHookConfig(
            hook_parameters={"save_interval": "1", "include_workers": "all"}
        ),
        output_path=str(tmp_path / "out"),
        base_job_name="estimator-hosts",
        store=store,
    )
    estimator.fit(logs=False)
    job = estimator.latest_training_job
    assert job is not None
    assert job.describe()["TrainingJobStatus"] == "Completed"
    tensors = estimator.latest_job_debugger_artifacts_path()
    assert tensors is not None
    assert_both_hosts_trained(Path(tensors).parent)


@pytest.mark.slow
def test_hosts_started_by_hand_from_one_request_train_together(tmp_path: Path) -> None:
    """What each machine of a cluster runs (``trainprobe.jobs.host_runner``), here twice."""
    output = tmp_path / "shared"
    body = request(
        "by-hand",
        output,
        "--steps",
        "6",
        script=TRAINING,
        ResourceConfig={"InstanceCount": 2, "InstanceType": "local"},
        DebugHookConfig={"HookParameters": {"save_interval": "1", "include_workers": "all"}},
        ProfilerConfig={"ProfilingIntervalInMilliseconds": 100},
    )
    (tmp_path / "job.json").write_text(json.dumps(body))
    port = Rendezvous.on_loopback().port
    hosts = []
    for host in ("algo-1", "algo-2"):
        hosts.append(
            subprocess.Popen(
                [
                    *(sys.executable, "-m", "trainprobe.jobs.host_runner"),
                    *("--request", "job.json", "--host", host),
                    *("--master-addr", "127.0.0.1", "--master-port", str(port)),
                ],
                env={**os.environ, "TRAINPROBE_HOME": str(tmp_path / "home")},
                cwd=tmp_path,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
        # The job's directory is shared here: the first host lays it out.
        deadline = time.monotonic() + 60
        while not os.path.isfile(launch_file_of(str(output / "by-hand"))):
            assert time.monotonic() < deadline and hosts[0].poll() is None, hosts[0].stdout
            time.sleep(0.1)
    for host in hosts:
        said, _ = host.communicate(timeout=240)
        assert host.returncode == 0, said
    assert_both_hosts_trained(output / "by-hand")


def _host_group(store: JobStore, name: str, host: str) -> int | None:
    """The process group of ``host``'s training, once its worker runs."""
    record = store.get(name)
    if record is None or record.runner_pid is None:
        return None
    for process in psutil.Process(record.runner_pid).children(recursive=True):
        try:
            if process.environ().get("SM_CURRENT_HOST") == host and any(
                "training_entry" in word for word in process.cmdline()
            ):
                return os.getpgid(process.pid)
        except (psutil.Error, ProcessLookupError):
            continue
    return None


@pytest.mark.slow
def test_a_host_that_dies_fails_the_job_naming_it_and_leaves_no_process(
    store: JobStore, tmp_path: Path
) -> None:
    output = tmp_path / "out"
    create_training_job(
        request(
            "host-dies",
            output,
            "--steps",
            "100000",
            "--sleep",
            "0.05",
            script=TRAINING,
            ResourceConfig={"InstanceCount": 2, "InstanceType": "local"},
            ProfilerConfig={"ProfilingIntervalInMilliseconds": 500},
        ),
        store=store,
    )
    deadline = time.monotonic() + 120
    while (group := _host_group(store, "host-dies", "algo-2")) is None or not any(
        (output / "host-dies" / "debug-output" / "index").rglob("*.json")
    ):
        assert time.monotonic() < deadline, "the hosts never started training"
        time.sleep(0.2)
    record = store.get("host-dies")
    assert record is not None and record.runner_pid is not None
    runner = psutil.Process(record.runner_pid)
    processes = [runner, *runner.children(recursive=True)]
    hosts_seen = set()
    for process in processes:
        try:
            hosts_seen.add(process.environ().get("SM_CURRENT_HOST"))
        except psutil.Error:
            continue
    assert {"algo-1", "algo-2"} <= hosts_seen

    os.killpg(group, signal.SIGKILL)

    described = wait_for(store, "host-dies")
    assert described["TrainingJobStatus"] == "Failed"
    assert described["FailureReason"].startswith(
        "AlgorithmError: the training on host algo-2 was killed by signal 9 (SIGKILL)"
    ), described["FailureReason"]
    deadline = time.monotonic() + GONE_WITHIN_SECONDS
    while left := [p for p in processes if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]:
        assert time.monotonic() < deadline, [p.cmdline() for p in left]
        time.sleep(0.2)


@pytest.mark.parametrize("count", [0, -1, 1.5, "2", True, 17, 10**9])
def test_an_instance_count_that_is_not_a_number_of_hosts_is_refused(
    store: JobStore, tmp_path: Path, count: Any
) -> None:
    body = request("bad-count", tmp_path / "out", script=TRAINING)
    body["ResourceConfig"] = {"InstanceCount": count, "InstanceType": "local"}
    with pytest.raises(ConfigError) as raised:
        create_training_job(body, store=store, cwd=str(tmp_path))
    [problem] = [e for e in raised.value.problems() if e.field == "ResourceConfig.InstanceCount"]
    assert "a whole number from 1 to 16" in str(problem)
    assert store.names() == []
    with pytest.raises(ConfigError, match=r"^instance_count: .* a whole number from 1 to 16"):
        Estimator(entry_point=str(TRAINING), instance_count=count, store=store)


def test_trainprobe_run_refuses_hosts_out_of_range(tmp_path: Path) -> None:
    for hosts in ("0", "17"):
        finished = subprocess.run(
            [sys.executable, "-m", "trainprobe.cli.main", "run", "--hosts", hosts, str(TRAINING)],
            env={**os.environ, "TRAINPROBE_HOME": str(tmp_path / "home")},
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert finished.returncode != 0
        assert f"--hosts: {hosts} is not valid; a whole number from 1 to 16" in finished.stderr
