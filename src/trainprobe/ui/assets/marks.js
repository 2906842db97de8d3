// trainprobe ui: marks on a chart, at steps or at times: the flight recorder's captures, the
// in-training rules' spikes, the rules' findings (the job's marks, from the server), and on a
// chart over time a few steps to read the axis by. Each mark is a dotted line; marks close
// together share one label listing them, so that no two labels ever overlap (markLayout).

import { plain } from "/static/common.js";

const COLORS = { capture: "#dc6803", spike: "#7a5af8", finding: "#d92d20", step: "#98a2b3" };
const CHAR_PX = 6.5; // a label's width per character, generously (10 px system-ui)
const GAP_PX = 12; // between two labels, at least
const TICK_PX = 110; // between two reference steps on a chart over time, at least
const LISTED = 3; // steps listed per label in a group; more are counted

// "capture 49, 73, 78 +2 · LossSpike spike 80": each label's steps, in the order they come.
function groupText(members) {
  const steps = new Map();
  for (const mark of members) {
    if (!steps.has(mark.label)) steps.set(mark.label, []);
    const found = steps.get(mark.label);
    if (!found.includes(mark.step)) found.push(mark.step);
  }
  return [...steps].map(([label, found]) => {
    const more = found.length > LISTED ? ` +${found.length - LISTED}` : "";
    return `${label} ${found.slice(0, LISTED).join(", ")}${more}`;
  }).join(" · ");
}

// The marks (each {x, step, kind, label, text}) in groups whose labels, laid left to right on
// a plot ``width`` pixels wide showing ``range``, keep GAP_PX apart and inside the plot: a mark
// whose label would reach the one before joins that label instead.
export function groupMarks(marks, range, width) {
  const [lo, hi] = range;
  const scale = hi > lo ? width / (hi - lo) : 0;
  const groups = [];
  const place = (group) => {
    group.text = groupText(group.members);
    const wide = group.text.length * CHAR_PX;
    group.start = Math.max(0, Math.min(group.px, width - wide));
    group.end = group.start + wide;
  };
  for (const mark of [...marks].sort((a, b) => a.x - b.x)) {
    const px = (mark.x - lo) * scale;
    const last = groups[groups.length - 1];
    if (last && px < last.end + GAP_PX) {
      last.members.push(mark);
      place(last);
    } else {
      const group = { members: [mark], px };
      place(group);
      groups.push(group);
    }
    while (groups.length > 1 && groups[groups.length - 1].start < groups[groups.length - 2].end + GAP_PX) {
      const joining = groups.pop();
      const before = groups[groups.length - 1];
      before.members.push(...joining.members);
      place(before);
    }
  }
  return groups.map((group) => ({ ...group, x: scale ? lo + group.start / scale : lo }));
}

// Plotly shapes (a dotted line per mark) and annotations (a label per group) for ``marks`` on a
// plot ``width`` pixels wide showing ``range``; each label's hover text lists its marks whole.
export function markLayout(marks, range, width) {
  const shapes = marks.map((mark) => ({
    type: "line", xref: "x", yref: "paper", x0: mark.x, x1: mark.x, y0: 0, y1: 1,
    line: { color: COLORS[mark.kind] || COLORS.finding, width: 1, dash: "dot" },
  }));
  const annotations = groupMarks(marks, range, width).map((group) => ({
    x: group.x, y: 1, xref: "x", yref: "paper", xanchor: "left", yanchor: "bottom",
    showarrow: false, text: plain(group.text),
    hovertext: group.members.map((mark) => plain(mark.text)).join("<br>"),
    font: { size: 10, color: group.members.every((mark) => mark.kind === "step") ? "#667085" : "#b42318" },
  }));
  return { shapes, annotations };
}

// The job's marks on a chart by step.
export function byStep(marks) {
  return marks.map((mark) => ({ ...mark, x: mark.step }));
}

// The job's marks on a chart over time (when each marked step began), and reference steps
// spread evenly in time, as many as fit ``width`` pixels showing ``range`` (seconds).
export function byTime(marks, stepTimes, range, width) {
  const { steps, seconds } = stepTimes;
  if (!steps.length) return [];
  const found = [];
  for (const mark of marks) {
    const at = steps.findIndex((step) => step >= mark.step);
    if (at >= 0) found.push({ ...mark, x: seconds[at] });
  }
  const first = seconds[0];
  const span = seconds[seconds.length - 1] - first;
  const spanPx = range[1] > range[0] ? (span / (range[1] - range[0])) * width : 0;
  const ticks = Math.max(1, Math.min(8, Math.floor(spanPx / TICK_PX)));
  const picked = new Set();
  for (let tick = 0; tick < ticks; tick += 1) {
    const at = seconds.findIndex((time) => time >= first + (span * tick) / ticks);
    if (at >= 0) picked.add(at);
  }
  for (const at of picked) {
    found.push({ x: seconds[at], step: steps[at], kind: "step", label: "step", text: `step ${steps[at]} began` });
  }
  return found;
}

// The x range a chart shows: its traces' and its marks' extent.
export function extent(traces, marks) {
  let lo = Infinity;
  let hi = -Infinity;
  const see = (x) => { if (typeof x === "number" && Number.isFinite(x)) { lo = Math.min(lo, x); hi = Math.max(hi, x); } };
  for (const trace of traces) for (const x of trace.x || []) see(x);
  for (const mark of marks) see(mark.x);
  return lo <= hi ? [lo, hi] : [0, 1];
}

// The pixels a chart box's plot spans, within the layout's margins.
export function plotWidth(box, plotLayout) {
  return Math.max(50, box.clientWidth - plotLayout.margin.l - plotLayout.margin.r);
}
