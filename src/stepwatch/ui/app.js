"use strict";
// The minimal page: list runs, pick one, chart one series (min/max band + last) from downsample.

const API = "/api/v1";
const TOKEN_KEY = "stepwatch-token";
const SPECIAL = { NaN: NaN, "+Inf": Infinity, "-Inf": -Infinity };
const state = { run: null, series: null };
const $ = (id) => document.getElementById(id);

// GET a JSON endpoint; on 401 ask once for the bearer token and retry.
async function api(path) {
  for (let attempt = 0; attempt < 2; attempt += 1) {
    const token = sessionStorage.getItem(TOKEN_KEY);
    const headers = token ? { Authorization: "Bearer " + token } : {};
    const res = await fetch(API + path, { headers });
    if (res.status === 401 && attempt === 0) {
      const given = window.prompt("This collector needs its access token:");
      if (!given) break;
      sessionStorage.setItem(TOKEN_KEY, given);
      continue;
    }
    const body = await res.json();
    if (!res.ok) throw new Error(body.error || res.statusText);
    return body;
  }
  throw new Error("not authorized");
}

const toNumber = (v) => (typeof v === "string" ? SPECIAL[v] : v);
const fmtTime = (ts) => new Date(ts * 1000).toLocaleString();

function showError(err) {
  $("message").textContent = err ? String(err.message || err) : "";
}

async function loadRuns() {
  const runs = await api("/runs");
  runs.sort((a, b) => b.start - a.start);
  const body = $("runs").tBodies[0];
  body.replaceChildren();
  for (const run of runs) {
    const row = body.insertRow();
    row.dataset.runId = run.id;
    row.classList.toggle("selected", state.run === run.id);
    const status = row.insertCell();
    status.textContent = run.status;
    status.className = "status-" + run.status;
    row.insertCell().textContent = fmtTime(run.start);
    row.insertCell().textContent = run.name || run.id;
    row.addEventListener("click", () => selectRun(run).catch(showError));
  }
  const shared = new URLSearchParams(location.hash.slice(1)).get("run");
  const linked = state.run === null && runs.find((r) => r.id === shared);
  if (linked) await selectRun(linked);
}

function seriesLabel(s) {
  const labels = Object.entries(s.labels).filter(([k]) => k !== "run");
  return s.name + (labels.length ? " {" + labels.map(([k, v]) => k + "=" + v).join(", ") + "}" : "");
}

async function selectRun(run) {
  state.run = run.id;
  history.replaceState(null, "", "#run=" + encodeURIComponent(run.id));
  for (const row of $("runs").tBodies[0].rows) {
    row.classList.toggle("selected", row.dataset.runId === run.id);
  }
  $("run-title").textContent = (run.name || run.id) + " (" + run.status + ")";
  const series = await api("/series?run=" + encodeURIComponent(run.id));
  series.sort((a, b) => seriesLabel(a).localeCompare(seriesLabel(b)));
  const select = $("series");
  select.replaceChildren(...series.map((s) => new Option(seriesLabel(s), s.id)));
  const loss = series.find((s) => s.name === "train.loss");
  state.series = series.length ? (loss || series[0]).id : null;
  if (state.series !== null) select.value = String(state.series);
  await drawSeries();
}

function extent(values) {
  let lo = Infinity;
  let hi = -Infinity;
  for (const v of values) {
    if (Number.isFinite(v)) {
      lo = Math.min(lo, v);
      hi = Math.max(hi, v);
    }
  }
  return lo <= hi ? [lo, hi === lo ? lo + 1 : hi] : [0, 1];
}

// Pixel mappings for the data of one chart, padding left for the axis labels.
function frame(canvas, ts, values) {
  const pad = { left: 70, right: 10, top: 10, bottom: 24 };
  const w = canvas.width;
  const h = canvas.height;
  const [t0, t1] = ts.length > 1 ? [ts[0], ts[ts.length - 1]] : [ts[0] - 1, ts[0] + 1];
  const [y0, y1] = extent(values);
  return {
    w, h, pad, t0, t1, y0, y1,
    x: (t) => pad.left + ((t - t0) / (t1 - t0)) * (w - pad.left - pad.right),
    y: (v) => h - pad.bottom - ((v - y0) / (y1 - y0)) * (h - pad.top - pad.bottom),
  };
}

// The spread of each bucket: a vertical stroke from its min to its max.
function drawBand(ctx, f, ts, lo, hi) {
  ctx.strokeStyle = "#b9c8e8";
  for (let i = 0; i < ts.length; i += 1) {
    if (!Number.isFinite(lo[i]) || !Number.isFinite(hi[i])) continue;
    ctx.beginPath();
    ctx.moveTo(f.x(ts[i]), f.y(lo[i]));
    ctx.lineTo(f.x(ts[i]), f.y(hi[i]) - 0.5);
    ctx.stroke();
  }
}

// The last value of each bucket as a line; NaN/Inf break it and get a red tick at the top.
function drawLast(ctx, f, ts, last) {
  ctx.strokeStyle = "#1f5fd1";
  ctx.fillStyle = "#b3261e";
  ctx.beginPath();
  let pen = false;
  for (let i = 0; i < ts.length; i += 1) {
    if (!Number.isFinite(last[i])) {
      ctx.fillRect(f.x(ts[i]) - 1, f.pad.top, 2, 8);
      pen = false;
    } else if (pen) {
      ctx.lineTo(f.x(ts[i]), f.y(last[i]));
    } else {
      ctx.moveTo(f.x(ts[i]), f.y(last[i]));
      pen = true;
    }
  }
  ctx.stroke();
}

function drawAxes(ctx, f) {
  ctx.fillStyle = "#1d2330";
  ctx.fillText(f.y1.toPrecision(4), 4, f.pad.top + 8);
  ctx.fillText(f.y0.toPrecision(4), 4, f.h - f.pad.bottom);
  ctx.fillText(fmtTime(f.t0), f.pad.left, f.h - 6);
  const end = fmtTime(f.t1);
  ctx.fillText(end, f.w - f.pad.right - ctx.measureText(end).width, f.h - 6);
}

// One downsample response on the canvas: band, last-value line, axis labels.
function draw(data) {
  const canvas = $("chart");
  const ctx = canvas.getContext("2d");
  ctx.clearRect(0, 0, canvas.width, canvas.height);
  if (!data.ts.length) return;
  const lo = data.min.map(toNumber);
  const hi = data.max.map(toNumber);
  const f = frame(canvas, data.ts, lo.concat(hi));
  drawBand(ctx, f, data.ts, lo, hi);
  drawLast(ctx, f, data.ts, data.last.map(toNumber));
  drawAxes(ctx, f);
}

async function drawSeries() {
  if (state.series === null) {
    draw({ ts: [], min: [], max: [], last: [] });
    return;
  }
  const points = $("chart").width - 80;
  draw(await api("/query/downsample?series=" + state.series + "&points=" + points));
}

async function refresh() {
  try {
    await loadRuns();
    await drawSeries();
    showError(null);
  } catch (err) {
    showError(err);
  }
}

$("series").addEventListener("change", (e) => {
  state.series = Number(e.target.value);
  drawSeries().catch(showError);
});
$("refresh").addEventListener("click", refresh);
refresh();
setInterval(refresh, 5000);
