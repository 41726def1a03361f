// Node drill-down: one node (or one GPU of it) against its peers: the median of the fleet
// and the 10th-90th percentile band, for a metric picked from what the run reports.

import { api, qs } from "../api.js";
import { el, byLabel, cssVar, unitOf } from "../util.js";
import { percentiles } from "../data.js";
import { align } from "../chart.js";
import { panels, rangeBar } from "./common.js";

const METRICS = [
  "gpu.util_pct", "gpu.mem_used_bytes", "gpu.temp_c", "gpu.power_w",
  "host.cpu_pct", "host.mem_used_bytes", "host.net_rx_bytes_per_s", "host.net_tx_bytes_per_s", "host.disk_write_bytes_per_s",
  "train.step_time_s", "train.compute_time_s", "train.data_time_s", "train.comm_time_s",
];

export async function render(root, ctx) {
  const p = ctx.params;
  const run = ctx.run.id;
  const metric = METRICS.includes(p.metric) ? p.metric : METRICS[0];
  const series = await api("/series" + qs({ name: metric, run }), { signal: ctx.signal });
  const nodes = Array.from(new Set(series.map((s) => s.labels.node).filter(Boolean))).sort(byLabel);
  const node = nodes.includes(p.node) ? p.node : nodes[0];
  const gpus = Array.from(new Set(series.filter((s) => s.labels.node === node && s.labels.gpu !== undefined).map((s) => s.labels.gpu))).sort(byLabel);
  const gpu = gpus.includes(p.gpu) ? p.gpu : "";

  const metricSel = el("select", { "aria-label": "metric" }, METRICS.map((m) => el("option", { value: m, text: m })));
  metricSel.value = metric;
  const nodeSel = el("select", { "aria-label": "node" }, nodes.map((n) => el("option", { value: n, text: n })));
  nodeSel.value = node || "";
  const gpuSel = el("select", { "aria-label": "gpu", disabled: !gpus.length }, el("option", { value: "", text: "all GPUs (median)" }), gpus.map((g) => el("option", { value: g, text: "gpu " + g })));
  gpuSel.value = gpu;
  metricSel.addEventListener("change", () => ctx.set({ metric: metricSel.value }));
  nodeSel.addEventListener("change", () => ctx.set({ node: nodeSel.value, gpu: null }));
  gpuSel.addEventListener("change", () => ctx.set({ gpu: gpuSel.value }));
  root.append(
    el("h2", { text: "Node drill-down · " + (ctx.run.name || ctx.run.id) }),
    rangeBar(ctx, el("label", {}, "Metric", metricSel), el("label", {}, "Node", nodeSel), el("label", {}, "GPU", gpuSel)),
  );
  const set = panels(ctx);
  if (!node) {
    root.append(el("p", { class: "empty", text: `No ${metric} series with a node label in this run.` }));
    return {};
  }
  const who = node + (gpu ? " gpu " + gpu : "");
  set.add(root, {
    id: `node:${metric}`,
    title: `${metric}: ${who} against its peers`,
    unit: unitOf(metric),
    height: 320,
    load: async (range, points, signal) => {
      const labels = gpu ? { node, gpu } : { node };
      const [mine, peers] = await Promise.all([
        percentiles({ name: metric, run, labels, range, points, q: [0.5], signal }),
        percentiles({ name: metric, run, range, points, q: [0.1, 0.5, 0.9], signal }),
      ]);
      const a = mine[0] || { ts: [], q: { 0.5: [] } };
      const b = peers[0] || { ts: [], q: { 0.1: [], 0.5: [], 0.9: [] } };
      const { x, cols } = align([{ ts: a.ts, cols: { v: a.q["0.5"] } }, { ts: b.ts, cols: b.q }]);
      return {
        x,
        ts: x,
        series: [
          { label: "peers median (P10–P90 band)", values: cols[1]["0.5"], min: cols[1]["0.1"], max: cols[1]["0.9"], color: cssVar("--muted"), dash: [5, 4], width: 1.5 },
          { label: who, values: cols[0].v, width: 2 },
        ],
      };
    },
  });
  await Promise.all([set.refresh(), set.annotate()]);
  return { refresh: () => set.refresh(), annotate: () => set.annotate(), destroy: () => set.destroy() };
}
