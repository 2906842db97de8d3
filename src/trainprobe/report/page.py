"""The report as one self-contained HTML page: text and tables written here, plots drawn in the
browser by plotly.js from the report's own data.

The page carries everything it needs inline (plotly.js, the style, the script and the data), so
it opens from disk with no network. Each plot is a ``<div data-plot="...">`` that the script
(``assets/report.js``) fills from the JSON in ``<script id="report-data">``; when every plot is
drawn the script sets ``data-plots-drawn`` on ``<body>``, which the tests wait for.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from trainprobe.report.tables import (
    bytes_text,
    details_table,
    number,
    seconds_text,
    table,
    text,
)

__all__ = ["render_page"]

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


def _asset(name: str) -> str:
    return resources.files("trainprobe.report").joinpath("assets", name).read_text("utf-8")


def _plotly_js() -> str:
    from plotly.offline import get_plotlyjs  # a large module: imported only to write a page

    return str(get_plotlyjs())


def _plot(kind: str, *indices: int, css_class: str = "plot") -> str:
    key = ":".join([kind, *map(str, indices)])
    return f'<div class="{css_class}" data-plot="{text(key)}"></div>'


def _embedded_json(content: dict[str, Any]) -> str:
    data = json.dumps(content, allow_nan=False, separators=(",", ":"))
    return data.replace("<", "\\u003c")  # no text in the data can end or open a tag


def render_page(content: dict[str, Any]) -> str:
    """The HTML page of a report's content (``report_content``, made JSON-safe)."""
    job = content["Job"]
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
        f"<title>Profiler report: {text(job['Name'])}</title>"
        f"<style>{_asset('report.css')}</style>"
        f"<script>{_plotly_js()}</script>"
        "</head><body>"
        f"<header><h1>Profiler report: {text(job['Name'])}</h1>"
        f'<p class="muted">{text(content["JobDirectory"])} · generated '
        f"{text(content['GeneratedAt'])} by trainprobe</p><nav>{navigation}</nav></header>"
        f"<main>{sections}</main>"
        f'<script type="application/json" id="report-data">{_embedded_json(content)}</script>'
        f"<script>{_asset('plots.js')}</script>"
        f"<script>{_asset('report.js')}</script>"
        "</body></html>\n"
    )


def _section(anchor: str, body: str) -> str:
    title = dict(_SECTIONS)[anchor]
    return f'<section id="{anchor}"><h2>{text(title)}</h2>{body}</section>'


def _empty(anchor: str, message: str) -> str:
    """A section with nothing to show but why."""
    return _section(anchor, f'<p class="muted">{text(message)}</p>')


def _job_section(content: dict[str, Any]) -> str:
    job = content["Job"]
    rows = [
        ("Status", text("ended" if job["Status"] == "Ended" else "in progress")),
        ("Started", text(job["StartTime"])),
        ("Ended" if job["Status"] == "Ended" else "Latest data", text(job["EndTime"])),
        ("Initialization", seconds_text(job["InitializationSeconds"])),
        ("Training", seconds_text(job["TrainingSeconds"])),
        ("Finalization", seconds_text(job["FinalizationSeconds"])),
        ("Steps", number(job["Steps"])),
        (
            "Throughput",
            f"{number(job['StepsPerSecond'], 3)} steps/s" if job["StepsPerSecond"] else "",
        ),
        ("Hosts", text(", ".join(job["Hosts"]))),
        ("Training processes", text(", ".join(job["TrainingProcesses"]))),
        ("GPUs", number(job["GPUs"])),
    ]
    return _section(
        "job-summary",
        table((), rows, css_class="summary") + _plot("job", css_class="plot short"),
    )


def _training_section(content: dict[str, Any]) -> str:
    record = content.get("TrainingRecord") or {}
    series = record.get("Series") or []
    if not series:
        return _empty(
            "training",
            "No training record: the job's hook kept no step's loss, learning rate or gradient "
            "norm (trainprobe's PyTorch hook keeps them for every TRAIN step).",
        )
    mode = text(record["Mode"])
    rows = [
        [
            text(item["Label"]),
            number(item["Count"]),
            number(item["First"]),
            number(item["Last"]),
            f"{number(item['Min'])} at {mode} step {item['MinStep']}",
            f"{number(item['Max'])} at {mode} step {item['MaxStep']}",
        ]
        for item in series
    ]
    parts = [
        f'<p class="muted">Every {mode} step, whatever the save interval: the loss the training '
        "computed, the learning rate of the optimizer's first parameter group and the global "
        "norm of the gradients it applied, as the hook recorded them (the trial reads them as "
        "trainprobe/loss, trainprobe/learning_rate and trainprobe/gradient_norm).</p>",
        table(("series", "steps", "first", "last", "smallest", "largest"), rows),
    ]
    parts.extend(_plot("record", index) for index in range(len(series)))
    return _section("training", "".join(parts))


def _system_section(content: dict[str, Any]) -> str:
    hosts = content["SystemUsage"]["Hosts"]
    if not hosts:
        return _empty("system-usage", "No system metrics were recorded.")
    unit = content["TimeAxis"]["Unit"]
    parts = []
    for h, host in enumerate(hosts):
        parts.append(f"<h3>{text(host['Node'])}</h3>")
        parts.append(
            f'<p class="muted">Time axes: {text(unit)} since the job started; '
            "lines are means, bands span the minimum and maximum.</p>"
        )
        parts.extend(_plot("system", h, p) for p in range(len(host["Plots"])))
        if any(row["Type"] == "gpu" for row in host["Statistics"]):
            parts.append(_plot("gpus", h))
        if host["CoreHeatmap"]:
            parts.append(_plot("cores", h))
        rows = [
            [text(row["Metric"]), text(row["Unit"]), number(row["count"])]
            + [number(row.get(name)) for name in _PERCENTILE_HEADERS]
            for row in host["Statistics"]
        ]
        parts.append("<details open><summary>Statistics of every metric</summary>")
        parts.append(table(("metric", "unit", "readings", *_PERCENTILE_HEADERS), rows))
        parts.append("</details>")
    return _section("system-usage", "".join(parts))


def _steps_section(content: dict[str, Any]) -> str:
    processes = content["StepDurations"]["Processes"]
    if not processes:
        return _empty(
            "step-durations",
            "No steps were recorded: the framework timeline was off or the training has not "
            "started a step yet.",
        )
    stddev = content["StepDurations"]["Stddev"]
    parts = [
        f'<p class="muted">A step is an outlier when it took longer than the mean plus '
        f"{number(stddev)} standard deviations (StepOutlier's test).</p>"
    ]
    for i, process in enumerate(processes):
        stats = process["DurationMs"]
        parts.append(f"<h3>{text(process['Node'])} · {text(process['Mode'])}</h3>")
        rows = [
            [
                number(process["Steps"]),
                number(process["Outliers"]),
                number(process["OutlierThresholdMs"]),
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
        if process["OutlierSteps"]:
            listed = ", ".join(
                f"{step} ({number(ms)} ms)"
                for step, ms in zip(
                    process["OutlierSteps"], process["OutlierDurationsMs"], strict=True
                )
            )
            parts.append(f"<details><summary>Outlier steps</summary><p>{listed}</p></details>")
    return _section("step-durations", "".join(parts))


def _framework_section(content: dict[str, Any]) -> str:
    framework = content["Framework"]
    parts = []
    if framework["PhaseSplit"]:
        parts.append(_plot("phases"))
    if framework["TopEvents"]:
        rows = [
            [
                text(e["Phase"]),
                text(e["Name"]),
                number(e["TimeMs"]),
                number(e["Count"]),
                number(e["Percent"]),
            ]
            for e in framework["TopEvents"]
        ]
        parts.append("<h3>Events with the most time</h3>")
        parts.append(table(("phase", "event", "time (ms)", "count", "% of all"), rows))
    if framework["TopOperators"]:
        rows = [
            [text(o["Kind"]), text(o["Name"]), number(o["TimeMs"]), number(o["Count"])]
            for o in framework["TopOperators"]
        ]
        parts.append("<h3>Operators with the most time (detailed profiles)</h3>")
        parts.append(table(("kind", "operator", "time (ms)", "calls"), rows))
    functions = framework["TopFunctions"]
    if functions:
        rows = [
            [
                text(f["Function"]),
                text(f"{f['File']}:{f['Line']}"),
                number(f["Calls"]),
                number(f["CumulativeS"]),
                number(f["OwnS"]),
            ]
            for f in functions["Functions"]
        ]
        clock = f", {functions['Timer']}" if functions["Timer"] else ""
        parts.append(
            f"<h3>Python functions with the most time ({text(functions['Profiler'])}"
            f"{text(clock)}, {number(functions['Profiles'])} profiles)</h3>"
        )
        parts.append(table(("function", "where", "calls", "cumulative (s)", "own (s)"), rows))
    if not parts:
        parts.append('<p class="muted">No framework metrics were recorded.</p>')
    return _section("framework", "".join(parts))


def _debugging_rules(content: dict[str, Any]) -> str:
    found = content.get("DebuggingRules") or {"Rules": [], "FirstNonFinite": None}
    parts = []
    if found["FirstNonFinite"]:
        parts.append(f'<p class="issue">{text(found["FirstNonFinite"])}</p>')
    if found["Rules"]:
        rows = [
            [
                text(row["Rule"]),
                f'<b class="status">{text(row["Status"])}</b>',
                number(row["StepsEvaluated"]),
                number(row["StepsSkipped"]),
                number(row["TensorsChecked"]),
                text(row["StatusDetails"]),
            ]
            for row in found["Rules"]
        ]
        columns = ("rule", "status", "steps evaluated", "skipped", "tensors checked", "details")
        parts.append(table(columns, rows, css_class="rules"))
    spikes = found.get("Spikes") or []
    if spikes:
        # The spikes the training's own rules saw, and what was done about each.
        rows = [[text(s["Rule"]), number(s["Step"]), text(s["Text"])] for s in spikes]
        parts.append(table(("rule", "step", "spike"), rows, css_class="spikes"))
    return "".join(parts)


def _rules_section(content: dict[str, Any]) -> str:
    rules = content["Rules"]
    debugging = _debugging_rules(content)
    if not rules["Rules"]:
        return _section(
            "rules",
            debugging + '<p class="muted">No profiler rule has reported on this job. '
            "Run them with <code>trainprobe rules run ProfilerReport "
            f"{text(content['JobDirectory'])}</code>.</p>",
        )
    status = rules["Status"] or "unknown"
    parts = [
        debugging,
        f'<p>ProfilerReport: <b class="status">{text(status)}</b> '
        f"{text(rules['StatusDetails'] or '')}</p>",
    ]
    rows = []
    for row in rules["Rules"]:
        fired = bool(row["RuleTriggered"])
        name = f'<a href="#rule-{text(row["Rule"])}">{text(row["Rule"])}</a>'
        rows.append(
            [
                name,
                text(row["Description"]),
                f'<span class="{"issue" if fired else "ok"}">{text(row["Recommendation"])}</span>',
                number(row["RuleTriggered"]),
                number(row["Violations"]),
                number(row["Datapoints"]),
                details_table(row["Parameters"]),
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
    for i, row in enumerate(rules["Rules"]):
        error = f'<p class="issue">Error: {text(row["Error"])}</p>' if row["Error"] else ""
        plot = _plot("rule", i) if _has_rule_plot(row["Rule"], row["Details"]) else ""
        parts.append(
            f'<section class="rule" id="rule-{text(row["Rule"])}"><h3>{text(row["Rule"])}</h3>'
            f"<p>{text(row['Recommendation'])}</p>{error}{plot}"
            f"<details><summary>Evidence</summary>{details_table(row['Details'])}</details>"
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


def _overhead_section(content: dict[str, Any]) -> str:
    workers = content["DebuggerOverhead"]["Workers"]
    if not workers:
        return _empty(
            "debugger-overhead",
            "The hook recorded no cost: it did not run, or ran before trainprobe recorded it.",
        )
    # A hook that waited for the device (a GPU) shows the waits beside its own time.
    waited = any(w.get("DeviceWaitPlot") for w in workers)
    rows = [
        [
            text(w["Worker"]),
            number(w["Steps"]),
            number(w["MeanMsPerStep"]),
            number(w["MsPerStep"].get("p95")),
            number(w["MsPerStep"].get("max")),
            seconds_text(w["TotalSeconds"]),
            number(w["PercentOfTraining"]),
            *([number(w["MeanDeviceWaitMsPerStep"])] if waited else []),
            bytes_text(w["BytesWritten"]),
            seconds_text(w["BlockedSeconds"]),
        ]
        for w in workers
    ]
    stopped = content["DebuggerOverhead"].get("SavingStopped")
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


def _contention(content: dict[str, Any]) -> str:
    """The slow steps put down to a busy machine, as a list."""
    section = content.get("FlightRecorder", {})
    notes = section.get("Contention", [])
    if not notes:
        return ""
    items = "".join(f"<li>{text(note['Words'])}.</li>" for note in notes)
    more = sum(section.get("ContentionNotKept", {}).values())
    if more:
        items += f"<li>... and {more} more such step(s), not noted one by one.</li>"
    return (
        "<h3>Slow steps the machine caused</h3>"
        '<p class="muted">Steps much slower than their median during which the training waited '
        "for a core most of the excess: another process had the cores. They were not profiled "
        "(a profile would show nothing that differs).</p>"
        f"<ul>{items}</ul>"
    )


def _flight_section(content: dict[str, Any]) -> str:
    captures = content.get("FlightRecorder", {}).get("Captures", [])
    busy = _contention(content)
    stuck = "".join(
        f'<p class="issue">Stuck: {text(stacks["Where"])} ({text(stacks["Reason"])}).</p>'
        "<details><summary>Every thread's stack</summary>"
        + "".join(
            f"<h4>{text(thread['Name'])}</h4><pre>{text(chr(10).join(thread['Frames']))}</pre>"
            for thread in stacks["Threads"]
        )
        + "</details>"
        for stacks in content.get("FlightRecorder", {}).get("Stacks", [])
    )
    if not captures and (stuck or busy):
        return _section("flight-recorder", stuck + busy)
    if not captures:
        return _empty(
            "flight-recorder",
            "No step was captured: no step was much slower than its mode's median, and no "
            "capture was asked for (trainprobe profile JOB --steps N).",
        )
    parts = [
        '<p class="muted">Steps profiled with torch.profiler when they mattered. The trace files '
        "are under the job's profiler-output/ folder; open them in Perfetto "
        '(<a href="https://ui.perfetto.dev">ui.perfetto.dev</a>, "Open trace file").</p>'
    ]
    parts.insert(0, stuck)
    for capture in captures:
        steps = ", ".join(str(step["Step"]) for step in capture["Steps"])
        parts.append(f"<h3>{text(capture['Trigger'])} at step {capture['TriggerStep']}</h3>")
        parts.append(f"<p>{text(capture['Headline'])}. Captured steps: {text(steps)}.</p>")
        if capture["Phases"]:
            rows = [
                [
                    text(phase["Phase"]),
                    seconds_text(phase["OutlierSeconds"]),
                    seconds_text(phase["OrdinarySeconds"]),
                    seconds_text(phase["DifferenceSeconds"]),
                ]
                for phase in capture["Phases"]
            ]
            ordinary = capture.get("OrdinaryStep") or {}
            usual = f"{ordinary['Where']} (ordinary)" if ordinary.get("Where") else "ordinary step"
            slow = (capture.get("SlowStep") or {}).get("Where") or "slow step"
            headers = ("phase", f"{slow} (slow)", usual, "difference")
            parts.append(table(headers, rows))
        if capture["TopOperators"]:
            rows = [
                [
                    text(operator["Name"]),
                    number(operator["CapturedMsPerStep"]),
                    number(operator["OrdinaryMsPerStep"]),
                    number(operator["DifferenceMs"]),
                ]
                for operator in capture["TopOperators"]
            ]
            comparison = (capture.get("Comparison") or {}).get("Where")
            usual = f"{comparison}, profiled (ms)" if comparison else "ordinary (ms/step)"
            headers = ("operator", "captured (ms/step)", usual, "difference (ms)")
            parts.append(table(headers, rows))
        files = "".join(f"<li><code>{text(name)}</code></li>" for name in capture["Files"])
        dropped = "".join(f"<li>{text(note)}</li>" for note in capture["Dropped"])
        parts.append(f"<ul>{files}{dropped}</ul>")
    parts.append(busy)
    return _section("flight-recorder", "".join(parts))
