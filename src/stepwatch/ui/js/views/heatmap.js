// Sync-latency heatmap: communication time per rank (rows) over time (columns), colour-scaled
// on a canvas; hover tells rank, time and value; drag across it to zoom. Each cell is the
// longest communication time of its rank in its column, read from the store's pre-aggregated
// tiers (one series per rank), so a long run with many ranks stays quick.

import { el, fmtClock, fmtNum, byLabel } from "../util.js";
import { multi } from "../data.js";
import { align } from "../chart.js";
import { rangeBar } from "./common.js";
import { timeAxis } from "../ticks.js";

const METRIC = "train.comm_time_s";
// Dark blue → teal → yellow, readable on both themes.
const STOPS = [[13, 8, 135], [84, 2, 163], [139, 10, 165], [185, 50, 137], [219, 92, 104], [244, 136, 73], [254, 188, 43], [240, 249, 33]];
const ROW_MAX_PX = 18;
// What the cells mean. A rank's communication time includes waiting in the collective for the
// last rank to arrive, so a slow rank (a straggler) waits least: every row but its own is hot.
const CAPTION =
  "Time each rank spent in communication (the longest in each bucket), waiting for the others included. " +
  "A rank the others wait on (a straggler) is the one cold row: it arrives last and waits least, while every other row runs hot. " +
  "A hot column is a collective slow for all ranks; an empty one, a time no rank reported in (an evaluation, a checkpoint).";

function colour(t) {
  const x = Math.max(0, Math.min(1, t)) * (STOPS.length - 1);
  const i = Math.min(STOPS.length - 2, Math.floor(x));
  const f = x - i;
  return STOPS[i].map((c, k) => Math.round(c + (STOPS[i + 1][k] - c) * f));
}

// Low and high ends of the colour scale: 1st and 99th percentiles, so one outlier keeps contrast.
function scale(rows) {
  const all = rows.flat().filter((v) => v !== null && Number.isFinite(v)).sort((a, b) => a - b);
  if (!all.length) return [0, 1];
  const lo = all[Math.floor(0.01 * (all.length - 1))];
  const hi = all[Math.ceil(0.99 * (all.length - 1))];
  return hi > lo ? [lo, hi] : [lo, lo + 1];
}

// Columns evenly spaced in time, as wide as nine in ten of the gaps between buckets with data
// (buckets finer than the steps leave every other one empty); a column keeps the longest of
// its buckets. So a column is empty only where no rank reported for longer (an evaluation, a
// checkpoint), and the time axis is linear: {x (column starts), rows, t1 (end of the last)}.
function evenColumns(x, rows, range) {
  if (!x.length) return { x, rows, t1: range.end };
  const gaps = x.slice(1).map((t, i) => t - x[i]).sort((a, b) => a - b);
  const bucket = gaps.length ? gaps[0] : Math.max(1e-3, range.end - x[0]);
  const dt = gaps.length ? bucket * Math.max(1, Math.round(gaps[Math.floor(0.9 * (gaps.length - 1))] / bucket)) : bucket;
  const col = (t) => Math.floor((t - x[0]) / dt + 1e-6);
  const n = col(x[x.length - 1]) + 1;
  const merged = rows.map((row) => {
    const out = new Array(n).fill(null);
    row.forEach((v, i) => {
      const c = col(x[i]);
      if (v !== null && Number.isFinite(v) && (out[c] === null || v > out[c])) out[c] = v;
    });
    return out;
  });
  return { x: Array.from({ length: n }, (_, i) => x[0] + i * dt), rows: merged, t1: x[0] + n * dt };
}

export async function render(root, ctx) {
  const run = ctx.run.id;
  const legend = el("div", { class: "legend-scale" });
  const legendText = el("div", { class: "muted" });
  const box = el("div", { class: "heatmap-wrap chart", dataset: { chart: "heatmap" } });
  const tip = el("div", { class: "tooltip", hidden: true });
  root.append(
    el("h2", { text: "Sync latency · " + (ctx.run.name || ctx.run.id) }),
    rangeBar(ctx),
    el("p", { class: "muted", text: CAPTION }),
    el("div", { class: "panel" }, box, legend, legendText),
  );
  let state = null;

  async function refresh() {
    const range = ctx.range();
    const width = Math.max(200, box.clientWidth || 800);
    const points = Math.max(20, Math.min(2000, Math.floor(width / 2)));
    const series = await multi({ name: METRIC, run, range, points, signal: ctx.signal, fields: "max" });
    series.sort((a, b) => byLabel(a.labels.rank, b.labels.rank));
    const { x, cols } = align(series.map((s) => ({ ts: s.ts, cols: { v: s.max } })));
    state = Object.assign(evenColumns(x, cols.map((c) => c.v), range), { ranks: series.map((s) => s.labels.rank ?? "?"), range, width });
    draw();
  }

  function draw() {
    const { x, rows, ranks, range } = state;
    box.dataset.start = String(range.start);
    box.dataset.end = String(range.end);
    box.replaceChildren();
    if (!x.length || !rows.length) {
      box.append(el("div", { class: "empty", text: "No communication-time samples (train.comm_time_s) in this range." }));
      box.dataset.points = "0";
      box.dataset.ready = "1";
      return;
    }
    const rowH = Math.max(2, Math.min(ROW_MAX_PX, Math.floor(480 / rows.length)));
    const canvas = el("canvas", { width: x.length, height: rows.length, "aria-label": "heatmap of communication time" });
    canvas.style.height = rows.length * rowH + "px";
    const g = canvas.getContext("2d");
    const img = g.createImageData(x.length, rows.length);
    const [lo, hi] = scale(rows);
    let cells = 0;
    rows.forEach((row, r) => {
      row.forEach((v, c) => {
        const at = 4 * (r * x.length + c);
        if (v === null || !Number.isFinite(v)) return;
        const [cr, cg, cb] = colour((v - lo) / (hi - lo));
        img.data.set([cr, cg, cb, 255], at);
        cells += 1;
      });
    });
    g.putImageData(img, 0, 0);
    const every = Math.ceil(12 / rowH);
    const labels = el("div", { class: "heatmap-ranks" }, ranks.map((r, i) => el("div", { style: `height:${rowH}px;line-height:${rowH}px`, text: i % every ? "" : r })));
    const plot = el("div", { class: "heatmap-plot" }, canvas, tip);
    const axis = timeAxis(x[0], state.t1);
    box.append(el("div", { class: "heatmap-grid" }, el("div", { class: "muted heatmap-ylabel", text: "rank" }), labels, plot, el("div"), el("div"), axis));
    legend.style.background = "linear-gradient(to right, " + STOPS.map((s) => `rgb(${s.join(",")})`).join(", ") + ")";
    legendText.textContent = `${fmtNum(lo)} s … ${fmtNum(hi)} s · ${ranks.length} ranks × ${x.length} columns`;
    wire(canvas);
    box.dataset.points = String(cells);
    box.dataset.ready = "1";
  }

  function cellAt(canvas, e) {
    const rect = canvas.getBoundingClientRect();
    const c = Math.floor(((e.clientX - rect.left) / rect.width) * state.x.length);
    const r = Math.floor(((e.clientY - rect.top) / rect.height) * state.rows.length);
    return { c: Math.max(0, Math.min(state.x.length - 1, c)), r: Math.max(0, Math.min(state.rows.length - 1, r)), px: e.clientX - rect.left, py: e.clientY - rect.top };
  }

  function wire(canvas) {
    let down = null;
    canvas.addEventListener("mousemove", (e) => {
      const { c, r, px, py } = cellAt(canvas, e);
      const v = state.rows[r][c];
      tip.hidden = false;
      tip.textContent = `rank ${state.ranks[r]} · ${fmtClock(state.x[c])} · ${v === null ? "no data" : fmtNum(v) + " s"}`;
      tip.style.left = Math.max(0, Math.min(px + 12, canvas.clientWidth - 200)) + "px";
      tip.style.top = py + 12 + "px";
    });
    canvas.addEventListener("mouseleave", () => (tip.hidden = true));
    canvas.addEventListener("mousedown", (e) => (down = cellAt(canvas, e).c));
    canvas.addEventListener("mouseup", (e) => {
      const up = cellAt(canvas, e).c;
      if (down !== null && Math.abs(up - down) >= 2) {
        const a = state.x[Math.min(up, down)];
        const b = state.x[Math.max(up, down)];
        ctx.zoom(a, b);
      }
      down = null;
    });
    canvas.addEventListener("dblclick", () => ctx.resetZoom());
  }

  await refresh();
  return { refresh };
}
