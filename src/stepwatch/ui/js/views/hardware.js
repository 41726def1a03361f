// Hardware: GPU utilization, memory, temperature and power per node (one line per GPU) as
// small multiples, GPU memory trend by node, and host CPU, memory, network and disk.

import { api, qs } from "../api.js";
import { el, byLabel } from "../util.js";
import { multi, lines, quantileLines, percentiles } from "../data.js";
import { panels, rangeBar } from "./common.js";

const GPU = [
  { id: "gpu.util_pct", title: "GPU utilization %" },
  { id: "gpu.mem_used_bytes", title: "GPU memory used", unit: "bytes" },
  { id: "gpu.temp_c", title: "GPU temperature °C" },
  { id: "gpu.power_w", title: "GPU power W" },
];
const HOST = [
  { id: "host.cpu_pct", title: "CPU %" },
  { id: "host.mem_used_bytes", title: "Memory used", unit: "bytes" },
  { id: "host.net_rx_bytes_per_s", title: "Network receive", unit: "bytes" },
  { id: "host.net_tx_bytes_per_s", title: "Network transmit", unit: "bytes" },
  { id: "host.disk_write_bytes_per_s", title: "Disk write", unit: "bytes" },
];

// One request per metric and range serves every node's small multiple (same width).
function shared(load) {
  let key = null;
  let pending = null;
  return (range, points, signal) => {
    const k = range.start + ":" + range.end;
    if (k !== key) {
      key = k;
      pending = load(range, points, signal);
    }
    return pending;
  };
}

export async function render(root, ctx) {
  const run = ctx.run.id;
  const gpuSeries = await multiNodes(run, ctx);
  const nodes = gpuSeries.nodes;
  root.append(el("h2", { text: "Hardware · " + (ctx.run.name || ctx.run.id) }), rangeBar(ctx));
  const set = panels(ctx);
  if (!nodes.length) root.append(el("p", { class: "empty", text: "No GPU metrics for this run." }));
  for (const m of GPU) {
    const section = el("div", { class: "section" }, el("h2", { text: m.title }));
    const grid = el("div", { class: "grid-small" });
    section.append(grid);
    root.append(section);
    const load = shared((range, points, signal) => multi({ name: m.id, run, range, points, signal }));
    for (const node of nodes) {
      set.add(grid, {
        id: `${m.id}:${node}`,
        title: node,
        unit: m.unit,
        height: 140,
        legend: false,
        load: async (range, points, signal) => {
          const mine = (await load(range, points, signal)).filter((s) => s.labels.node === node).sort((a, b) => byLabel(a.labels.gpu, b.labels.gpu));
          return lines(mine, (s) => "gpu " + s.labels.gpu);
        },
      });
    }
  }
  const trend = el("div", { class: "section" }, el("h2", { text: "GPU memory by node (largest GPU)" }));
  root.append(trend);
  set.add(trend, {
    id: "gpu.mem_used_bytes:by-node",
    unit: "bytes",
    height: 200,
    load: async (range, points, signal) => {
      const groups = await percentiles({ name: "gpu.mem_used_bytes", run, range, points, q: [1], by: "node", signal });
      groups.sort((a, b) => byLabel(a.labels.node, b.labels.node));
      return quantileLines(groups, (g) => g.labels.node || "?");
    },
  });
  const host = el("div", { class: "section" }, el("h2", { text: "Hosts" }));
  const hostGrid = el("div", { class: "grid2" });
  host.append(hostGrid);
  root.append(host);
  for (const m of HOST) {
    set.add(hostGrid, {
      id: m.id,
      title: m.title,
      unit: m.unit,
      height: 180,
      load: async (range, points, signal) => {
        const list = (await multi({ name: m.id, run, range, points, signal })).sort((a, b) => byLabel(a.labels.node, b.labels.node));
        return lines(list, (s) => s.labels.node || "host");
      },
    });
  }
  await Promise.all([set.refresh(), set.annotate()]);
  return { refresh: () => Promise.all([set.refresh(), set.annotate()]), destroy: () => set.destroy() };
}

// The run's nodes that report GPU metrics (from the series catalogue, no samples read).
async function multiNodes(run, ctx) {
  const series = await api("/series" + qs({ name: "gpu.util_pct", run }), { signal: ctx.signal });
  const nodes = Array.from(new Set(series.map((s) => s.labels.node).filter(Boolean))).sort(byLabel);
  return { nodes };
}
