// The dashboard shell: hash routing (view state in the URL), run selection, theme, keyboard,
// live updates over server-sent events, sign-in, and one view at a time in <main id="view">.

import { api, subscribe, ApiError } from "./js/api.js";
import { el, throttle, themeChanged } from "./js/util.js";
import { annotations, currentAlerts, holdAlerts, onAlerts } from "./js/alerts.js";
import { startSession } from "./js/session.js";
import * as runs from "./js/views/runs.js";
import * as overview from "./js/views/overview.js";
import * as hardware from "./js/views/hardware.js";
import * as steptime from "./js/views/steptime.js";
import * as heatmap from "./js/views/heatmap.js";
import * as node from "./js/views/node.js";
import * as alerts from "./js/views/alerts.js";
import * as logs from "./js/views/logs.js";
import * as compare from "./js/views/compare.js";
import * as trace from "./js/views/trace.js";
import * as incidents from "./js/views/incidents.js";

const VIEWS = { runs, overview, hardware, steptime, heatmap, node, alerts, logs, compare, trace, incidents };
const NEEDS_RUN = new Set(["overview", "hardware", "steptime", "heatmap", "node", "alerts", "logs", "trace"]);
const GO_KEYS = { r: "runs", o: "overview", h: "hardware", s: "steptime", m: "heatmap", n: "node", a: "alerts", l: "logs", c: "compare", p: "trace", i: "incidents" };
const THEME_KEY = "stepwatch-theme";
const LIVE_REFRESH_MS = 2000;
const RUN_POLL_MS = 15000;

const $ = (id) => document.getElementById(id);
const shell = { view: null, ctx: null, name: null, params: {}, summaries: [], stream: null, streamRun: undefined, streamUp: false, abort: null, pendingG: 0 };

// ---- the URL -------------------------------------------------------------------------------

function parseHash() {
  const text = location.hash.replace(/^#\/?/, "");
  const [path, query] = text.split("?");
  const params = Object.fromEntries(new URLSearchParams(query || ""));
  return { name: VIEWS[path] ? path : "runs", params };
}

function hashOf(name, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== null && v !== undefined && v !== "") q.set(k, String(v));
  const text = q.toString();
  return "#/" + name + (text ? "?" + text : "");
}

// Keep the run, theme and (for run views) the range when moving between views.
function carried(params) {
  const keep = {};
  for (const k of ["run", "theme", "from", "to", "x", "smooth"]) if (params[k] !== undefined) keep[k] = params[k];
  return keep;
}

// ---- messages ------------------------------------------------------------------------------

function showMessage(text) {
  $("message").textContent = text || "";
}

// Refusals of the API and an unreachable collector are messages (a 401 is the sign-in form's);
// anything else is a bug and also goes to the console.
function showError(err) {
  if (!err) return showMessage("");
  if (err.name === "AbortError" || (err instanceof ApiError && err.status === 401)) return;
  if (err instanceof ApiError) return showMessage(err.message);
  if (err instanceof TypeError && /fetch|network/i.test(err.message)) return showMessage("Cannot reach the collector; retrying with the next update.");
  showMessage(String(err.message || err));
  console.error(err);
}

// ---- theme -----------------------------------------------------------------------------------

function applyTheme(theme) {
  const t = theme === "dark" ? "dark" : "light";
  document.documentElement.dataset.theme = t;
  themeChanged();
  try {
    localStorage.setItem(THEME_KEY, t);
  } catch (e) {
    // private mode: the theme lasts for this page only
  }
}

function toggleTheme() {
  const next = document.documentElement.dataset.theme === "dark" ? "light" : "dark";
  applyTheme(next);
  const { name, params } = parseHash();
  location.hash = hashOf(name, Object.assign({}, params, { theme: next }));
}

// ---- runs ------------------------------------------------------------------------------------

async function loadSummaries() {
  const early = window.stepwatchRuns; // asked for by the page while the modules loaded
  window.stepwatchRuns = null;
  shell.summaries = (early && (await early)) || (await api("/runs/summary")) || [];
  const select = $("run-select");
  const current = shell.params.run || "";
  select.replaceChildren(el("option", { value: "", text: "(choose a run)" }), ...shell.summaries.map((r) => el("option", { value: r.id, text: (r.name || r.id) + " · " + r.status })));
  select.value = shell.summaries.some((r) => r.id === current) ? current : "";
  return shell.summaries;
}

function runSummary(id) {
  return shell.summaries.find((r) => r.id === id) || null;
}

// Whether new data of the run (null: of any run) can still come: only a running run is live.
const isLive = (run) => !run || run.status === "running";

// Where a run's data ends: its end once it ended, else its newest sample.
const runEnd = (run) => (isLive(run) ? run.last_ts : run.end ?? run.last_ts) || run.start;

// ---- live updates ----------------------------------------------------------------------------

// A transition of the shown run's alerts redraws the charts' markers from the held alerts.
const annotateLive = throttle(() => {
  if (shell.view && shell.view.annotate) shell.view.annotate().catch(showError);
}, 250);
onAlerts(annotateLive);

function ensureStream(run) {
  holdAlerts(run);
  if (shell.streamRun === run) return;
  if (shell.stream) shell.stream.close();
  shell.streamRun = run;
  const path = "/stream" + (run ? "?run=" + encodeURIComponent(run) : "");
  shell.stream = subscribe(path, onLive, (up) => {
    shell.streamUp = up;
    showStream();
  });
}

// The live dot: on while the stream is up for a running run (or all runs); a run that ended
// gets no live updates, and the dot says so.
function showStream() {
  const up = shell.streamUp;
  const ended = !isLive(runSummary(shell.streamRun));
  const dot = $("live");
  dot.classList.toggle("on", up && !ended);
  dot.classList.toggle("ended", up && ended);
  dot.title = ended ? "this run has ended: no live updates" : up ? "live updates" : "live updates: not connected";
}

const liveRefresh = throttle(() => {
  if (shell.view && shell.view.refresh) shell.view.refresh().catch(showError);
}, LIVE_REFRESH_MS);

// A run's end comes with no new sample: while a running run is shown, its summary is read
// again now and then, and once it has ended the view shows it up to its end, not live.
async function pollRunEnd() {
  const shown = runSummary(shell.params.run);
  if (!shown || !isLive(shown) || document.hidden) return;
  await loadSummaries();
  if (isLive(runSummary(shell.params.run))) return;
  showStream();
  if (!shell.ctx || shell.params.to) return;
  shell.ctx.rangeChanged();
  if (shell.view && shell.view.refresh) await shell.view.refresh();
}

// A view refreshes on new samples, or with `live: "events"` on new events of its `liveKinds`;
// a view zoomed to a fixed range stays as it is.
function onLive(name, data) {
  const summary = data && data.run ? runSummary(data.run) : null;
  if (name === "data" && summary && data.ts > (summary.last_ts || 0)) summary.last_ts = data.ts;
  const view = shell.view;
  if (!view) return;
  if (!view.refresh || (view.live || "data") !== name) return;
  if (view.liveKinds && !(data.kinds && view.liveKinds.some((k) => k in data.kinds))) return;
  const mine = !shell.params.run || data.run === shell.params.run;
  const ended = name === "data" && !isLive(runSummary(shell.params.run)); // late samples of an ended run
  if (shell.name === "runs" || (!shell.params.to && mine && !ended)) liveRefresh();
}

// ---- the context a view gets -------------------------------------------------------------------

function makeContext(name, params, signal) {
  const ctx = {
    name,
    params,
    signal,
    get summaries() {
      return shell.summaries;
    },
    // The newest summary of the run (the list is refetched now and then; live data moves its end).
    get run() {
      return params.run ? runSummary(params.run) : null;
    },
    // The time range shown: the URL's from/to, else the run's whole life: up to its end once
    // it ended, else up to its newest data (live: the end follows).
    range() {
      const r = ctx.run;
      const from = params.from !== undefined ? Number(params.from) : null;
      const to = params.to !== undefined ? Number(params.to) : null;
      const end = to ?? (r ? Math.max(runEnd(r), r.start + 1) : Date.now() / 1000);
      const start = from ?? (r ? Math.min(r.start, end - 1) : end - 3600);
      return { start, end, live: to === null && isLive(r) };
    },
    go(view, extra = {}) {
      location.hash = hashOf(view, Object.assign(carried(params), extra));
    },
    // Change URL parameters: rerender (a new hash) or only record them (replaceState).
    set(changes, { rerender = true } = {}) {
      const next = Object.assign({}, params, changes);
      for (const [k, v] of Object.entries(changes)) if (v === null || v === undefined || v === "") delete next[k];
      if (rerender) location.hash = hashOf(name, next);
      else {
        Object.assign(params, next);
        for (const k of Object.keys(params)) if (!(k in next)) delete params[k];
        history.replaceState(null, "", hashOf(name, next));
      }
    },
    rangeListeners: [],
    rangeChanged() {
      ctx.rangeListeners.forEach((f) => f());
    },
    zoom(start, end) {
      ctx.set({ from: start.toFixed(3), to: end.toFixed(3) });
    },
    resetZoom() {
      ctx.set({ from: null, to: null });
    },
    async annotations() {
      if (!params.run) return [];
      try {
        return annotations(await currentAlerts(params.run));
      } catch (err) {
        showError(err);
        return [];
      }
    },
    message: showMessage,
    error: showError,
  };
  return ctx;
}

// ---- routing ---------------------------------------------------------------------------------

// Only the time range changed: the same view refetches into the charts it has.
function onlyRangeChanged(name, params) {
  if (name !== shell.name || !shell.view || !shell.view.refresh || !shell.ctx) return false;
  const keys = new Set([...Object.keys(params), ...Object.keys(shell.params)]);
  for (const k of keys) if (k !== "from" && k !== "to" && params[k] !== shell.params[k]) return false;
  return true;
}

async function route() {
  const { name, params } = parseHash();
  if (params.theme && params.theme !== document.documentElement.dataset.theme) applyTheme(params.theme);
  if (onlyRangeChanged(name, params)) {
    const kept = shell.ctx.params;
    for (const k of Object.keys(kept)) delete kept[k];
    Object.assign(kept, params);
    shell.params = kept;
    shell.ctx.rangeChanged();
    try {
      await shell.view.refresh();
    } catch (err) {
      showError(err);
    }
    return;
  }
  if (shell.abort) shell.abort.abort();
  if (shell.view && shell.view.destroy) shell.view.destroy();
  shell.view = null;
  shell.ctx = null;
  shell.abort = new AbortController();
  shell.name = name;
  shell.params = params;
  showMessage("");
  for (const a of document.querySelectorAll("[data-nav]")) a.classList.toggle("active", a.dataset.nav === name);
  const root = $("view");
  root.replaceChildren();
  try {
    if (shell.summaries.length) loadSummaries().catch(showError); // shown from the last list meanwhile
    else await loadSummaries();
    if (NEEDS_RUN.has(name) && !params.run) {
      const pick = shell.summaries[0];
      if (pick) {
        location.replace(hashOf(name, Object.assign({}, params, { run: pick.id })));
        return;
      }
    }
    ensureStream(name === "runs" || name === "compare" ? null : params.run || null);
    showStream(); // the run may have ended since the stream opened
    const ctx = (shell.ctx = makeContext(name, params, shell.abort.signal));
    const host = el("section", { dataset: { view: name } });
    root.append(host);
    if (NEEDS_RUN.has(name) && !ctx.run) {
      host.append(el("p", { class: "empty", text: params.run ? `Run ${params.run} is not known to this collector.` : "No runs yet: start a training with stepwatch (or `stepwatch demo`) and it appears here." }));
      return;
    }
    shell.view = (await VIEWS[name].render(host, ctx)) || {};
  } catch (err) {
    showError(err);
  }
}

// Signed out, or the session ended: nothing the collector said stays on the page.
function signedOut() {
  if (shell.abort) shell.abort.abort();
  if (shell.view && shell.view.destroy) shell.view.destroy();
  if (shell.stream) shell.stream.close();
  holdAlerts(null);
  Object.assign(shell, { view: null, ctx: null, name: null, summaries: [], stream: null, streamRun: undefined, streamUp: false });
  $("run-select").replaceChildren();
  $("view").replaceChildren();
  showMessage("");
  showStream();
}

// ---- keyboard --------------------------------------------------------------------------------

function typing(target) {
  return target && (target.tagName === "INPUT" || target.tagName === "TEXTAREA" || target.tagName === "SELECT" || target.isContentEditable);
}

function moveSelection(delta) {
  const rows = Array.from(document.querySelectorAll("#view [data-row]"));
  if (!rows.length) return;
  const at = rows.findIndex((r) => r.classList.contains("selected"));
  const next = rows[Math.max(0, Math.min(rows.length - 1, at < 0 ? 0 : at + delta))];
  rows.forEach((r) => r.classList.toggle("selected", r === next));
  next.scrollIntoView({ block: "nearest" });
}

function onKey(e) {
  const help = $("help");
  if (e.key === "Escape") {
    if (!help.hidden) help.hidden = true;
    else if (typing(e.target)) e.target.blur();
    else if (shell.view && shell.view.escape) shell.view.escape();
    return;
  }
  if (typing(e.target) || e.ctrlKey || e.metaKey || e.altKey) return;
  if (shell.pendingG && Date.now() - shell.pendingG < 1500 && GO_KEYS[e.key]) {
    shell.pendingG = 0;
    e.preventDefault();
    const { params } = parseHash();
    location.hash = hashOf(GO_KEYS[e.key], carried(params));
    return;
  }
  shell.pendingG = 0;
  if (e.key === "g") shell.pendingG = Date.now();
  else if (e.key === "?") help.hidden = !help.hidden;
  else if (e.key === "t") toggleTheme();
  else if (e.key === "z") {
    const { name, params } = parseHash();
    if (params.from || params.to) {
      delete params.from;
      delete params.to;
      location.hash = hashOf(name, params);
    }
  } else if (e.key === "/") {
    const search = document.querySelector("#view [data-search]");
    if (search) {
      e.preventDefault();
      search.focus();
    }
  } else if (e.key === "j" || e.key === "ArrowDown") {
    e.preventDefault();
    moveSelection(1);
  } else if (e.key === "k" || e.key === "ArrowUp") {
    e.preventDefault();
    moveSelection(-1);
  } else if (e.key === "Enter") {
    const row = document.querySelector("#view [data-row].selected");
    if (row) row.click();
  }
}

// ---- start -----------------------------------------------------------------------------------

$("run-select").addEventListener("change", (e) => {
  const { name, params } = parseHash();
  const keep = { theme: params.theme, run: e.target.value };
  location.hash = hashOf(name === "runs" ? "overview" : name, keep);
});
$("theme-toggle").addEventListener("click", toggleTheme);
$("help-button").addEventListener("click", () => ($("help").hidden = !$("help").hidden));
$("help").addEventListener("click", (e) => {
  if (e.target === $("help")) $("help").hidden = true;
});
document.addEventListener("keydown", onKey);
setInterval(() => pollRunEnd().catch(showError), RUN_POLL_MS);
window.addEventListener("hashchange", route);
startSession({ ready: route, left: signedOut, error: showError }).catch(showError);
