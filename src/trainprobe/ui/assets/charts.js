// trainprobe ui: the charts every page draws with plotly. A chart box is drawn when it scrolls
// into view (drawWhenSeen); a series bucketed by the server (a mean, and the minimum and maximum
// of each bucket) is drawn as a band and a line (envelopeTraces); red dotted lines mark steps.

import { el, plain } from "/static/common.js";

export const config = { responsive: true, displaylogo: false };

// Charts are drawn when they scroll into view: a job with fifty scalars draws the few on screen
// first, and a chart out of view is redrawn with its latest data once it comes into view.
const onScreen = new Set();
const pendingDraws = new Map();
const watcher = new IntersectionObserver((entries) => {
  for (const entry of entries) {
    if (entry.isIntersecting) {
      onScreen.add(entry.target);
      const draw = pendingDraws.get(entry.target);
      if (draw) { pendingDraws.delete(entry.target); draw(); }
    } else {
      onScreen.delete(entry.target);
    }
  }
}, { rootMargin: "200px" });

export function watch(box) {
  watcher.observe(box);
}

export function drawWhenSeen(box, draw) {
  if (onScreen.has(box)) { pendingDraws.delete(box); return draw(); }
  pendingDraws.set(box, draw);
  return Promise.resolve();
}

// An enveloped series: a band from each bucket's minimum to its maximum, and the mean line.
export function envelopeTraces(series, label, x) {
  const xs = x || series.x;
  const whole = series.min.every((value, index) => value === series.max[index]);
  const line = { x: xs, y: series.mean, name: plain(label), mode: "lines", type: "scatter" };
  if (whole) return [line];
  return [
    { x: xs, y: series.max, name: plain(label + " max"), mode: "lines", line: { width: 0.5 }, type: "scatter", showlegend: false },
    { x: xs, y: series.min, name: plain(label + " min"), mode: "lines", line: { width: 0.5 }, fill: "tonexty", type: "scatter", showlegend: false },
    line,
  ];
}

export function markers(steps) {
  return steps.map((step) => ({
    type: "line", xref: "x", yref: "paper", x0: step, x1: step, y0: 0, y1: 1,
    line: { color: "#d92d20", width: 1, dash: "dot" },
  }));
}

// On a chart over time: when about ten steps began (grey, labelled) and when each rule's issue
// step began (red), from the steps' start times the server sends.
export function stepMarkers(stepTimes, issues) {
  const { steps, seconds } = stepTimes;
  const shapes = [];
  const annotations = [];
  if (!steps.length) return { shapes, annotations };
  // Evenly spread in time, so that the labels never crowd where the steps ran fast.
  const first = seconds[0];
  const span = seconds[seconds.length - 1] - first;
  const picked = new Set();
  for (let mark = 0; mark < 8; mark += 1) {
    const at = seconds.findIndex((time) => time >= first + (span * mark) / 8);
    if (at >= 0) picked.add(at);
  }
  for (const index of picked) {
    shapes.push({ type: "line", xref: "x", yref: "paper", x0: seconds[index], x1: seconds[index], y0: 0, y1: 1, line: { color: "#98a2b3", width: 1, dash: "dot" } });
    annotations.push({ x: seconds[index], y: 1, xref: "x", yref: "paper", yanchor: "bottom", showarrow: false, text: "step " + steps[index], font: { size: 10, color: "#667085" } });
  }
  for (const step of issues) {
    const at = steps.findIndex((found) => found >= step);
    if (at < 0) continue;
    shapes.push({ type: "line", xref: "x", yref: "paper", x0: seconds[at], x1: seconds[at], y0: 0, y1: 1, line: { color: "#d92d20", width: 1, dash: "dot" } });
  }
  return { shapes, annotations };
}

export function layout(title, xTitle, yTitle, shapes) {
  return {
    title: { text: plain(title), font: { size: 14 } },
    margin: { l: 60, r: 20, t: 40, b: 45 },
    xaxis: { title: { text: xTitle } },
    yaxis: { title: { text: plain(yTitle || "") } },
    shapes: shapes || [],
    legend: { orientation: "h" },
    uirevision: "kept", // a redraw with new data keeps the user's zoom
  };
}

export function chartBox(id) {
  return el("div", { class: "chart", id, "data-chart": "" });
}

// Keeps one chart box per plot in ``holder`` (boxes already drawn are redrawn in place), each
// watched so that it is drawn when seen; ``empty`` is said when there is none.
export function boxes(holder, prefix, count, empty) {
  const found = [];
  for (let index = 0; index < count; index += 1) {
    let box = document.getElementById(prefix + index);
    if (!box) { box = chartBox(prefix + index); holder.append(box); watch(box); }
    found.push(box);
  }
  holder.querySelectorAll(".chart").forEach((box) => { if (!found.includes(box)) box.remove(); });
  holder.querySelector("p.note")?.remove();
  if (!count) holder.append(el("p", { class: "note" }, empty));
  return found;
}
