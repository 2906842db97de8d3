// trainprobe ui: draws each page from the server's JSON routes and keeps it live through
// server-sent events. Every name and message from a job is inserted as text (text nodes, or
// plotly labels with <, > and & as entities), never as HTML.
"use strict";

const main = document.getElementById("main");
const config = { responsive: true, displaylogo: false };
let csrf = null;

// ----- small pieces ---------------------------------------------------------------------

function el(tag, attributes, ...children) {
  const element = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes || {})) {
    if (value === null || value === undefined) continue;
    if (key.startsWith("on")) element.addEventListener(key.slice(2), value);
    else element.setAttribute(key, value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return element;
}

function plain(text) {
  // plotly reads a few HTML tags in labels: a name from a job must stay text.
  return String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

function jobPath(name, rest) {
  return "/jobs/" + encodeURIComponent(name) + (rest || "");
}

function apiPath(name, rest) {
  return "/api/jobs/" + encodeURIComponent(name) + rest;
}

function jobFromPath() {
  return decodeURIComponent(location.pathname.split("/")[2] || "");
}

async function getJson(url) {
  const response = await fetch(url, { credentials: "same-origin" });
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

async function postJson(url, body) {
  if (csrf === null) csrf = (await getJson("/api/session")).csrf;
  const response = await fetch(url, {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json", "X-Trainprobe-Csrf": csrf },
    body: JSON.stringify(body || {}),
  });
  const answer = await response.json();
  if (!response.ok) throw new Error(answer.error || response.statusText);
  return answer;
}

function listen(url, event, handle) {
  const source = new EventSource(url);
  const shown = document.getElementById("connection");
  source.addEventListener(event, (message) => {
    shown.textContent = "live";
    handle(JSON.parse(message.data));
  });
  source.addEventListener("refused", (message) => {
    shown.textContent = JSON.parse(message.data);
    source.close();
  });
  source.onerror = () => { shown.textContent = "reconnecting…"; };
  return source;
}

function duration(seconds) {
  if (seconds === null || seconds === undefined || seconds < 0) return "";
  const whole = Math.floor(seconds);
  const pad = (n) => String(n).padStart(2, "0");
  return `${Math.floor(whole / 3600)}:${pad(Math.floor(whole / 60) % 60)}:${pad(whole % 60)}`;
}

function elapsed(job) {
  const start = job.started || job.created;
  return duration((job.ended || Date.now() / 1000) - start);
}

function when(seconds) {
  return seconds ? new Date(seconds * 1000).toLocaleString() : "";
}

function rate(value) {
  return value === null || value === undefined ? "" : value.toFixed(value < 10 ? 2 : 1);
}

function status(text) {
  return el("span", { class: "status status-" + text }, text);
}

function markDrawn(element) {
  element.dataset.drawn = String(Number(element.dataset.drawn || 0) + 1);
  element.dataset.drawnAt = String(Math.round(performance.now())); // ms since the page opened
}

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

function drawWhenSeen(box, draw) {
  if (onScreen.has(box)) { pendingDraws.delete(box); return draw(); }
  pendingDraws.set(box, draw);
  return Promise.resolve();
}

// An enveloped series: a band from each bucket's minimum to its maximum, and the mean line.
function envelopeTraces(series, label, x) {
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

function markers(steps) {
  return steps.map((step) => ({
    type: "line", xref: "x", yref: "paper", x0: step, x1: step, y0: 0, y1: 1,
    line: { color: "#d92d20", width: 1, dash: "dot" },
  }));
}

// On a chart over time: when about ten steps began (grey, labelled) and when each rule's issue
// step began (red), from the steps' start times the server sends.
function stepMarkers(stepTimes, issues) {
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

function layout(title, xTitle, yTitle, shapes) {
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

function chartBox(id) {
  return el("div", { class: "chart", id, "data-chart": "" });
}

// ----- the jobs page --------------------------------------------------------------------

function jobsPage() {
  let jobs = [];
  let sortKey = "created";
  let descending = true;
  const search = el("input", { type: "search", placeholder: "search jobs", "aria-label": "search jobs", oninput: draw });
  const columns = [
    ["name", "Job"], ["status", "Status"], ["secondaryStatus", "Secondary status"],
    ["created", "Started"], ["duration", "Duration"], ["step", "Step"],
    ["stepsPerSecond", "Steps/s"], ["framework", "Framework"], ["issues", "Rules with issues"],
  ];
  const body = el("tbody");
  const head = el("tr", {}, columns.map(([key, label]) => el("th", {
    onclick: () => { descending = sortKey === key ? !descending : false; sortKey = key; draw(); },
  }, label)));
  main.append(el("h1", {}, "Training jobs"), el("p", {}, search), el("table", { id: "jobs" }, el("thead", {}, head), body));

  function value(job, key) {
    if (key === "duration") return (job.ended || Date.now() / 1000) - (job.started || job.created);
    if (key === "issues") return job.issues.length;
    return job[key] === null ? -Infinity : job[key];
  }

  function draw() {
    const words = search.value.trim().toLowerCase();
    const shown = jobs.filter((job) => !words || [job.name, job.status, job.framework, ...job.issues].join(" ").toLowerCase().includes(words));
    shown.sort((a, b) => {
      const [x, y] = [value(a, sortKey), value(b, sortKey)];
      const order = x < y ? -1 : x > y ? 1 : 0;
      return descending ? -order : order;
    });
    body.replaceChildren(...shown.map((job) => el("tr", { "data-job": job.name },
      el("td", {}, el("a", { href: jobPath(job.name) }, job.name)),
      el("td", {}, status(job.status)),
      el("td", {}, job.secondaryStatus),
      el("td", {}, when(job.started || job.created)),
      el("td", {}, elapsed(job)),
      el("td", { class: "step" }, job.step === null ? "" : job.step),
      el("td", {}, rate(job.stepsPerSecond)),
      el("td", {}, job.framework),
      el("td", {}, job.issues.join(", ")),
    )));
    document.body.dataset.jobs = String(jobs.length);
  }

  listen("/api/events/jobs", "jobs", (rows) => { jobs = rows; draw(); });
  setInterval(() => { if (jobs.some((job) => !job.ended)) draw(); }, 1000);
}

// ----- the job page ---------------------------------------------------------------------

const REPORTS = { profiler: "Profiler report", xgboost: "XGBoost report" };

function jobPage() {
  const name = jobFromPath();
  let job = null;
  let issueSteps = [];
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
      fact("Steps/s", rate(job.stepsPerSecond) || "–", "rate"),
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
      const plural = (count, word) => `${count} ${word}${count === 1 ? "" : "s"}`;
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
    issueSteps = job.rules.filter((rule) => rule.issueStep !== null).map((rule) => rule.issueStep);
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

  function scalarChart(chart, box) {
    const traces = chart.series.flatMap((series) => envelopeTraces(series, series.mode));
    const points = chart.series.reduce((sum, series) => sum + series.points, 0);
    const plotted = layout(`${chart.tensor} (${points} steps)`, "step", chart.tensor, markers(issueSteps));
    return Plotly.react(box, traces, plotted, config).then(() => markDrawn(box));
  }

  async function rebucket(tensor, box, range) {
    const query = "?tensor=" + encodeURIComponent(tensor) + (range ? `&from=${range[0]}&to=${range[1]}` : "");
    const [chart] = await getJson(apiPath(name, "/scalars") + query);
    const traces = chart.series.flatMap((series) => envelopeTraces(series, series.mode));
    const plotted = { ...box.layout, shapes: markers(issueSteps) };
    if (range) plotted.xaxis = { ...plotted.xaxis, range, autorange: false };
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
        watcher.observe(box);
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

  // Keeps one chart box per plot in ``holder`` (boxes already drawn are redrawn in place).
  function boxes(holder, prefix, count, empty) {
    const found = [];
    for (let index = 0; index < count; index += 1) {
      let box = document.getElementById(prefix + index);
      if (!box) { box = chartBox(prefix + index); holder.append(box); watcher.observe(box); }
      found.push(box);
    }
    holder.querySelectorAll(".chart").forEach((box) => { if (!found.includes(box)) box.remove(); });
    holder.querySelector("p.note")?.remove();
    if (!count) holder.append(el("p", { class: "note" }, empty));
    return found;
  }

  async function drawProfile() {
    const found = await getJson(apiPath(name, "/profile"));
    const processes = found.stepDurations.Processes;
    const stepBoxes = boxes(steps, "steps-", processes.length, "No step timeline yet.");
    await Promise.all(processes.map((process, index) => {
      const traces = envelopeTraces(process.Plot, "duration (ms)");
      traces.push({
        x: process.OutlierSteps, y: process.OutlierDurationsMs, mode: "markers", type: "scatter",
        name: "outliers", marker: { color: "#d92d20", size: 7 },
      });
      const title = `${process.Node} ${process.Mode}: ${process.Steps} steps, ${process.Outliers} outliers`;
      const box = stepBoxes[index];
      return drawWhenSeen(box, () => Plotly.react(box, traces, layout(title, "step", "ms", markers(issueSteps)), config).then(() => markDrawn(box)));
    }));
    const timeShapes = stepMarkers(found.stepTimes, issueSteps);
    const plots = found.systemUsage.Hosts.flatMap((host) => host.Plots.map((plot) => [host.Node, plot]));
    const systemBoxes = boxes(system, "system-", plots.length, "No system metrics yet.");
    await Promise.all(plots.map(([node, plot], index) => {
      const traces = plot.Series.flatMap((series) => envelopeTraces(series, series.Label));
      const title = `${node}: ${plot.Title}`;
      const box = systemBoxes[index];
      const plotted = layout(title, "seconds since the job was created", plot.Unit, timeShapes.shapes);
      plotted.annotations = timeShapes.annotations;
      plotted.margin.t = 56;
      return drawWhenSeen(box, () => Plotly.react(box, traces, plotted, config).then(() => markDrawn(box)));
    }));
  }

  async function refresh() {
    const key = `${job.step}|${job.status}|${issueSteps.join(",")}`;
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
}

// ----- the tensors page -----------------------------------------------------------------

function tensorsPage() {
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
}

// ----- the compare page -----------------------------------------------------------------

function comparePage() {
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
}

const pages = { jobs: jobsPage, job: jobPage, tensors: tensorsPage, compare: comparePage };
pages[document.body.dataset.page]();
