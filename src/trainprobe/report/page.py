"""The report as one self-contained HTML page: text and tables written here, plots drawn in the
browser by plotly.js from the report's own data.

The page carries everything it needs inline (plotly.js, the style, the script and the data), so
it opens from disk with no network. Text and tables come from the report's typed sections
(``content.ReportContent``); each plot is a ``<div data-plot="...">`` that the script
(``assets/report.js``) fills from the same content as JSON, in ``<script id="report-data">``;
when every plot is drawn the script sets ``data-plots-drawn`` on ``<body>``, which the tests
wait for.
"""

from __future__ import annotations

from typing import Any

from trainprobe.report.content import ReportContent
from trainprobe.report.debugging_rules import DebuggingRules
from trainprobe.report.flight_recorder import CaptureRow, FlightRecorderSection, StacksRow
from trainprobe.report.tables import (
    bytes_text,
    details_table,
    number,
    seconds_text,
    table,
    text,
)
from trainprobe.report.web_assets import PLOTLY_JS, Assets, json_script

__all__ = ["ASSETS", "render_page"]

ASSETS = Assets("trainprobe.report")
"""The report pages' scripts and style (``report/assets``), and plotly.js."""

_SECTIONS = (
    ("job-summary", "Training job summary"),
    ("training", "Training progress"),
    ("system-usage", "System usage"),
    ("step-durations", "Step durations"),
    ("framework", "Framework summary"),
    ("rules", "Rules"),
    ("debugger-overhead", "Debugger overhead"),
    ("flight-recorder", "Flight recorder"),
)
_PERCENTILE_HEADERS = ("mean", "min", "p5", "p25", "p50", "p75", "p95", "p99", "max")


def _plot(kind: str, *indices: int, css_class: str = "plot") -> str:
    key = ":".join([kind, *map(str, indices)])
    return f'<div class="{css_class}" data-plot="{text(key)}"></div>'


def render_page(content: ReportContent, data: dict[str, Any]) -> str:
    """The HTML page of a report's ``content``; ``data`` is the content as its JSON holds it
    (``json_safe(content.to_json())``), embedded for the plots."""
    job = content.job
    navigation = "".join(f'<a href="#{anchor}">{title}</a>' for anchor, title in _SECTIONS)
    sections = "".join(
        (
            _job_section(content),
            _training_section(content),
            _system_section(content),
            _steps_section(content),
            _framework_section(content),
            _rules_section(content),
            _overhead_section(content),
            _flight_section(content),
        )
    )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>Profiler report: {text(job.name)}</title>"
        f"{ASSETS.inline('report.css')}{ASSETS.inline(PLOTLY_JS)}"
        "</head><body>"
        f"<header><h1>Profiler report: {text(job.name)}</h1>"
        f'<p class="muted">{text(content.job_directory)} · generated '
        f"{text(content.generated_at)} by trainprobe</p><nav>{navigation}</nav></header>"
        f"<main>{sections}</main>"
        f"{json_script('report-data', data)}"
        f"{ASSETS.inline('plots.js')}{ASSETS.inline('report.js')}"
        "</body></html>\n"
    )


def _section(anchor: str, body: str) -> str:
    title = dict(_SECTIONS)[anchor]
    return f'<section id="{anchor}"><h2>{text(title)}</h2>{body}</section>'


def _empty(anchor: str, message: str) -> str:
    """A section with nothing to show but why."""
    return _section(anchor, f'<p class="muted">{text(message)}</p>')


def _job_section(content: ReportContent) -> str:
    job = content.job
    rows = [
        ("Status", text("ended" if job.ended else "in progress")),
        ("Started", text(job.start_time)),
        ("Ended" if job.ended else "Latest data", text(job.end_time)),
        ("Initialization", seconds_text(job.initialization_seconds)),
        ("Training", seconds_text(job.training_seconds)),
        ("Finalization", seconds_text(job.finalization_seconds)),
        ("Steps", number(job.steps)),
        (
            "Throughput",
            f"{number(job.steps_per_second, 3)} steps/s" if job.steps_per_second else "",
        ),
        ("Hosts", text(", ".join(job.hosts))),
        ("Training processes", text(", ".join(job.training_processes))),
        ("GPUs", number(job.gpus)),
    ]
    return _section(
        "job-summary",
        table((), rows, css_class="summary") + _plot("job", css_class="plot short"),
    )


def _training_section(content: ReportContent) -> str:
    record = content.training_record
    if not record.series:
        return _empty(
            "training",
            "No training record: the job's hook kept no step's loss, learning rate or gradient "
            "norm (trainprobe's PyTorch hook keeps them for every TRAIN step).",
        )
    mode = text(record.mode or "")
    rows = [
        [
            text(item.label),
            number(item.count),
            number(item.first),
            number(item.last),
            f"{number(item.min)} at {mode} step {item.min_step}",
            f"{number(item.max)} at {mode} step {item.max_step}",
        ]
        for item in record.series
    ]
    parts = [
        f'<p class="muted">Every {mode} step, whatever the save interval: the loss the training '
        "computed, the learning rate of the optimizer's first parameter group and the global "
        "norm of the gradients it applied, as the hook recorded them (the trial reads them as "
        "trainprobe/loss, trainprobe/learning_rate and trainprobe/gradient_norm).</p>",
        table(("series", "steps", "first", "last", "smallest", "largest"), rows),
    ]
    parts.extend(_plot("record", index) for index in range(len(record.series)))
    return _section("training", "".join(parts))


def _system_section(content: ReportContent) -> str:
    hosts = content.system_usage.hosts
    if not hosts:
        return _empty("system-usage", "No system metrics were recorded.")
    unit = content.time_axis.unit
    parts = []
    for h, host in enumerate(hosts):
        parts.append(f"<h3>{text(host.node)}</h3>")
        parts.append(
            f'<p class="muted">Time axes: {text(unit)} since the job started; '
            "lines are means, bands span the minimum and maximum.</p>"
        )
        parts.extend(_plot("system", h, p) for p in range(len(host.plots)))
        if any(row.type == "gpu" for row in host.statistics):
            parts.append(_plot("gpus", h))
        if host.core_heatmap:
            parts.append(_plot("cores", h))
        rows = [
            [text(row.metric), text(row.unit), number(row.summary["count"])]
            + [number(row.summary.get(name)) for name in _PERCENTILE_HEADERS]
            for row in host.statistics
        ]
        parts.append("<details open><summary>Statistics of every metric</summary>")
        parts.append(table(("metric", "unit", "readings", *_PERCENTILE_HEADERS), rows))
        parts.append("</details>")
    return _section("system-usage", "".join(parts))


def _steps_section(content: ReportContent) -> str:
    processes = content.step_durations.processes
    if not processes:
        return _empty(
            "step-durations",
            "No steps were recorded: the framework timeline was off or the training has not "
            "started a step yet.",
        )
    stddev = content.step_durations.stddev
    parts = [
        f'<p class="muted">A step is an outlier when it took longer than the mean plus '
        f"{number(stddev)} standard deviations (StepOutlier's test).</p>"
    ]
    for i, process in enumerate(processes):
        stats = process.duration_ms
        parts.append(f"<h3>{text(process.node)} · {text(process.mode)}</h3>")
        rows = [
            [
                number(process.steps),
                number(process.outliers),
                number(process.outlier_threshold_ms),
            ]
            + [number(stats.get(name)) for name in _PERCENTILE_HEADERS]
        ]
        parts.append(
            table(
                (
                    "steps",
                    "outliers",
                    "threshold (ms)",
                    *(f"{name} (ms)" for name in _PERCENTILE_HEADERS),
                ),
                rows,
            )
        )
        parts.append(_plot("steps", i) + _plot("histogram", i))
        if process.outlier_steps:
            listed = ", ".join(
                f"{step} ({number(ms)} ms)"
                for step, ms in zip(
                    process.outlier_steps, process.outlier_durations_ms, strict=True
                )
            )
            parts.append(f"<details><summary>Outlier steps</summary><p>{listed}</p></details>")
    return _section("step-durations", "".join(parts))


def _framework_section(content: ReportContent) -> str:
    framework = content.framework
    parts = []
    if framework.phase_split:
        parts.append(_plot("phases"))
    if framework.top_events:
        rows = [
            [text(e.phase), text(e.name), number(e.time_ms), number(e.count), number(e.percent)]
            for e in framework.top_events
        ]
        parts.append("<h3>Events with the most time</h3>")
        parts.append(table(("phase", "event", "time (ms)", "count", "% of all"), rows))
    if framework.top_operators:
        operators = [
            [text(o.kind), text(o.name), number(o.time_ms), number(o.count)]
            for o in framework.top_operators
        ]
        parts.append("<h3>Operators with the most time (detailed profiles)</h3>")
        parts.append(table(("kind", "operator", "time (ms)", "calls"), operators))
    functions = framework.top_functions
    if functions:
        listed = [
            [
                text(f.function),
                text(f"{f.file}:{f.line}"),
                number(f.calls),
                number(f.cumulative_s),
                number(f.own_s),
            ]
            for f in functions.functions
        ]
        clock = f", {functions.timer}" if functions.timer else ""
        parts.append(
            f"<h3>Python functions with the most time ({text(functions.profiler)}"
            f"{text(clock)}, {number(functions.profiles)} profiles)</h3>"
        )
        parts.append(table(("function", "where", "calls", "cumulative (s)", "own (s)"), listed))
    if not parts:
        parts.append('<p class="muted">No framework metrics were recorded.</p>')
    return _section("framework", "".join(parts))


def _debugging_rules(found: DebuggingRules) -> str:
    parts = []
    if found.first_non_finite:
        parts.append(f'<p class="issue">{text(found.first_non_finite)}</p>')
    if found.rules:
        rows = [
            [
                text(row.rule),
                f'<b class="status">{text(row.status)}</b>',
                number(row.steps_evaluated),
                number(row.steps_skipped),
                number(row.tensors_checked),
                text(row.status_details),
            ]
            for row in found.rules
        ]
        columns = ("rule", "status", "steps evaluated", "skipped", "tensors checked", "details")
        parts.append(table(columns, rows, css_class="rules"))
    if found.spikes:
        # The spikes the training's own rules saw, and what was done about each.
        spikes = [[text(s.rule), number(s.step), text(s.text)] for s in found.spikes]
        parts.append(table(("rule", "step", "spike"), spikes, css_class="spikes"))
    return "".join(parts)


def _rules_section(content: ReportContent) -> str:
    rules = content.rules
    debugging = _debugging_rules(content.debugging_rules)
    if not rules.rules:
        return _section(
            "rules",
            debugging + '<p class="muted">No profiler rule has reported on this job. '
            "Run them with <code>trainprobe rules run ProfilerReport "
            f"{text(content.job_directory)}</code>.</p>",
        )
    status = rules.status or "unknown"
    parts = [
        debugging,
        f'<p>ProfilerReport: <b class="status">{text(status)}</b> '
        f"{text(rules.status_details or '')}</p>",
    ]
    rows = []
    for row in rules.rules:
        fired = bool(row.rule_triggered)
        name = f'<a href="#rule-{text(row.rule)}">{text(row.rule)}</a>'
        rows.append(
            [
                name,
                text(row.description),
                f'<span class="{"issue" if fired else "ok"}">{text(row.recommendation)}</span>',
                number(row.rule_triggered),
                number(row.violations),
                number(row.datapoints),
                details_table(row.parameters),
            ]
        )
    parts.append(
        table(
            (
                "rule",
                "description",
                "recommendation",
                "times triggered",
                "violations",
                "datapoints",
                "parameters",
            ),
            rows,
            css_class="rules",
        )
    )
    for i, row in enumerate(rules.rules):
        error = f'<p class="issue">Error: {text(row.error)}</p>' if row.error else ""
        plot = _plot("rule", i) if _has_rule_plot(row.rule, row.details) else ""
        parts.append(
            f'<section class="rule" id="rule-{text(row.rule)}"><h3>{text(row.rule)}</h3>'
            f"<p>{text(row.recommendation)}</p>{error}{plot}"
            f"<details><summary>Evidence</summary>{details_table(row.details)}</details>"
            "</section>"
        )
    return _section("rules", "".join(parts))


def _has_rule_plot(rule: str, details: Any) -> bool:
    """Whether the rule's evidence has what ``report.js`` plots for it: per-GPU statistics
    (LowGPUUtilization, GPUMemoryIncrease), the distances between GPUs (LoadBalancing), the
    histogram of batch waits (Dataloader)."""
    if not isinstance(details, dict):
        return False
    if rule in ("LowGPUUtilization", "GPUMemoryIncrease"):
        return any(details.get("gpus", {}).values())
    if rule == "LoadBalancing":
        return any(details.get("distances", {}).values())
    if rule == "Dataloader":
        return bool(details.get("batch_wait_histogram_s", {}).get("counts"))
    return False


def _overhead_section(content: ReportContent) -> str:
    overhead = content.debugger_overhead
    workers = overhead.workers
    if not workers:
        return _empty(
            "debugger-overhead",
            "The hook recorded no cost: it did not run, or ran before trainprobe recorded it.",
        )
    # A hook that waited for the device (a GPU) shows the waits beside its own time.
    waited = any(w.device_wait_plot for w in workers)
    rows = [
        [
            text(w.worker),
            number(w.steps),
            number(w.mean_ms_per_step),
            number(w.ms_per_step.get("p95")),
            number(w.ms_per_step.get("max")),
            seconds_text(w.total_seconds),
            number(w.percent_of_training),
            *([number(w.mean_device_wait_ms_per_step)] if waited else []),
            bytes_text(w.bytes_written),
            seconds_text(w.blocked_seconds),
        ]
        for w in workers
    ]
    stopped = overhead.saving_stopped
    device_note = (
        " Its waits for the GPU are counted apart: the GPU was running the training's own work "
        "meanwhile."
        if waited
        else ""
    )
    parts = [
        f'<p class="issue">{text(stopped)}. The steps saved before it are intact.</p>'
        if stopped
        else "",
        '<p class="muted">Time the training thread spent in trainprobe\'s hook, and what the '
        f"hook's writer wrote.{device_note}</p>",
        table(
            (
                "worker",
                "steps",
                "mean (ms/step)",
                "p95 (ms)",
                "max (ms)",
                "total",
                "% of training",
                *(["waiting for the GPU (ms/step)"] if waited else []),
                "written",
                "waiting for the writer",
            ),
            rows,
        ),
    ]
    parts.extend(_plot("overhead", i) for i in range(len(workers)))
    return _section("debugger-overhead", "".join(parts))


def _contention(recorder: FlightRecorderSection) -> str:
    """The slow steps put down to a busy machine, as a list."""
    if not recorder.contention:
        return ""
    items = "".join(f"<li>{text(note.words)}.</li>" for note in recorder.contention)
    more = sum(recorder.contention_not_kept.values())
    if more:
        items += f"<li>... and {more} more such step(s), not noted one by one.</li>"
    return (
        "<h3>Slow steps the machine caused</h3>"
        '<p class="muted">Steps much slower than their median during which the training waited '
        "for a core most of the excess: another process had the cores. They were not profiled "
        "(a profile would show nothing that differs).</p>"
        f"<ul>{items}</ul>"
    )


def _stuck(stacks: StacksRow) -> str:
    threads = "".join(
        f"<h4>{text(thread.name)}</h4><pre>{text(chr(10).join(thread.frames))}</pre>"
        for thread in stacks.threads
    )
    return (
        f'<p class="issue">Stuck: {text(stacks.where)} ({text(stacks.reason)}).</p>'
        f"<details><summary>Every thread's stack</summary>{threads}</details>"
    )


def _capture(capture: CaptureRow) -> str:
    steps = ", ".join(str(step.step) for step in capture.steps)
    parts = [
        f"<h3>{text(capture.trigger)} at step {capture.trigger_step}</h3>",
        f"<p>{text(capture.headline)}. Captured steps: {text(steps)}.</p>",
    ]
    if capture.phases:
        rows = [
            [
                text(phase.phase),
                seconds_text(phase.outlier_seconds),
                seconds_text(phase.ordinary_seconds),
                seconds_text(phase.difference_seconds),
            ]
            for phase in capture.phases
        ]
        slow = f"{capture.slow_step.where} (slow)" if capture.slow_step else "slow step"
        usual = (
            f"{capture.ordinary_step.where} (ordinary)"
            if capture.ordinary_step
            else "ordinary step"
        )
        parts.append(table(("phase", slow, usual, "difference"), rows))
    if capture.top_operators:
        operators = [
            [
                text(operator.name),
                number(operator.captured_ms_per_step),
                number(operator.ordinary_ms_per_step),
                number(operator.difference_ms),
            ]
            for operator in capture.top_operators
        ]
        compared = capture.comparison
        usual = f"{compared.where}, profiled (ms)" if compared else "ordinary (ms/step)"
        headers = ("operator", "captured (ms/step)", usual, "difference (ms)")
        parts.append(table(headers, operators))
    files = "".join(f"<li><code>{text(name)}</code></li>" for name in capture.files)
    dropped = "".join(f"<li>{text(note)}</li>" for note in capture.dropped)
    parts.append(f"<ul>{files}{dropped}</ul>")
    return "".join(parts)


def _flight_section(content: ReportContent) -> str:
    recorder = content.flight_recorder
    stuck = "".join(_stuck(stacks) for stacks in recorder.stacks)
    busy = _contention(recorder)
    if not recorder.captures and (stuck or busy):
        return _section("flight-recorder", stuck + busy)
    if not recorder.captures:
        return _empty(
            "flight-recorder",
            "No step was captured: no step was much slower than its mode's median, and no "
            "capture was asked for (trainprobe profile JOB --steps N).",
        )
    intro = (
        '<p class="muted">Steps profiled with torch.profiler when they mattered. The trace files '
        "are under the job's profiler-output/ folder; open them in Perfetto "
        '(<a href="https://ui.perfetto.dev">ui.perfetto.dev</a>, "Open trace file").</p>'
    )
    captures = "".join(_capture(capture) for capture in recorder.captures)
    return _section("flight-recorder", stuck + intro + captures + busy)
