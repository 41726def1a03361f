// Loading chart data from the API and shaping it for ChartPanel: {x, ts, series:[...]}.

import { api, qs, num } from "./api.js";
import { align } from "./chart.js";

const labelPairs = (labels) => Object.entries(labels || {}).map(([k, v]) => k + ":" + v);

// Min/max/last/step per bucket of every series matching name (one or a list) + labels, in one
// request.
// `fields` narrows the columns sent (small multiples draw only "last").
export async function multi({ name, run, labels, range, points, signal, fields }) {
  const body = await api("/query/multi" + qs({ name, run, label: labelPairs(labels), start: range.start, end: range.end, points, fields }), { signal });
  for (const s of body.series) {
    for (const k of ["min", "max", "last"]) if (s[k]) s[k] = s[k].map(num);
  }
  return body.series;
}

// Quantiles per bucket across matching series, one entry per value of `by`.
export async function percentiles({ name, run, labels, range, points, q = [0.5, 0.9, 0.99], by, signal }) {
  const body = await api("/query/percentiles" + qs({ name, run, label: labelPairs(labels), start: range.start, end: range.end, points, q: q.join(","), by }), { signal });
  for (const g of body) for (const k of Object.keys(g.q)) g.q[k] = g.q[k].map(num);
  return body;
}

// The series a run-level chart shows when several match: rank 0 (or none), else the first.
export function primary(series) {
  return series.find((s) => s.labels.rank === undefined || s.labels.rank === "0") || series[0] || null;
}

// One multi series as chart data; xMode "step" puts its steps on x (increasing steps only).
export function single(s, { label, xMode = "time", band = true, smooth = false } = {}) {
  if (!s) return { x: [], ts: [], series: [] };
  let idx = s.ts.map((_, i) => i);
  let x = s.ts;
  if (xMode === "step") {
    idx = [];
    let prev = -Infinity;
    s.step.forEach((st, i) => {
      if (st !== null && st > prev) {
        idx.push(i);
        prev = st;
      }
    });
    x = idx.map((i) => s.step[i]);
  }
  const pick = (arr) => idx.map((i) => arr[i]);
  return {
    x,
    ts: pick(s.ts),
    series: [{ label: label || s.name, values: pick(s.last), min: band ? pick(s.min) : null, max: band ? pick(s.max) : null, smooth }],
  };
}

// Several series (each bucketed on the same grid) as lines on one time axis.
export function lines(list, labelOf, { band = false } = {}) {
  const { x, cols } = align(list.map((s) => ({ ts: s.ts, cols: band ? { last: s.last, min: s.min, max: s.max } : { last: s.last } })));
  return {
    x,
    ts: x,
    series: list.map((s, i) => ({ label: labelOf(s), values: cols[i].last, min: band ? cols[i].min : null, max: band ? cols[i].max : null })),
  };
}

// Percentile groups as lines: one line per (group, quantile).
export function quantileLines(groups, labelOf) {
  const items = groups.map((g) => ({ ts: g.ts, cols: g.q }));
  const { x, cols } = align(items);
  const series = [];
  groups.forEach((g, i) => {
    for (const q of Object.keys(g.q)) series.push({ label: labelOf(g, q), values: cols[i][q] });
  });
  return { x, ts: x, series };
}
