// Draws the XGBoost report's plots from its embedded data (see trainprobe/report/xgboost/page.py).
"use strict";
(function () {
  const report = JSON.parse(document.getElementById("report-data").textContent);
  const colors = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
                  "#7f7f7f", "#bcbd22", "#17becf"];
  const evaluation = report.Evaluation;

  function layout(title, xTitle, yTitle, extra) {
    return Object.assign({
      title: { text: title, font: { size: 14 } },
      margin: { l: 60, r: 20, t: 40, b: 45 },
      xaxis: { title: { text: xTitle } },
      yaxis: { title: { text: yTitle } },
      legend: { orientation: "h", y: -0.25 },
    }, extra || {});
  }

  function histogram(data, name, color) {
    const edges = data.Edges;
    const centres = data.Counts.map((_, i) => (edges[i] + edges[i + 1]) / 2);
    return { type: "bar", x: centres, y: data.Counts, name: name, marker: { color: color },
             width: edges.length > 1 ? edges[1] - edges[0] : 1 };
  }

  const plots = {
    labels() {
      const labels = evaluation.Labels;
      if (labels.Counts) {
        return [[{ type: "bar", x: labels.Classes.map(String), y: labels.Counts,
                   marker: { color: colors[0] } }],
                layout("Samples per class", "class", "samples", { xaxis: { type: "category" } })];
      }
      return [[histogram(labels.Histogram, "labels", colors[0])],
              layout("Distribution of the labels", "label", "samples")];
    },
    metric(index) {
      const metric = report.Metrics[index];
      const traces = metric.Sets.map((set, i) => ({
        x: set.Rounds, y: set.Values, mode: "lines+markers", name: set.Set,
        line: { color: colors[i % colors.length] } }));
      return [traces, layout(metric.Metric + " per round", "round", metric.Metric)];
    },
    importance(index) {
      const kind = report.FeatureImportance[index];
      const shown = Math.min(kind.Features.length, 15);
      return [[{ type: "bar", orientation: "h", y: kind.Features.slice(0, shown).reverse(),
                 x: kind.Importance.slice(0, shown).reverse(), marker: { color: colors[2] } }],
              layout("Feature importance: " + kind.Type, "share of the total", "",
                     { margin: { l: 140, r: 20, t: 40, b: 45 } })];
    },
    confusion() {
      const confusion = evaluation.Confusion;
      const names = confusion.Classes.map(String);
      return [[{ type: "heatmap", z: confusion.Matrix, x: names, y: names, colorscale: "Blues", reversescale: true,
                 text: confusion.Matrix, texttemplate: "%{text}", hoverongaps: false }],
              layout("Confusion matrix", "predicted class", "true class",
                     { xaxis: { type: "category", title: { text: "predicted class" } },
                       yaxis: { type: "category", autorange: "reversed",
                                title: { text: "true class" } } })];
    },
    accuracy() {
      const accuracy = evaluation.Accuracy;
      return [[{ x: accuracy.Rounds, y: accuracy.Values, mode: "lines+markers", name: "accuracy",
                 line: { color: colors[3] } }],
              layout("Accuracy on the validation set", "round", "accuracy",
                     { yaxis: { title: { text: "accuracy" }, range: [0, 1.02] } })];
    },
    roc() {
      const roc = evaluation.ROC;
      return [[{ x: roc.FalsePositiveRate, y: roc.TruePositiveRate, mode: "lines",
                 name: "ROC (AUC " + roc.AUC.toFixed(4) + ")", line: { color: colors[0] } },
               { x: [0, 1], y: [0, 1], mode: "lines", name: "chance",
                 line: { color: "#9aa5b1", dash: "dash" } }],
              layout("ROC curve", "false positive rate", "true positive rate")];
    },
    residuals() {
      return [[histogram(evaluation.Residuals.Histogram, "residuals", colors[1])],
              layout("Distribution of the residuals", "prediction − label", "samples")];
    },
  };

  drawReportPlots(plots);
})();
