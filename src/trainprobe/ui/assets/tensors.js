// trainprobe ui, the tensors page: a job's saved tensors by collection; one tensor's reductions
// and distribution over steps, its value at a step; several tensors' means on one chart.

import { chartBox, config, layout } from "/static/charts.js";
import { apiPath, el, getJson, jobFromPath, jobPath, main, markDrawn, plain } from "/static/common.js";

const name = jobFromPath();
const api = apiPath(name, "");
const chosenStep = new URLSearchParams(location.search).get("step");
const overlay = new Set();
const search = el("input", { type: "search", placeholder: "search tensors", "aria-label": "search tensors", oninput: drawList });
const list = el("div", { class: "tensor-list", id: "tensor-list" });
const title = el("h2", { id: "tensor-title" }, "Choose a tensor");
const reductions = chartBox("reductions");
const distribution = chartBox("distribution");
const stepInput = el("input", { type: "number", min: "0", id: "value-step", value: chosenStep || "", "aria-label": "step" });
const valueBox = el("div", { id: "value" });
const overlayBox = chartBox("overlay");
let index = { tensors: [], collections: {} };
let current = null;
main.append(
  el("h1", {}, el("a", { href: jobPath(name) }, name), ": tensors"),
  el("div", { class: "split" },
    el("div", {}, search, list),
    el("div", {}, title,
      el("div", { class: "charts" }, reductions, distribution),
      el("h2", {}, "Value at a step"),
      el("div", { class: "actions" }, el("label", {}, "step ", stepInput), el("button", { onclick: showValue, id: "show-value" }, "Show")),
      valueBox,
      el("h2", {}, "Several tensors (mean by step)"),
      el("p", { class: "note" }, "Tick tensors in the list to draw them here together."),
      overlayBox)));

function drawList() {
  const words = search.value.trim().toLowerCase();
  const groups = Object.entries(index.collections);
  list.replaceChildren(...groups.map(([collection, names]) => {
    const shown = names.filter((tensor) => !words || tensor.toLowerCase().includes(words));
    if (!shown.length) return null;
    return el("details", { open: "" }, el("summary", {}, `${collection} (${shown.length})`),
      shown.map((tensor) => el("div", {},
        el("input", { type: "checkbox", "aria-label": "draw " + tensor, onchange: (event) => toggle(tensor, event.target.checked), ...(overlay.has(tensor) ? { checked: "" } : {}) }),
        el("a", { "data-tensor": tensor, class: tensor === current ? "chosen" : null, onclick: () => choose(tensor) }, tensor))));
  }).filter(Boolean));
  if (!groups.length) list.append(el("p", { class: "note" }, "No tensors saved yet."));
}

async function choose(tensor) {
  current = tensor;
  drawList();
  title.textContent = tensor;
  let history;
  try {
    history = await getJson(`${api}/tensor?name=${encodeURIComponent(tensor)}`);
  } catch (error) {
    title.textContent = `${tensor}: ${error.message}`;
    return;
  }
  const traces = [];
  for (const [mode, series] of Object.entries(history.modes)) {
    traces.push({ x: series.steps, y: series.max, name: plain(mode + " max"), mode: "lines", line: { width: 0.5 }, type: "scatter" });
    traces.push({ x: series.steps, y: series.min, name: plain(mode + " min"), mode: "lines", line: { width: 0.5 }, fill: "tonexty", type: "scatter" });
    traces.push({ x: series.steps, y: series.mean, name: plain(mode + " mean"), mode: "lines+markers", type: "scatter" });
    traces.push({ x: series.steps, y: series.l2, name: plain(mode + " L2 norm"), mode: "lines", type: "scatter", yaxis: "y2", line: { dash: "dot" } });
  }
  const reductionLayout = layout(`${tensor}: reductions by step`, "step", "value");
  reductionLayout.yaxis2 = { title: { text: "L2 norm" }, overlaying: "y", side: "right" };
  await Plotly.react(reductions, traces, reductionLayout, config);
  markDrawn(reductions);
  const found = history.distribution;
  if (found) {
    const centres = found.edges.slice(0, -1).map((edge, i) => (edge + found.edges[i + 1]) / 2);
    const z = centres.map((_, bin) => found.counts.map((counts) => counts[bin]));
    await Plotly.react(distribution, [{ type: "heatmap", x: found.steps, y: centres, z, colorscale: "Blues", name: "count" }],
      layout(`${tensor}: distribution by step`, "step", "value"), config);
    markDrawn(distribution);
  } else {
    Plotly.purge(distribution);
    distribution.replaceChildren(el("p", { class: "note" }, "No distribution: only reductions were saved, or no saved value was finite."));
  }
  if (stepInput.value === "") {
    const last = Object.values(history.modes).flatMap((series) => series.steps);
    if (last.length) stepInput.value = String(Math.max(...last));
  }
  await showValue();
}

async function showValue() {
  if (current === null || stepInput.value === "") return;
  let found;
  try {
    found = await getJson(`${api}/tensor-value?name=${encodeURIComponent(current)}&step=${Number(stepInput.value)}`);
  } catch (error) {
    valueBox.replaceChildren(el("p", { class: "error" }, error.message));
    return;
  }
  const head = el("p", {}, `${found.tensor} at step ${found.step}: shape ${found.shape === null ? "unknown" : "[" + found.shape.join(", ") + "]"}`);
  if (found.rows) {
    valueBox.replaceChildren(head, el("table", { class: "matrix" }, found.rows.map((row) => el("tr", {}, row.map((value) => el("td", {}, value === null ? "NaN" : value))))));
  } else if (found.histogram) {
    const box = chartBox("value-histogram");
    valueBox.replaceChildren(head, box);
    const edges = found.histogram.edges;
    await Plotly.react(box, [{ type: "bar", x: edges.slice(0, -1), y: found.histogram.counts, name: "count" }], layout(`histogram (${found.nonFinite} not finite)`, "value", "count"), config);
  } else {
    valueBox.replaceChildren(head, el("p", { class: "note" }, "Only its reductions were saved at this step."));
  }
}

let overlayDrawn = Promise.resolve();

function toggle(tensor, on) {
  if (on) overlay.add(tensor); else overlay.delete(tensor);
  // One drawing at a time, the latest last; a failed one leaves the chart as it was.
  overlayDrawn = overlayDrawn.then(drawOverlay).catch((error) => { console.warn("trainprobe ui: " + error.message); });
}

async function drawOverlay() {
  const traces = [];
  for (const each of overlay) {
    const history = await getJson(`${api}/tensor?name=${encodeURIComponent(each)}`);
    for (const [mode, series] of Object.entries(history.modes)) {
      traces.push({ x: series.steps, y: series.mean, name: plain(`${each} ${mode}`), mode: "lines", type: "scatter" });
    }
  }
  await Plotly.react(overlayBox, traces, layout("mean by step", "step", "value"), config);
  markDrawn(overlayBox);
}

getJson(`${api}/tensors`).then((found) => {
  index = found;
  drawList();
  document.body.dataset.tensors = String(found.tensors.length);
}, (error) => list.replaceChildren(el("p", { class: "error" }, error.message)));
