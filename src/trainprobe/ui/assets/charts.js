// trainprobe ui: the charts every page draws with plotly. A chart box is drawn when it scrolls
// into view (drawWhenSeen); a series bucketed by the server (a mean, and the minimum and maximum
// of each bucket) is drawn as a band and a line (envelopeTraces). Marks are marks.js's.

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
