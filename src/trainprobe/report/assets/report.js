// Draws the report's plots from its embedded data (see trainprobe/report/page.py).
"use strict";
(function () {
  const report = JSON.parse(document.getElementById("report-data").textContent);
  const unit = report.TimeAxis.Unit;
  const colors = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
                  "#7f7f7f", "#bcbd22", "#17becf"];

  function layout(title, xTitle, yTitle, extra) {
    return Object.assign({
      title: { text: title, font: { size: 14 } },
      margin: { l: 60, r: 20, t: 40, b: 45 },
      xaxis: { title: { text: xTitle } },
      yaxis: { title: { text: yTitle }, rangemode: "tozero" },
      legend: { orientation: "h", y: -0.25 },
      hovermode: "x",
    }, extra || {});
  }

  // The training (first step to last) shaded on a time axis.
  function trainingShade() {
    const job = report.Job;
    if (job.FirstStepStart === null) return [];
    const scale = report.TimeAxis.SecondsPerUnit;
    const start = report.TimeAxis.Start;
    return [{ type: "rect", xref: "x", yref: "paper", y0: 0, y1: 1, layer: "below",
              x0: (job.FirstStepStart - start) / scale, x1: (job.LastStepEnd - start) / scale,
              fillcolor: "#1f77b4", opacity: 0.06, line: { width: 0 } }];
  }

  // A series as its mean line, with a band from its minimum to its maximum where they differ.
  function banded(series, color, name) {
    const traces = [];
    const hasBand = series.min.some((value, i) => value !== series.max[i]);
    if (hasBand) {
      traces.push({ x: series.x, y: series.max, mode: "lines", line: { width: 0 },
                    hoverinfo: "skip", showlegend: false, legendgroup: name });
      traces.push({ x: series.x, y: series.min, mode: "lines", line: { width: 0 },
                    fill: "tonexty", fillcolor: color + "33", hoverinfo: "skip",
                    showlegend: false, legendgroup: name });
    }
    traces.push({ x: series.x, y: series.mean, mode: "lines", name: name, legendgroup: name,
                  line: { color: color, width: 1.5 } });
    return traces;
  }

  const plots = {
    job() {
      const job = report.Job;
      const phases = [["Initialization", job.InitializationSeconds, "#9aa5b1"],
                      ["Training", job.TrainingSeconds, "#1f77b4"],
                      ["Finalization", job.FinalizationSeconds, "#c3cfd9"]];
      const traces = phases.filter((p) => p[1] !== null).map((p) => ({
        type: "bar", orientation: "h", y: ["job"], x: [p[1]], name: p[0],
        marker: { color: p[2] }, hovertemplate: p[0] + ": %{x:.3s} s<extra></extra>" }));
      return [traces, layout("Where the job's time went", "seconds", "",
                             { barmode: "stack", yaxis: { visible: false },
                               legend: { orientation: "h", y: -0.5, traceorder: "normal" } })];
    },
    system(h, p) {
      const plot = report.SystemUsage.Hosts[h].Plots[p];
      const traces = plot.Series.flatMap((s, i) => banded(s, colors[i % colors.length], s.Label));
      return [traces, layout(report.SystemUsage.Hosts[h].Node + ": " + plot.Title,
                             unit + " since the start (training shaded)", plot.Unit,
                             { shapes: trainingShade() })];
    },
    gpus(h) {
      const host = report.SystemUsage.Hosts[h];
      const rows = host.Statistics.filter((r) => r.Type === "gpu" && r.count > 0);
      const traces = ["GPUUtilization", "GPUMemoryUtilization"].map((dimension, i) => {
        const picked = rows.filter((r) => r.Dimension === dimension);
        return { type: "box", name: dimension, x: picked.map((r) => r.Name),
                 q1: picked.map((r) => r.p25), median: picked.map((r) => r.p50),
                 q3: picked.map((r) => r.p75), lowerfence: picked.map((r) => r.min),
                 upperfence: picked.map((r) => r.max), mean: picked.map((r) => r.mean),
                 marker: { color: colors[i] } };
      });
      return [traces, layout(host.Node + ": GPU utilization and memory per GPU (box: p25-p75)",
                             "GPU", "%", { boxmode: "group", hovermode: "closest" })];
    },
    cores(h) {
      const host = report.SystemUsage.Hosts[h];
      const heat = host.CoreHeatmap;
      return [[{ type: "heatmap", x: heat.x, y: heat.Cores, z: heat.z, zmin: 0, zmax: 100,
                 colorscale: "Viridis", colorbar: { title: { text: "%" } } }],
              layout(host.Node + ": CPU busy per core", unit + " since the start", "",
                     { hovermode: "closest", yaxis: { autorange: "reversed" } })];
    },
    steps(i) {
      const process = report.StepDurations.Processes[i];
      const traces = banded(process.Plot, colors[0], "step duration");
      traces.push({ x: process.OutlierSteps, y: process.OutlierDurationsMs, mode: "markers",
                    name: "outliers", marker: { color: "#d62728", size: 7, symbol: "x" } });
      if (process.OutlierThresholdMs !== null) {
        const x = process.Plot.x;
        traces.push({ x: [x[0], x[x.length - 1]],
                      y: [process.OutlierThresholdMs, process.OutlierThresholdMs],
                      mode: "lines", name: "outlier threshold",
                      line: { color: "#d62728", dash: "dash", width: 1 } });
      }
      return [traces, layout("Step durations: " + process.Node + " " + process.Mode,
                             "step", "ms")];
    },
    histogram(i) {
      const process = report.StepDurations.Processes[i];
      const edges = process.Histogram.Edges;
      const centers = process.Histogram.Counts.map((_, k) => (edges[k] + edges[k + 1]) / 2);
      const widths = process.Histogram.Counts.map((_, k) => edges[k + 1] - edges[k]);
      const traces = [{ type: "bar", x: centers, y: process.Histogram.Counts, width: widths,
                        name: "steps", marker: { color: colors[0] } }];
      const extra = { hovermode: "closest", yaxis: { type: "log", title: { text: "steps" } } };
      if (process.OutlierThresholdMs !== null) {
        extra.shapes = [{ type: "line", xref: "x", yref: "paper", x0: process.OutlierThresholdMs,
                          x1: process.OutlierThresholdMs, y0: 0, y1: 1,
                          line: { color: "#d62728", dash: "dash" } }];
      }
      return [traces, layout("Histogram of step durations (log scale)", "ms", "steps", extra)];
    },
    phases() {
      const split = report.Framework.PhaseSplit;
      return [[{ type: "bar", x: split.map((s) => s.Phase), y: split.map((s) => s.PercentOfStepTime),
                 marker: { color: colors[0] },
                 hovertemplate: "%{x}: %{y:.1f} % of step time<extra></extra>" }],
              layout("Share of step time per phase", "", "% of step time",
                     { hovermode: "closest" })];
    },
    rule(i) {
      const row = report.Rules.Rules[i];
      const details = row.Details;
      if (row.Rule === "LoadBalancing") {
        const [node, distances] = Object.entries(details.distances).find((e) => Object.keys(e[1]).length);
        const pairs = Object.keys(distances).map((pair) => pair.split("-"));
        const gpus = [...new Set(pairs.flat())].sort((a, b) => a.localeCompare(b, "en", { numeric: true }));
        const z = gpus.map((a) => gpus.map((b) => (a === b ? 0 : distances[a + "-" + b] ?? distances[b + "-" + a] ?? null)));
        return [[{ type: "heatmap", x: gpus, y: gpus, z: z, colorscale: "Reds", zmin: 0,
                   colorbar: { title: { text: "distance" } } }],
                layout(node + ": Jensen-Shannon distance between GPUs' utilization histograms", "", "",
                       { hovermode: "closest", yaxis: { autorange: "reversed" } })];
      }
      if (row.Rule === "Dataloader") {
        const histogram = details.batch_wait_histogram_s;
        const edges = histogram.bin_edges;
        const centers = histogram.counts.map((_, k) => (edges[k] + edges[k + 1]) / 2 * 1000);
        return [[{ type: "bar", x: centers, y: histogram.counts, marker: { color: colors[0] } }],
                layout("Time waiting for a batch", "ms", "batches", { hovermode: "closest" })];
      }
      // LowGPUUtilization and GPUMemoryIncrease: each GPU's statistics, as box plots.
      const names = [], q1 = [], median = [], q3 = [], low = [], high = [];
      for (const [node, gpus] of Object.entries(details.gpus)) {
        for (const [gpu, stats] of Object.entries(gpus)) {
          names.push(node + " " + gpu);
          q1.push(stats.p25); median.push(stats.p50); q3.push(stats.p75);
          low.push(stats.lower_whisker ?? stats.min); high.push(stats.upper_whisker ?? stats.max);
        }
      }
      const what = row.Rule === "GPUMemoryIncrease" ? "memory" : "utilization";
      return [[{ type: "box", x: names, q1: q1, median: median, q3: q3, lowerfence: low,
                 upperfence: high, name: what, marker: { color: colors[0] } }],
              layout(row.Rule + ": GPU " + what + " as the rule saw it", "GPU", "%",
                     { hovermode: "closest" })];
    },
    record(i) {
      const record = report.TrainingRecord;
      const series = record.Series[i];
      const traces = banded(series.Plot, colors[i % colors.length], series.Label);
      return [traces, layout(series.Label + " at every " + record.Mode + " step",
                             record.Mode + " step", series.Label,
                             { yaxis: { title: { text: series.Label } } })];
    },
    overhead(i) {
      const worker = report.DebuggerOverhead.Workers[i];
      const traces = banded(worker.Plot, colors[1], "hook time");
      if (worker.DeviceWaitPlot) {
        traces.push(...banded(worker.DeviceWaitPlot, colors[2], "waiting for the GPU"));
      }
      return [traces, layout("Hook time per step: " + worker.Worker, "step", "ms")];
    },
  };

  drawReportPlots(plots);
})();
