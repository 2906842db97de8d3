// Draws a report page's plots: each element with data-plot="kind:index..." gets the traces and
// layout that plots[kind](index...) returns. When all are done, <body> says how many were drawn
// (data-plots-drawn) of how many asked for (data-plots), so that a reader can tell a whole page.
// Both report pages inline this before their own script (report.js, xgboost_report.js).
"use strict";
function drawReportPlots(plots) {
  const config = { responsive: true, displaylogo: false };
  let drawn = 0;
  const elements = document.querySelectorAll("[data-plot]");
  const pending = [];
  elements.forEach((element) => {
    const [kind, ...indices] = element.dataset.plot.split(":");
    try {
      const [traces, plotLayout] = plots[kind](...indices.map(Number));
      pending.push(Plotly.newPlot(element, traces, plotLayout, config).then(() => { drawn += 1; }));
    } catch (error) {
      console.error("trainprobe report: could not draw " + element.dataset.plot + ": " + error);
    }
  });
  Promise.all(pending).then(() => {
    document.body.dataset.plotsDrawn = String(drawn);
    document.body.dataset.plots = String(elements.length);
  }, (error) => console.error("trainprobe report: " + error));
}
