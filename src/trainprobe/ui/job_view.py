"""One job as the web UI shows it, read from the job store and the job's files.

``JobView`` follows one job for as long as the UI runs: it keeps the job's trial open (the trial
reads only the index files written since it last looked) and the scalar values and reductions it
has read, so a live page costs a few small reads a second, not a re-read of the whole job.
The scalars are kept as they are read (``analysis.scalar_series``), in a directory of the UI's
own when it gives one: a job read once opens at once the next time, reading only newer steps;
a job written by trainprobe's hook opens at once the first time too, from the scalars its
writers kept beside the step files.
What it hands out is JSON-ready: ``summary`` (status, step, steps/s over the last ten seconds, the
rules' cards), ``mean_rate`` (a finished job's steps/s, its report's figure), ``marks`` (what
the charts mark by step: captures, spikes, findings), ``scalars`` (the losses and other scalars
by step, each mode apart), ``profile`` (the report's step durations and system usage, read by
the report's readers, and the slow steps the flight recorder captured), a tensor's history.
Long series are cut to buckets that keep their minimum and maximum (``report.series.envelope``),
so a spike stays visible however many steps there are; a range of steps re-buckets from the
full series.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from trainprobe.analysis.exceptions import MissingCollectionFiles
from trainprobe.analysis.profiling_data.output import ProfilerOutput
from trainprobe.analysis.scalar_series import ScalarSeries
from trainprobe.analysis.trial import Trial, create_trial
from trainprobe.capture.collections import SCALAR_PREFIX, CollectionKeys
from trainprobe.config.statuses import TERMINAL_JOB_STATUSES
from trainprobe.jobs.operations.describe import describe_record, layout_of
from trainprobe.jobs.operations.progress import rule_verdict, training_step
from trainprobe.jobs.store import JobRecord
from trainprobe.report.content import DEFAULT_STDDEV
from trainprobe.report.job_files import JobFiles
from trainprobe.report.series import BUCKETS, envelope, rounded
from trainprobe.report.step_durations import step_durations
from trainprobe.report.system_usage import system_usage
from trainprobe.report.xgboost.build import HTML_FILE as XGBOOST_REPORT_HTML
from trainprobe.report.xgboost.build import RULE_NAME as XGBOOST_REPORT_RULE
from trainprobe.report.xgboost.build import is_xgboost_output
from trainprobe.rules.verdict import ISSUES_FOUND
from trainprobe.storage import files, step_reader
from trainprobe.storage.flight_captures import list_captures
from trainprobe.storage.job_layout import PROFILER_REPORT_HTML, PROFILER_REPORT_JSON
from trainprobe.storage.metric_series import read_metric_series
from trainprobe.storage.nonfinite_file import read_nonfinite_origin
from trainprobe.storage.rule_output import read_status
from trainprobe.storage.spike_records import read_spikes
from trainprobe.storage.training_record import CHARTED
from trainprobe.ui.job_marks import Mark, capture_marks, finding_marks, slow_steps, spike_marks
from trainprobe.ui.tensor_view import Reductions, tensor_at, tensor_history, tensor_index

__all__ = ["SCALAR_COLLECTIONS", "JobView", "bucketed", "job_row", "scalars_dir"]

log = logging.getLogger(__name__)

SCALAR_COLLECTIONS = (CollectionKeys.LOSSES, CollectionKeys.METRICS, CollectionKeys.SM_METRICS)
"""The collections whose tensors the job page plots by step."""

_RATE_WINDOW_SECONDS = 10.0
REFRESH_SECONDS = 0.5
_KEPT_CHARTS = 512
"""Bucketed charts kept until new steps are read (each at most a few thousand numbers)."""
_T = TypeVar("_T")


def _or_none(read: Callable[[], _T], what: str) -> _T | None:
    """``read()``, or None when the files are not there yet or cannot be read: a page shows
    what it can."""
    try:
        return read()
    except Exception:
        log.debug("cannot read %s", what, exc_info=True)
        return None


def scalars_dir(root: str, record: JobRecord) -> str:
    """The directory under ``root`` where the UI keeps job ``record``'s scalars: named by the
    job and by where its output is and when it was created, so that a job made again under
    the same name starts afresh."""
    source = f"{layout_of(record).debug_output}\n{record.creation_time!r}".encode()
    return os.path.join(root, f"{record.name}-{hashlib.sha256(source).hexdigest()[:16]}")


def bucketed(
    steps: Sequence[int] | np.ndarray,
    values: Sequence[float] | np.ndarray,
    lo: float | None,
    hi: float | None,
) -> dict[str, Any]:
    """``values`` by step (``steps`` in order), within ``[lo, hi]`` when given, as at most
    1000 buckets keeping each bucket's mean, minimum and maximum; ``points`` is how many steps
    the buckets hold."""
    x = np.asarray(steps, dtype=np.float64)
    first = 0 if lo is None else int(np.searchsorted(x, lo, side="left"))
    end = x.size if hi is None else int(np.searchsorted(x, hi, side="right"))
    x, y = x[first:end], np.asarray(values, dtype=np.float64)[first:end]
    return {"points": int(x.size), **envelope(x, y)}


class _FollowedTrial:
    """A job's trial, opened once its collections file exists; it reads the index files
    written since it last looked at most every ``REFRESH_SECONDS`` (not at every query).
    ``range_steps`` as ``create_trial``'s."""

    def __init__(
        self, debug_output: str, range_steps: tuple[int | None, int | None] | None = None
    ) -> None:
        self._debug_output, self._range_steps = debug_output, range_steps
        self.opened: Trial | None = None
        self._refreshed = 0.0

    def get(self) -> Trial | None:
        """The trial, or None while it cannot be opened yet."""
        now = time.monotonic()
        if self.opened is None:
            try:
                self.opened = create_trial(
                    self._debug_output, timeout=0, range_steps=self._range_steps
                )
            except (MissingCollectionFiles, OSError, ValueError):
                return None
            self.opened.dynamic_refresh = False
            self._refreshed = now
        elif now - self._refreshed >= REFRESH_SECONDS and not self.opened.loaded_all_steps:
            self.opened.refresh_data()
            self._refreshed = now
        return self.opened


class JobView:
    """What the UI reads of one job, kept between looks (see the module docstring)."""

    def __init__(self, record: JobRecord, scalars_root: str | None = None) -> None:
        self.name = record.name
        self.layout = layout_of(record)
        self._lock = threading.RLock()
        self._steps: deque[tuple[float, int]] = deque()
        self._trial = _FollowedTrial(self.layout.debug_output)
        self._scalar_trial: _FollowedTrial | None = None
        self._scalar_names: tuple[tuple[int, int], list[str]] | None = None
        self._scalars_dir = None if scalars_root is None else scalars_dir(scalars_root, record)
        self._scalars: ScalarSeries | None = None
        self._charts: dict[tuple[str, float | None, float | None], tuple[int, dict[str, Any]]] = {}
        self._framework: str | None = None
        self._finished_cards: dict[str, dict[str, Any]] = {}
        self._issues: dict[str, tuple[int | None, str | None, list[str]]] = {}
        self._reductions: dict[str, Reductions] = {}
        self._mean_rate: float | None = None

    # ----- the summary --------------------------------------------------------------------

    def step_and_rate(self, record: JobRecord) -> tuple[int | None, float | None]:
        """The training's step, and its steps per second over the last ten seconds (None once
        the job has ended: ``mean_rate`` says the training's)."""
        step = _or_none(lambda: training_step(self.layout), "the step")
        now = time.monotonic()
        steps = self._steps
        if step is not None and (not steps or step > steps[-1][1]):
            steps.append((now, step))
        while len(steps) > 2 and now - steps[0][0] > _RATE_WINDOW_SECONDS:
            steps.popleft()
        if record.finished or len(steps) < 2 or steps[-1][0] <= steps[0][0]:
            return step, None
        return step, (steps[-1][1] - steps[0][1]) / (steps[-1][0] - steps[0][0])

    def mean_rate(self, record: JobRecord) -> float | None:
        """A finished job's mean steps per second as its profiler report counts them (its steps
        over its first step's start to its last step's end): the report's figure, so the page
        and the report it embeds agree. None while the job runs, or without a report."""
        if not record.finished:
            return None
        if self._mean_rate is not None:
            return self._mean_rate
        page = self.report_files().get("profiler")
        if page is None:
            return None
        path = os.path.join(os.path.dirname(page), PROFILER_REPORT_JSON)
        report = _or_none(lambda: json.loads(files.read_bytes(path)), "the profiler report")
        rate = report.get("Job", {}).get("StepsPerSecond") if isinstance(report, dict) else None
        if not isinstance(rate, int | float):
            return None
        if record.runner_done:  # the report the job's runner wrote last: final
            self._mean_rate = float(rate)
        return float(rate)

    def summary(self, record: JobRecord) -> dict[str, Any]:
        """The job's status, step, speed and rules, for the job page's header and cards."""
        with self._lock:
            description = describe_record(record)
            step, rate = self.step_and_rate(record)
            cards = [
                self._card(rule, kind)
                for kind, key in (
                    ("debugging", "DebugRuleEvaluationStatuses"),
                    ("profiler", "ProfilerRuleEvaluationStatuses"),
                )
                for rule in description.get(key, [])
            ]
            origin = _or_none(
                lambda: read_nonfinite_origin(self.layout.debug_output), "the non-finite origin"
            )
        return {
            **job_row(record, step, rate, cards, self.framework()),
            "failureReason": record.failure_reason,
            "stopReason": record.stop_reason,
            "rules": cards,
            "nonFinite": None
            if origin is None
            else {"step": origin.step, "text": origin.describe()},
            "reports": sorted(self.report_files()) if record.finished else [],
        }

    def _card(self, rule: dict[str, Any], kind: str) -> dict[str, Any]:
        name, status = rule["RuleConfigurationName"], rule["RuleEvaluationStatus"]
        kept = self._finished_cards.get(name)
        if kept is not None and kept["status"] == status:
            return kept  # a final verdict does not change: its files are not read again
        directory = self.layout.rule_output_dir(name)
        issue = self._issues.get(name) if status == ISSUES_FOUND else None
        if issue is None:
            # The first issue's evidence, read once: a rule goes on evaluating after it.
            verdict = rule_verdict(directory, name, status, "", counts_steps=kind == "debugging")
            issue = (verdict.issue_step, verdict.issue_where, verdict.evidence)
            if verdict.issue_step is not None:
                self._issues[name] = issue
        written = _or_none(lambda: read_status(directory), f"the status of rule {name}")
        card = {
            "name": name,
            "kind": kind,
            "status": status,
            "details": rule.get("StatusDetails", ""),
            "issueStep": issue[0],
            "issueWhere": issue[1],
            "evidence": issue[2],
            "stepsEvaluated": None if written is None else written.steps_evaluated,
            "stepsSkipped": None if written is None else written.steps_skipped,
            "tensorsChecked": None if written is None else written.tensors_checked,
        }
        if written is not None and written.finished:
            self._finished_cards[name] = card
        return card

    def marks(self, cards: list[dict[str, Any]]) -> list[Mark]:
        """What the charts mark by step: the flight recorder's captures, the in-training rules'
        spikes, and the first issue of each other debugging rule among ``cards``
        (``summary``'s)."""
        layout = self.layout
        captures = _or_none(lambda: list_captures(layout.profiler_output), "the captures") or []
        spikes = _or_none(lambda: read_spikes(layout.debug_output), "the spikes") or []
        spiked = {(spike.rule, spike.step) for spike in spikes}
        # A spike rule's finding is its first spike, marked already.
        findings = [mark for mark in finding_marks(cards) if (mark.label, mark.step) not in spiked]
        marks = capture_marks(captures) + spike_marks(spikes) + findings
        return sorted(marks, key=lambda mark: mark.step)

    def report_files(self) -> dict[str, str]:
        """The job's reports written so far, by kind: ``profiler`` (the ProfilerReport rule's
        page) and ``xgboost`` (CreateXgboostReport's)."""
        layout = self.layout
        job = JobFiles.of(layout.output_dir, layout.profiler_output, layout.debug_output)
        found = {}
        if job.rule_output is not None:
            found["profiler"] = os.path.join(job.report_dir(), PROFILER_REPORT_HTML)
        found["xgboost"] = os.path.join(
            layout.rule_output_dir(XGBOOST_REPORT_RULE), XGBOOST_REPORT_HTML
        )
        return {kind: path for kind, path in found.items() if os.path.isfile(path)}

    def framework(self) -> str:
        """``XGBoost``, ``Keras`` or ``PyTorch``, as the hook's collections say; blank before
        the hook has written them."""
        debug_output = self.layout.debug_output
        if self._framework is None and self._has_collections():
            if is_xgboost_output(debug_output):
                self._framework = "XGBoost"
            else:
                keras = step_reader.has_collections(debug_output, _KERAS_COLLECTIONS)
                self._framework = "Keras" if keras else "PyTorch"
        return self._framework or ""

    def _has_collections(self) -> bool:
        """Whether the hook has written its collections file (without opening the trial,
        which reads every step's index)."""
        found = _or_none(
            lambda: step_reader.list_collections_files(self.layout.debug_output),
            "the collections files",
        )
        return bool(found)

    # ----- tensors ------------------------------------------------------------------------

    def trial(self) -> Trial | None:
        """The job's trial (see ``_FollowedTrial``)."""
        return self._trial.get()

    def scalar_names(self) -> list[str]:
        """The tensors of the scalar collections (losses first), then those saved by
        ``save_scalar``."""
        with self._lock:
            return self._find_scalar_names()

    def _find_scalar_names(self) -> list[str]:
        series = self._series()
        trial = self._trial_for_scalars(series)
        if trial is None:
            return series.names()
        known = (len(trial.tensor_names()), len(series.names()))
        if self._scalar_names is not None and self._scalar_names[0] == known:
            return self._scalar_names[1]
        # The hook's record of every TRAIN step first: the training's own curves.
        names: list[str] = [name for name in CHARTED if name in series.names()]
        collections = trial.collections()
        for collection in SCALAR_COLLECTIONS:
            if collection in collections:
                saved = trial.collection(collection)
                names += trial.tensor_names(collection=collection)
                names += [name for name in series.names() if saved.matches(name)]
        names += [n for n in trial.tensor_names() + series.names() if n.startswith(SCALAR_PREFIX)]
        names = list(dict.fromkeys(names))
        self._scalar_names = (known, names)
        return names

    def _series(self) -> ScalarSeries:
        if self._scalars is None:
            self._scalars = ScalarSeries(self._scalars_dir, self.layout.debug_output)
        return self._scalars

    def _trial_for_scalars(self, series: ScalarSeries) -> Trial | None:
        """The trial the scalars are read from: the job's, when it is open or nothing has
        been read yet, else one that reads only the steps after those ``series`` holds (a
        long job's earlier index files are not read again)."""
        if self._trial.opened is not None or series.read_through < 0:
            return self.trial()
        if self._scalar_trial is None:
            self._scalar_trial = _FollowedTrial(
                self.layout.debug_output, range_steps=(series.read_through + 1, None)
            )
        return self._scalar_trial.get()

    def _read_new_scalars(self) -> None:
        """Read the scalars of every complete step after the last one read: each step's event
        file once for all of them."""
        series = self._series()
        trial = self._trial_for_scalars(series)
        if trial is not None:
            series.follow(trial, self._find_scalar_names())

    def scalar_chart(
        self, name: str, lo: float | None = None, hi: float | None = None
    ) -> dict[str, Any]:
        """Scalar tensor ``name`` by step: a series per mode, bucketed (see ``bucketed``)."""
        with self._lock:
            self._read_new_scalars()
            return self._chart(name, lo, hi)

    def scalars(self, lo: float | None = None, hi: float | None = None) -> list[dict[str, Any]]:
        """A chart of each scalar tensor (see ``scalar_chart``)."""
        with self._lock:
            self._read_new_scalars()
            return [self._chart(name, lo, hi) for name in self._find_scalar_names()]

    def _chart(self, name: str, lo: float | None, hi: float | None) -> dict[str, Any]:
        # A chart changes only when new steps are read: until then, the one made is served.
        read_through = self._series().read_through
        key = (name, lo, hi)
        kept = self._charts.get(key)
        if kept is not None and kept[0] == read_through:
            return kept[1]
        if len(self._charts) >= _KEPT_CHARTS:
            self._charts.clear()
        chart = {
            "tensor": name,
            "series": [
                {"mode": mode, **bucketed(steps, values, lo, hi)}
                for mode, (steps, values) in self._series().of(name).items()
            ],
        }
        self._charts[key] = (read_through, chart)
        return chart

    def tensors(self) -> dict[str, Any] | None:
        """Every saved tensor, by collection (``tensor_index``); None before the first."""
        with self._lock:
            trial = self.trial()
            return None if trial is None else tensor_index(trial)

    def tensor_history(self, name: str) -> dict[str, Any] | None:
        """Tensor ``name``'s reductions and distribution over steps (``tensor_history``)."""
        with self._lock:
            trial = self.trial()
            if trial is None:
                return None
            return tensor_history(trial, name, self._reductions.setdefault(name, {}))

    def tensor_at(self, name: str, step: int) -> dict[str, Any] | None:
        """Tensor ``name``'s value at ``step`` (``tensor_at``)."""
        with self._lock:
            trial = self.trial()
            return None if trial is None else tensor_at(trial, name, step)

    # ----- the profile --------------------------------------------------------------------

    def profile(self, record: JobRecord) -> dict[str, Any]:
        """The report's step durations and system usage sections as the job's files are now
        (times in seconds since the job was created), the slow steps the flight recorder
        captured, and when the steps ran: the first node's steps, at most ``BUCKETS`` of them
        evenly spread, with the second each started."""
        spans = ProfilerOutput(self.layout.profiler_output).steps().spans()
        series = read_metric_series(self.layout.profiler_output)
        first = min((span.node_id for span in spans), default=None)
        started = sorted(
            (span.step, span.start_us / 1e6 - record.creation_time)
            for span in spans
            if span.node_id == first
        )
        if len(started) > BUCKETS:
            picked = np.linspace(0, len(started) - 1, BUCKETS).round().astype(int)
            started = [started[index] for index in picked]
        captures = _or_none(lambda: list_captures(self.layout.profiler_output), "the captures")
        return {
            "stepDurations": step_durations(spans, DEFAULT_STDDEV).to_json(),
            "slowSteps": [slow.to_json() for slow in slow_steps(captures or [])],
            "systemUsage": system_usage(series, record.creation_time, 1.0).to_json(),
            "stepTimes": {
                "steps": [step for step, _ in started],
                "seconds": rounded([seconds for _, seconds in started], 7),
            },
        }


def job_row(
    record: JobRecord,
    step: int | None,
    rate: float | None,
    cards: list[dict[str, Any]],
    framework: str,
) -> dict[str, Any]:
    """A job as the jobs list shows it."""
    return {
        "name": record.name,
        "status": record.status,
        "secondaryStatus": record.secondary_status,
        "created": record.creation_time,
        "started": record.training_start_time,
        "ended": record.training_end_time if record.status in TERMINAL_JOB_STATUSES else None,
        "step": step,
        "stepsPerSecond": rate,
        "framework": framework,
        "issues": [card["name"] for card in cards if card["status"] == ISSUES_FOUND],
    }


_KERAS_COLLECTIONS = frozenset({CollectionKeys.OPTIMIZER_VARIABLES, CollectionKeys.SM_METRICS})
"""Collections the Keras hook always writes and the PyTorch hook never does (smdebug's
TensorFlow hooks wrote them too)."""
