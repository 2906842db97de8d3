// trainprobe ui, a job's page: its status and actions, its rules' cards, its scalars by step,
// its step durations and system metrics, and its reports, kept live by the server's events.
// Every chart marks the job's captures, spikes and rule findings (marks.js); the step-duration
// chart counts the slow steps the flight recorder captured, as the recorder judged them.

import { boxes, chartBox, config, drawWhenSeen, envelopeTraces, layout, watch } from "/static/charts.js";
import { apiPath, el, elapsed, getJson, jobFromPath, jobPath, listen, main, markDrawn, postJson, rate, status } from "/static/common.js";
import { byStep, byTime, extent, markLayout, plotWidth } from "/static/marks.js";

const REPORTS = { profiler: "Profiler report", xgboost: "XGBoost report" };

const name = jobFromPath();
let job = null;
let marks = [];
let fetching = false;
let lastFetched = "";
let lastProfile = 0;
const facts = el("div", { class: "facts" });
const message = el("span", { class: "note", id: "action-message" });
const count = el("input", { type: "number", min: "1", max: "20", value: "2", id: "profile-steps", "aria-label": "steps to profile" });
const stopButton = el("button", { class: "danger", id: "stop", onclick: stop }, "Stop job");
const profileButton = el("button", { id: "profile", onclick: profile }, "Profile next N steps");
const links = el("span");
const banner = el("div");
const cards = el("div", { class: "cards", id: "rules" });
const scalars = el("div", { class: "charts", id: "scalars" });
const steps = el("div", { class: "charts", id: "step-durations" });
const system = el("div", { class: "charts", id: "system" });
const report = el("div", { id: "report" });
main.append(
  el("h1", {}, name),
  facts,
  el("div", { class: "actions" }, stopButton, el("label", {}, "N = ", count), profileButton, links, message),
  banner,
  el("h2", {}, "Rules"), cards,
  el("h2", {}, "Losses and scalars by step"), scalars,
  el("h2", {}, "Step durations"), steps,
  el("h2", {}, "System metrics"), system,
  report,
);

function fact(label, content, id) {
  return el("div", {}, el("span", {}, label), el("strong", { id }, content));
}

function drawHeader() {
  facts.replaceChildren(
    fact("Status", status(job.status), "status"),
    fact("Secondary status", job.secondaryStatus, "secondary-status"),
    fact("Step", job.step === null ? "–" : String(job.step), "step"),
    fact(job.ended ? "Mean steps/s" : "Steps/s", rate(job.stepsPerSecond) || "–", "rate"),
    fact("Elapsed", elapsed(job), "elapsed"),
    fact("Framework", job.framework),
  );
  document.body.dataset.status = job.status;
  document.body.dataset.step = job.step === null ? "" : String(job.step);
  const running = job.status === "InProgress";
  stopButton.disabled = !running;
  profileButton.disabled = !running;
  links.replaceChildren(
    el("a", { href: jobPath(name, "/tensors") }, "Tensors"), " · ",
    el("a", { href: "/compare?job=" + encodeURIComponent(name) }, "Compare"),
    ...job.reports.map((kind) => el("span", {}, " · ", el("a", { href: jobPath(name, "/report/" + kind), target: "_blank", rel: "noopener" }, REPORTS[kind]))),
  );
  for (const kind of job.reports) {
    if (report.querySelector(`[data-report="${kind}"]`)) continue;
    // A report runs its own scripts in a sandbox (its own origin): it cannot reach the UI.
    report.append(el("h2", {}, REPORTS[kind]), el("iframe", {
      src: jobPath(name, "/report/" + kind), sandbox: "allow-scripts", loading: "lazy",
      title: REPORTS[kind], class: "report", "data-report": kind,
    }));
  }
  const notes = [];
  if (job.nonFinite) notes.push(el("div", { class: "banner" }, "First non-finite value: ", job.nonFinite.text, " ", el("a", { href: jobPath(name, "/tensors?step=" + job.nonFinite.step) }, "tensors at that step")));
  if (job.failureReason) notes.push(el("div", { class: "banner" }, "Failure: ", job.failureReason));
  if (job.stopReason) notes.push(el("div", { class: "banner" }, "Stop: ", job.stopReason));
  banner.replaceChildren(...notes);
}

function drawCards() {
  cards.replaceChildren(...job.rules.map((rule) => {
    const counts = rule.kind !== "debugging" || rule.stepsEvaluated === null ? null : el("div", { class: "note" },
      `${plural(rule.stepsEvaluated, "step")} evaluated, ${rule.stepsSkipped} skipped, ${plural(rule.tensorsChecked, "tensor")} checked`);
    return el("div", { class: "card", "data-rule": rule.name },
      el("h3", {}, rule.name),
      el("div", { class: "kind" }, rule.kind + " rule"),
      el("div", {}, status(rule.status)),
      rule.details ? el("div", {}, rule.details) : null,
      counts,
      rule.issueStep === null ? null : el("div", {}, "Issue at ",
        el("a", { href: jobPath(name, "/tensors?step=" + rule.issueStep) }, rule.issueWhere || "step " + rule.issueStep)),
      rule.evidence.length ? el("details", {}, el("summary", {}, `Evidence (${rule.evidence.length})`),
        el("ul", {}, rule.evidence.map((item) => el("li", {}, item)))) : null,
    );
  }));
  marks = job.marks;
}

async function stop() {
  if (!confirm(`Stop job ${name}? Its training is stopped and the job ends Stopped.`)) return;
  try {
    await postJson(apiPath(name, "/stop"), {});
    message.textContent = "Stopping…";
  } catch (error) { message.textContent = String(error.message); }
}

async function profile() {
  const steps = Number(count.value);
  if (!confirm(`Profile the next ${steps} steps of ${name} in detail?`)) return;
  try {
    const answer = await postJson(apiPath(name, "/profile-steps"), { steps });
    message.textContent = `The flight recorder profiles the next ${answer.steps} steps`;
  } catch (error) { message.textContent = String(error.message); }
}

// A chart by step, with the job's marks; ``range`` is the steps shown (all when null).
function stepLayout(box, traces, title, yTitle, range) {
  const plotted = layout(title, "step", yTitle);
  const shown = byStep(marks);
  const { shapes, annotations } = markLayout(shown, range || extent(traces, shown), plotWidth(box, plotted));
  Object.assign(plotted, { shapes, annotations });
  plotted.margin.t = 56;
  if (range) plotted.xaxis = { ...plotted.xaxis, range, autorange: false };
  return plotted;
}

function scalarChart(chart, box) {
  const traces = chart.series.flatMap((series) => envelopeTraces(series, series.mode));
  const points = chart.series.reduce((sum, series) => sum + series.points, 0);
  const plotted = stepLayout(box, traces, `${chart.tensor} (${points} steps)`, chart.tensor, null);
  return Plotly.react(box, traces, plotted, config).then(() => markDrawn(box));
}

async function rebucket(tensor, box, range) {
  const query = "?tensor=" + encodeURIComponent(tensor) + (range ? `&from=${range[0]}&to=${range[1]}` : "");
  const [chart] = await getJson(apiPath(name, "/scalars") + query);
  const traces = chart.series.flatMap((series) => envelopeTraces(series, series.mode));
  const plotted = stepLayout(box, traces, box.layout.title.text, chart.tensor, range);
  plotted.title = box.layout.title; // already made plain
  await Plotly.react(box, traces, plotted, config);
}

async function drawScalars() {
  const charts = await getJson(apiPath(name, "/scalars"));
  if (!charts.length) { scalars.replaceChildren(el("p", { class: "note" }, "No losses or scalars saved yet.")); return; }
  scalars.querySelector("p")?.remove();
  const drawing = [];
  for (const [index, chart] of charts.entries()) {
    const id = "scalar-" + index;
    let box = document.getElementById(id);
    if (box && box.dataset.zoomed) continue; // a zoomed chart keeps the user's range
    if (!box) {
      box = chartBox(id);
      box.dataset.tensor = chart.tensor;
      scalars.append(box);
      watch(box);
    }
    drawing.push(drawWhenSeen(box, () => scalarChart(chart, box).then(() => follow(box, chart.tensor))));
  }
  await Promise.all(drawing);
}

function follow(box, tensor) {
  if (box.dataset.following) return;
  box.dataset.following = "1";
  box.on("plotly_relayout", (event) => {
    if (event["xaxis.range[0]"] !== undefined) {
      box.dataset.zoomed = "1";
      rebucket(tensor, box, [event["xaxis.range[0]"], event["xaxis.range[1]"]]);
    } else if (event["xaxis.autorange"]) {
      delete box.dataset.zoomed;
      rebucket(tensor, box, null);
    }
  });
}

function plural(count, word) {
  return `${count} ${word}${count === 1 ? "" : "s"}`;
}

// A process's step durations, with the slow steps the flight recorder captured (its own count).
function stepsChart(process, slowSteps, box) {
  const traces = envelopeTraces(process.Plot, "duration (ms)");
  const slow = slowSteps.filter((found) => found.node === process.Node && found.mode === process.Mode);
  traces.push({
    x: slow.map((found) => found.step), y: slow.map((found) => found.durationMs),
    text: slow.map((found) => found.medianMs ? `${(found.durationMs / found.medianMs).toFixed(1)} × the median of its mode's recent steps` : ""),
    mode: "markers", type: "scatter", name: "slow steps (flight recorder)", marker: { color: "#d92d20", size: 8 },
  });
  const title = `${process.Node} ${process.Mode}: ${plural(process.Steps, "step")}, ${plural(slow.length, "slow step")} captured`;
  box.dataset.slowSteps = String(slow.length);
  return Plotly.react(box, traces, stepLayout(box, traces, title, "ms", null), config).then(() => markDrawn(box));
}

function systemChart(node, plot, stepTimes, box) {
  const traces = plot.Series.flatMap((series) => envelopeTraces(series, series.Label));
  const plotted = layout(`${node}: ${plot.Title}`, "seconds since the job was created", plot.Unit);
  const range = extent(traces, []);
  const width = plotWidth(box, plotted);
  Object.assign(plotted, markLayout(byTime(marks, stepTimes, range, width), range, width));
  plotted.margin.t = 56;
  return Plotly.react(box, traces, plotted, config).then(() => markDrawn(box));
}

async function drawProfile() {
  const found = await getJson(apiPath(name, "/profile"));
  const processes = found.stepDurations.Processes;
  const stepBoxes = boxes(steps, "steps-", processes.length, "No step timeline yet.");
  await Promise.all(processes.map((process, index) => {
    const box = stepBoxes[index];
    return drawWhenSeen(box, () => stepsChart(process, found.slowSteps, box));
  }));
  const plots = found.systemUsage.Hosts.flatMap((host) => host.Plots.map((plot) => [host.Node, plot]));
  const systemBoxes = boxes(system, "system-", plots.length, "No system metrics yet.");
  await Promise.all(plots.map(([node, plot], index) => {
    const box = systemBoxes[index];
    return drawWhenSeen(box, () => systemChart(node, plot, found.stepTimes, box));
  }));
}

async function refresh() {
  const key = `${job.step}|${job.status}|${marks.map((mark) => mark.kind + mark.step).join(",")}`;
  if (fetching || key === lastFetched) return;
  fetching = true;
  lastFetched = key;
  try {
    await drawScalars();
    const now = Date.now();
    if (now - lastProfile > 3000 || job.ended) {
      lastProfile = now;
      await drawProfile();
    }
    document.body.dataset.chartsFor = key;
  } catch (error) {
    console.warn("trainprobe ui: " + error.message);
  } finally {
    fetching = false;
  }
}

listen("/api/events/jobs/" + encodeURIComponent(name), "job", (found) => {
  job = found;
  drawHeader();
  drawCards();
  refresh();
});
setInterval(() => {
  if (!job) return;
  if (!job.ended) document.getElementById("elapsed").textContent = elapsed(job);
  refresh(); // a fetch skipped while another ran catches up
}, 1000);
