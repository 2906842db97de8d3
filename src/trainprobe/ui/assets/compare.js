// trainprobe ui, the compare page: one scalar of the jobs ticked, on one chart.

import { chartBox, config, envelopeTraces, layout } from "/static/charts.js";
import { el, getJson, main, markDrawn } from "/static/common.js";

const wanted = new Set(new URLSearchParams(location.search).getAll("job"));
const choices = el("div", { class: "actions", id: "compare-jobs" });
const tensorChoice = el("select", { id: "compare-tensor", "aria-label": "tensor", onchange: draw });
const box = chartBox("compare-chart");
main.append(el("h1", {}, "Compare jobs"), choices, el("label", {}, "tensor ", tensorChoice), box);

async function draw() {
  const query = [...wanted].map((job) => "job=" + encodeURIComponent(job)).join("&");
  if (!query) { Plotly.purge(box); return; }
  const tensor = tensorChoice.value ? "&tensor=" + encodeURIComponent(tensorChoice.value) : "";
  const charts = await getJson("/api/compare?" + query + tensor);
  const names = new Set(charts.flatMap((chart) => chart.tensors || []));
  const chosen = tensorChoice.value || (charts.find((chart) => chart.tensor) || {}).tensor || "";
  tensorChoice.replaceChildren(...[...names].map((each) => el("option", { value: each, ...(each === chosen ? { selected: "" } : {}) }, each)));
  const traces = charts.flatMap((chart) => chart.series.flatMap((series) => envelopeTraces(series, `${chart.job} ${series.mode}`)));
  await Plotly.react(box, traces, layout(`${chosen} by step`, "step", chosen), config);
  markDrawn(box);
}

getJson("/api/jobs").then((jobs) => {
  choices.replaceChildren(...jobs.map((job) => el("label", {},
    el("input", { type: "checkbox", value: job.name, ...(wanted.has(job.name) ? { checked: "" } : {}),
      onchange: (event) => { if (event.target.checked) wanted.add(job.name); else wanted.delete(job.name); draw(); } }),
    " ", job.name)));
  draw();
});
