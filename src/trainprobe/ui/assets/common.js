// trainprobe ui: what every page uses. Elements are made with el(), which inserts every name
// and message from a job as text (text nodes), never as HTML; plain() does the same for plotly's
// labels. The server's JSON routes are read with getJson, changed with postJson (carrying the
// CSRF token), and followed live with listen (server-sent events).

export const main = document.getElementById("main");
let csrf = null;

export function el(tag, attributes, ...children) {
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

export function plain(text) {
  // plotly reads a few HTML tags in labels: a name from a job must stay text.
  return String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

export function jobPath(name, rest) {
  return "/jobs/" + encodeURIComponent(name) + (rest || "");
}

export function apiPath(name, rest) {
  return "/api/jobs/" + encodeURIComponent(name) + rest;
}

export function jobFromPath() {
  return decodeURIComponent(location.pathname.split("/")[2] || "");
}

export async function getJson(url) {
  const response = await fetch(url, { credentials: "same-origin" });
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

export async function postJson(url, body) {
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

export function listen(url, event, handle) {
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

export function duration(seconds) {
  if (seconds === null || seconds === undefined || seconds < 0) return "";
  const whole = Math.floor(seconds);
  const pad = (n) => String(n).padStart(2, "0");
  return `${Math.floor(whole / 3600)}:${pad(Math.floor(whole / 60) % 60)}:${pad(whole % 60)}`;
}

export function elapsed(job) {
  const start = job.started || job.created;
  return duration((job.ended || Date.now() / 1000) - start);
}

export function when(seconds) {
  return seconds ? new Date(seconds * 1000).toLocaleString() : "";
}

export function rate(value) {
  return value === null || value === undefined ? "" : value.toFixed(value < 10 ? 2 : 1);
}

export function status(text) {
  return el("span", { class: "status status-" + text }, text);
}

export function markDrawn(element) {
  element.dataset.drawn = String(Number(element.dataset.drawn || 0) + 1);
  element.dataset.drawnAt = String(Math.round(performance.now())); // ms since the page opened
}
