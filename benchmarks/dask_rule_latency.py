"""Rule latency with the Dask rule executor beside the local one, measured in one run.

Each round runs the same job twice, in turn (the order swapped every round): its debugging rules
as processes of the job's runner (the default executor), and as tasks on a Dask cluster
(``TRAINPROBE_RULE_EXECUTOR=dask://HOST:PORT``; a ``distributed.LocalCluster`` on 127.0.0.1
with its workers in processes of their own, started once for the run). The training is
``rule_latency.py``'s (the first layer zeroed at ``--zero-step``, a NaN input from
``--nan-step``), run as the job's entry point; the rules are those of its rules that find an
issue in it.

Latency, as ``rule_latency.py`` measures it: from the moment the step a rule fired at was
written (its index file's time) to the moment its status became IssuesFound (``LastModifiedTime``
in its ``status.json``). Prints each executor's median and max over every detection, and the
ratio of the medians (Dask over local); asserts nothing::

    python benchmarks/dask_rule_latency.py [--rounds 3] [--steps 400] [--save-interval 25]
    python benchmarks/dask_rule_latency.py --rounds 1 --steps 200    # quick smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))

import distributed  # noqa: E402

from rule_latency import RULES, step_written_at  # noqa: E402
from trainprobe.jobs import JobStore, create_training_job, describe_training_job  # noqa: E402

# The rules of rule_latency.py that find an issue in its training.
FIRING = ("ExplodingTensor", "AllZero", "VanishingGradient", "WeightUpdateRatio", "DeadRelu")
EXECUTORS = ("local", "dask")
FINAL = ("Completed", "Failed", "Stopped")
UNFINISHED_RULE = ("InProgress", "Stopping")


def job_request(
    name: str, out: Path, scratch: Path, arguments: argparse.Namespace, executor: str
) -> dict[str, Any]:
    """The job: rule_latency.py's training, saving into the job's tensor output, with FIRING."""
    debug_output = out / name / "debug-output"
    training = ["train", str(debug_output), "--result", str(scratch / f"{name}.json")]
    training += ["--steps", str(arguments.steps), "--save-interval", str(arguments.save_interval)]
    training += ["--zero-step", str(arguments.zero_step), "--nan-step", str(arguments.nan_step)]
    return {
        "TrainingJobName": name,
        "AlgorithmSpecification": {
            "TrainingInputMode": "File",
            "ContainerEntrypoint": [str(HERE / "rule_latency.py")],
            "ContainerArguments": training,
        },
        "OutputDataConfig": {"S3OutputPath": str(out)},
        "DebugHookConfig": {"HookParameters": {"save_interval": str(arguments.save_interval)}},
        "DebugRuleConfigurations": [
            {
                "RuleConfigurationName": rule,
                "RuleEvaluatorImage": "DEFAULT_RULE_EVALUATOR_IMAGE",
                "RuleParameters": {"rule_to_invoke": rule, **RULES[rule]},
            }
            for rule in FIRING
        ],
        "Environment": {"TRAINPROBE_RULE_EXECUTOR": executor, "OMP_NUM_THREADS": "1"},
    }


def wait_for_job(store: JobStore, name: str, timeout: float = 900.0) -> dict[str, Any]:
    """The job's description once it and its rules have finished."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        description = describe_training_job({"TrainingJobName": name}, store=store)
        rules = description.get("DebugRuleEvaluationStatuses", [])
        if description["TrainingJobStatus"] in FINAL and all(
            item["RuleEvaluationStatus"] not in UNFINISHED_RULE for item in rules
        ):
            return description
        time.sleep(0.5)
    raise TimeoutError(f"the job {name} did not finish in {timeout:g} s")


def latencies(job: Path) -> dict[str, float]:
    """The latency of each rule that found an issue, by rule."""
    found = {}
    for rule in FIRING:
        directory = job / "rule-output" / rule
        status = json.loads((directory / "status.json").read_text())
        if status["RuleEvaluationStatus"] != "IssuesFound":
            continue
        lines = (directory / "evaluations.jsonl").read_text().splitlines()
        fired = [json.loads(line) for line in lines if '"IssuesFound"' in line]
        written = step_written_at(job / "debug-output", int(fired[0]["step"]))
        found[rule] = status["LastModifiedTime"] - written
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--save-interval", type=int, default=25)
    parser.add_argument("--workers", type=int, default=2, help="Dask worker processes")
    arguments = parser.parse_args()
    arguments.zero_step = int(arguments.steps * 0.4)
    arguments.nan_step = int(arguments.steps * 0.7)

    samples: dict[str, list[float]] = {executor: [] for executor in EXECUTORS}
    with tempfile.TemporaryDirectory() as scratch_name:
        scratch = Path(scratch_name)
        os.environ["TRAINPROBE_HOME"] = str(scratch / "home")
        # The job's processes and the cluster's workers import this trainprobe.
        os.environ["PYTHONPATH"] = str(HERE.parent / "src")
        store = JobStore()
        with distributed.LocalCluster(
            n_workers=arguments.workers,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
        ) as cluster:
            address = "dask://" + cluster.scheduler_address.removeprefix("tcp://")
            for round_number in range(arguments.rounds):
                order = EXECUTORS if round_number % 2 == 0 else EXECUTORS[::-1]
                for executor in order:
                    name = f"{executor}-{round_number}"
                    value = address if executor == "dask" else "local"
                    create_training_job(
                        job_request(name, scratch / "out", scratch, arguments, value),
                        store=store,
                    )
                    description = wait_for_job(store, name)
                    found = latencies(scratch / "out" / name)
                    samples[executor] += found.values()
                    shown = ", ".join(f"{rule} {ms * 1000:.0f} ms" for rule, ms in found.items())
                    print(
                        f"round {round_number + 1}, {executor}: "
                        f"{description['TrainingJobStatus']}; {shown or 'no rule fired'}",
                        flush=True,
                    )
    print()
    for executor in EXECUTORS:
        values = samples[executor]
        if values:
            print(
                f"{executor:<5} rule latency over {len(values)} detections: median "
                f"{statistics.median(values) * 1000:.0f} ms, max {max(values) * 1000:.0f} ms"
            )
    if samples["local"] and samples["dask"]:
        ratio = statistics.median(samples["dask"]) / statistics.median(samples["local"])
        print(f"median rule latency, Dask executor over local processes: {ratio:.2f}x")


if __name__ == "__main__":
    main()
