"""The XGBoost training report as one self-contained HTML page, as the profiler report is made.

Text and tables are written here; the plots are drawn in the browser by plotly.js from the
report's own JSON (``assets/xgboost_report.js``), and ``data-plots-drawn`` is set on ``<body>``
when every plot is drawn. Everything is inline: the page opens from disk with no network.
"""

from __future__ import annotations

from typing import Any

from trainprobe.config.statuses import RuleEvaluationStatus
from trainprobe.report.page import ASSETS
from trainprobe.report.tables import number, table, text
from trainprobe.report.web_assets import PLOTLY_JS, json_script

__all__ = ["SECTIONS", "render_xgboost_page"]

SECTIONS = (
    ("hyperparameters", "Hyperparameters"),
    ("labels", "Label distribution"),
    ("metrics", "Loss and metrics per round"),
    ("feature-importance", "Feature importance"),
    ("evaluation", "Evaluation on the validation set"),
    ("rules", "Rules"),
)


def _plot(key: str) -> str:
    return f'<div class="plot" data-plot="{text(key)}"></div>'


def _section(anchor: str, body: str) -> str:
    title = dict(SECTIONS)[anchor]
    return f'<section id="{anchor}"><h2>{text(title)}</h2>{body}</section>'


def _missing(what: str, collections: str) -> str:
    return (
        f'<p class="muted">No {text(what)} was saved: save the {text(collections)} '
        "collection(s), as CreateXgboostReport's configuration does.</p>"
    )


def render_xgboost_page(content: dict[str, Any]) -> str:
    """The HTML page of ``xgboost_report_content``'s content."""
    navigation = "".join(f'<a href="#{anchor}">{title}</a>' for anchor, title in SECTIONS)
    sections = "".join(
        (
            _hyperparameters(content),
            _labels(content),
            _metrics(content),
            _importance(content),
            _evaluation(content),
            _rules(content),
        )
    )
    job = text(content["Job"])
    rounds = content["Rounds"]
    saved = f"{len(rounds)} saved rounds" if rounds else "no saved round"
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>XGBoost training report: {job}</title>"
        f"{ASSETS.inline('report.css')}{ASSETS.inline(PLOTLY_JS)}"
        "</head><body>"
        f"<header><h1>XGBoost training report: {job}</h1>"
        f'<p class="muted">{text(saved)} · generated {text(content["GeneratedAt"])} by '
        f"trainprobe</p><nav>{navigation}</nav></header>"
        f"<main>{sections}</main>"
        f"{json_script('report-data', content)}"
        f"{ASSETS.inline('plots.js')}{ASSETS.inline('xgboost_report.js')}"
        "</body></html>\n"
    )


def _hyperparameters(content: dict[str, Any]) -> str:
    values = content["Hyperparameters"]
    if not values:
        return _section("hyperparameters", _missing("hyperparameter", "hyperparameters"))
    rows = [(text(name), text(value)) for name, value in sorted(values.items())]
    return _section("hyperparameters", table(("hyperparameter", "value"), rows))


def _labels(content: dict[str, Any]) -> str:
    evaluation = content["Evaluation"]
    if evaluation["Labels"] is None:
        return _section("labels", _missing("label", "labels"))
    labels = evaluation["Labels"]
    body = f'<p class="muted">The validation set\'s labels at round {number(evaluation["Round"])}.'
    if "Counts" in labels:
        total = sum(labels["Counts"])
        rows = [
            (number(label), number(count), number(100 * count / total, 3))
            for label, count in zip(labels["Classes"], labels["Counts"], strict=True)
        ]
        body += "</p>" + table(("class", "samples", "%"), rows)
    else:
        body += "</p>"
    return _section("labels", body + _plot("labels"))


def _metrics(content: dict[str, Any]) -> str:
    metrics = content["Metrics"]
    if not metrics:
        return _section("metrics", _missing("metric", "metrics"))
    rows = []
    for metric in metrics:
        for data_set in metric["Sets"]:
            values = data_set["Values"]
            rows.append(
                (
                    text(metric["Metric"]),
                    text(data_set["Set"]),
                    number(values[0]),
                    number(values[-1]),
                    number(min(values)),
                    number(max(values)),
                )
            )
    plots = "".join(_plot(f"metric:{index}") for index in range(len(metrics)))
    headers = ("metric", "evaluation set", "first", "last", "min", "max")
    return _section("metrics", plots + table(headers, rows))


def _importance(content: dict[str, Any]) -> str:
    types = content["FeatureImportance"]
    if not types:
        return _section("feature-importance", _missing("feature importance", "feature_importance"))
    body = (
        '<p class="muted">Each importance type normalised to sum to 1, at the last saved '
        "round: weight counts the splits on a feature, gain and cover average over them, "
        "total_gain and total_cover add them up.</p>"
    )
    body += "".join(_plot(f"importance:{index}") for index in range(len(types)))
    return _section("feature-importance", body)


def _evaluation(content: dict[str, Any]) -> str:
    evaluation = content["Evaluation"]
    task = evaluation["Task"]
    if task is None:
        return _section("evaluation", _missing("label", "labels and predictions"))
    parts = [f"<p>Task: <b>{text(task)}</b> (round {number(evaluation['Round'])})</p>"]
    if task == "regression":
        residuals = evaluation.get("Residuals")
        if residuals is None:
            parts.append(_missing("prediction", "predictions"))
        else:
            parts.append(
                f"<p>Residuals (prediction − label): mean {number(residuals['Mean'])}, root "
                f"mean square {number(residuals['RootMeanSquare'])}.</p>" + _plot("residuals")
            )
        return _section("evaluation", "".join(parts))
    confusion = evaluation.get("Confusion")
    if confusion is None:
        parts.append(_missing("prediction", "predictions"))
        return _section("evaluation", "".join(parts))
    parts.append("<h3>Confusion matrix</h3>" + _plot("confusion"))
    rows = [
        (
            number(row["Class"]),
            number(row["Precision"]),
            number(row["Recall"]),
            number(row["F1"]),
            number(row["Support"]),
        )
        for row in confusion["PerClass"]
    ]
    parts.append(
        "<h3>Per class</h3>" + table(("class", "precision", "recall", "F1", "samples"), rows)
    )
    parts.append("<h3>Accuracy per round</h3>" + _plot("accuracy"))
    roc = evaluation.get("ROC")
    if roc is not None:
        parts.append(f"<h3>ROC curve (AUC {number(roc['AUC'])})</h3>" + _plot("roc"))
    return _section("evaluation", "".join(parts))


def _rules(content: dict[str, Any]) -> str:
    rules = content["Rules"]
    if not rules:
        return _section("rules", '<p class="muted">No other rule ran on this job.</p>')
    rows = []
    for rule in rules:
        issue = rule["Status"] == RuleEvaluationStatus.ISSUES_FOUND
        css = (
            "issue"
            if issue
            else "ok"
            if rule["Status"] == RuleEvaluationStatus.NO_ISSUES_FOUND
            else ""
        )
        rows.append(
            (
                text(rule["Rule"]),
                f'<span class="{css}">{text(rule["Status"])}</span>',
                text(rule["Details"]),
            )
        )
    return _section("rules", table(("rule", "status", "details"), rows, css_class="rules"))
