// trainprobe ui, the jobs page: every job, newest first, searchable and sortable, kept live by
// the server's events.

import { el, elapsed, jobPath, listen, main, rate, status, when } from "/static/common.js";

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
