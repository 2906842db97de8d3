"""The runner following a LIVE trial: a writer thread adds steps while the rule is evaluated.

The writer plays the training (StepWriter, as the hook writes); the runner must see every step
once, only when complete, and reach its verdict while the job is still being written. A reader
thread reads the rule's output all along: it must always parse.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from trainprobe.rules import Rule
from trainprobe.rules.definition import RuleDefinition
from trainprobe.rules.runner import RuleRunner
from trainprobe.storage.modes import ModeKeys
from trainprobe.storage.step_file import StepWriter, write_collections_file, write_training_end

COLLECTIONS = {"gradients": {"name": "gradients", "include_regex": ["^gradients/"]}}
GRADIENT = "gradients/fc.weight_grad"


class Training(threading.Thread):
    """Writes TRAIN steps 0..steps-1 (gradient ``values[step]``), one per ``pause`` seconds,
    from each worker in turn; then marks the training as ended unless told to stop first."""

    def __init__(
        self, out: Path, values: list[float], *, workers: int = 1, pause: float = 0.01
    ) -> None:
        super().__init__(daemon=True)
        self.out, self.values, self.workers, self.pause = out, values, workers, pause
        self.quit = threading.Event()
        self.written: dict[int, float] = {}

    def run(self) -> None:
        names = [f"worker_{index}" for index in range(self.workers)]
        for step, value in enumerate(self.values):
            if self.quit.is_set():
                return
            for worker in names:
                with StepWriter(str(self.out), step, worker) as writer:
                    grad = np.full((2, 3), value, dtype=np.float32)
                    writer.add(GRADIENT, grad, mode=ModeKeys.TRAIN, mode_step=step)
                if step == 0 and worker == names[0]:
                    for name in names:
                        write_collections_file(
                            str(self.out), name, COLLECTIONS, num_workers=self.workers
                        )
                time.sleep(self.pause)
            self.written[step] = time.time()
        write_training_end(str(self.out))


class SeesEveryWorker(Rule):
    """Records, per step, which workers' values it could read; fires below ``threshold``."""

    def __init__(self, base_trial, threshold="0.5"):  # type: ignore[no-untyped-def]
        super().__init__(base_trial)
        self.threshold = float(threshold)
        self.seen: list[tuple[int, list[str]]] = []

    def invoke_at_step(self, step: int) -> bool:
        tensor = self.base_trial.tensor(GRADIENT)
        workers = tensor.workers(step)
        self.seen.append((step, workers))
        value = float(np.abs(tensor.value(step, worker=workers[0])).mean())
        if value < self.threshold:
            self.record(message="small", tensor=GRADIENT, step=step, value=value)
            return True
        return False


class OutputReader(threading.Thread):
    """Reads status.json and evaluations.jsonl as fast as it can until told to stop."""

    def __init__(self, directory: Path) -> None:
        super().__init__(daemon=True)
        self.directory = directory
        self.done = threading.Event()
        self.statuses: list[str] = []
        self.reads = 0

    def run(self) -> None:
        while not self.done.is_set():
            status = self.directory / "status.json"
            if status.exists():
                self.statuses.append(json.loads(status.read_text())["RuleEvaluationStatus"])
            lines = self.directory / "evaluations.jsonl"
            if lines.exists():
                data = lines.read_bytes()
                for line in data[: data.rfind(b"\n") + 1].splitlines():
                    json.loads(line)
            self.reads += 1


def test_live_job_issue_found_while_the_training_still_writes(tmp_path: Path) -> None:
    out = tmp_path / "debug-output"
    values = [1.0] * 30 + [0.1] + [1.0] * 400
    training = Training(out, values)
    output = tmp_path / "rule-output"
    reader = OutputReader(output / "SeesEveryWorker")
    runner = RuleRunner(
        RuleDefinition.for_class(SeesEveryWorker, name="SeesEveryWorker"),
        str(out),
        output_dir=str(output),
        every_step=False,
        poll_interval=0.02,
    )
    reader.start()
    training.start()
    try:
        verdict = runner.run()[0]
        still_running = training.is_alive()
    finally:
        training.quit.set()
        reader.done.set()
        training.join()
        reader.join()
    assert verdict.status == "IssuesFound"
    assert [issue.step for issue in verdict.issues] == [30]
    assert still_running, "the verdict came only after the training had ended"
    assert reader.reads > 0 and reader.statuses[-1] == "IssuesFound"
    order = {"InProgress": 0, "IssuesFound": 1}
    assert [order[s] for s in reader.statuses] == sorted(order[s] for s in reader.statuses)
    rule = runner.evaluators[0].rule
    assert isinstance(rule, SeesEveryWorker)
    assert [step for step, _ in rule.seen] == list(range(31))


def test_live_job_ends_with_no_issues_after_every_step(tmp_path: Path) -> None:
    out = tmp_path / "debug-output"
    training = Training(out, [1.0] * 40, pause=0.005)
    runner = RuleRunner(
        RuleDefinition.for_class(SeesEveryWorker),
        str(out),
        output_dir=str(tmp_path / "rule-output"),
        poll_interval=0.02,
    )
    training.start()
    verdict = runner.run()[0]
    training.join()
    assert verdict.status == "NoIssuesFound"
    assert verdict.steps_evaluated == 40
    rule = runner.evaluators[0].rule
    assert isinstance(rule, SeesEveryWorker)
    assert [step for step, _ in rule.seen] == list(range(40))


def test_live_multi_worker_steps_are_evaluated_only_once_complete(tmp_path: Path) -> None:
    out = tmp_path / "debug-output"
    training = Training(out, [1.0] * 25, workers=2, pause=0.01)
    runner = RuleRunner(RuleDefinition.for_class(SeesEveryWorker), str(out), poll_interval=0.005)
    training.start()
    verdict = runner.run()[0]
    training.join()
    assert verdict.status == "NoIssuesFound" and verdict.steps_evaluated == 25
    rule = runner.evaluators[0].rule
    assert isinstance(rule, SeesEveryWorker)
    assert rule.seen == [(step, ["worker_0", "worker_1"]) for step in range(25)]


def test_rules_started_before_the_training_wait_for_its_first_tensors(tmp_path: Path) -> None:
    out = tmp_path / "debug-output"
    training = Training(out, [1.0, 1.0, 0.2, 1.0])
    runner = RuleRunner(
        [
            RuleDefinition.for_class(SeesEveryWorker, name="first"),
            RuleDefinition.for_class(SeesEveryWorker, {"threshold": "0.1"}, name="second"),
        ],
        str(out),
        poll_interval=0.02,
        no_data_timeout=120,
    )
    starter = threading.Timer(0.5, training.start)
    starter.start()
    first, second = runner.run()
    starter.join()
    training.join()
    assert first.status == "IssuesFound" and first.issues[0].step == 2
    assert second.status == "NoIssuesFound" and second.steps_evaluated == 4


def test_the_change_watch_says_unchanged_only_when_nothing_was_added(tmp_path: Path) -> None:
    from trainprobe.storage.output_changes import OutputChangeWatch

    out = tmp_path / "debug-output"

    def write(step: int) -> None:
        with StepWriter(str(out), step, "worker_0") as writer:
            writer.add(GRADIENT, np.ones(2, np.float32), mode=ModeKeys.TRAIN, mode_step=step)

    def age(seconds: float) -> None:
        """Give every directory an old time, as if written ``seconds`` ago (clock ticks)."""
        for directory in [out, *[path for path in out.rglob("*") if path.is_dir()]]:
            os.utime(directory, (time.time() - seconds, time.time() - seconds))

    watch = OutputChangeWatch(str(out), settle=0.05, full_every=3600)
    assert watch.changed()  # the first look
    write_collections_file(str(out), "worker_0", COLLECTIONS, num_workers=1)
    write(0)
    age(100)
    assert watch.changed()
    assert not watch.changed()
    write(1000)  # a new thousand-step directory
    age(90)
    assert watch.changed()
    assert not watch.changed()
    write(1001)
    os.utime(out / "index" / "000000001", (time.time() - 80, time.time() - 80))
    assert watch.changed()
    assert not watch.changed()
    write(1002)  # a time within the settle window is not trusted: asked twice, True twice
    assert watch.changed()
    assert watch.changed()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")
def test_the_change_watch_wakes_when_a_step_is_written_not_at_its_next_poll(
    tmp_path: Path,
) -> None:
    from trainprobe.storage.output_changes import OutputChangeWatch

    out = tmp_path / "debug-output"
    write_collections_file(str(out), "worker_0", COLLECTIONS, num_workers=1)
    watch = OutputChangeWatch(str(out))
    watch.changed()

    def write(step: int) -> None:
        with StepWriter(str(out), step, "worker_0") as writer:
            writer.add(GRADIENT, np.ones(2, np.float32), mode=ModeKeys.TRAIN, mode_step=step)

    for step in range(3):  # the first makes index/000000000/, the others arrive in it
        writer = threading.Timer(0.2, write, args=(step,))
        writer.start()
        assert watch.wait(600), f"step {step} was written, and the watch slept on"
        writer.join()
        assert watch.changed()
        while watch.wait(0.2):  # the step's other files: arrivals already seen
            pass
    # A writer's temporary file is no arrival: the sleep lasts its whole timeout.
    (out / "index" / "000000000" / "000000000009_worker_0.json.tmp").write_text("{")
    assert not watch.wait(0.5)
    watch.close()
    assert not watch.wait(0.1)


@pytest.mark.timeout(60)
def test_stalled_training_is_found_while_the_job_is_quiet(tmp_path: Path) -> None:
    # Three steps, then silence: the job neither writes nor ends.
    out = tmp_path / "debug-output"
    for step in range(3):
        with StepWriter(str(out), step, "worker_0") as writer:
            writer.add(GRADIENT, np.ones((2, 3), np.float32), mode=ModeKeys.TRAIN, mode_step=step)
        if step == 0:
            write_collections_file(str(out), "worker_0", COLLECTIONS, num_workers=1)
    definition = RuleDefinition.for_builtin("StalledTrainingRule", {"threshold": "1"})
    runner = RuleRunner(definition, str(out), output_dir=str(tmp_path / "rule-output"))
    started = time.monotonic()
    (verdict,) = runner.run()
    assert verdict.status == "IssuesFound"
    assert time.monotonic() - started < 30
    evidence = verdict.issues[0].evidence[0]
    assert "no new step" in evidence.message
    assert verdict.issues[0].step == 2
