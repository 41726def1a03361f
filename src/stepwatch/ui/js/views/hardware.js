// Hardware: GPU utilization, memory, temperature and power per node (one line per GPU) as
// small multiples, GPU memory trend by node, and host CPU, memory, network and disk.

import { api, qs } from "../api.js";
import { el, byLabel } from "../util.js";
import { multi, lines } from "../data.js";
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
  let memory = null;
  for (const m of GPU) {
    const section = el("div", { class: "section" }, el("h2", { text: m.title }));
    const grid = el("div", { class: "grid-small" });
    section.append(grid);
    root.append(section);
    const load = shared((range, points, signal) => multi({ name: m.id, run, range, points, signal, fields: "last" }));
    if (m.id === "gpu.mem_used_bytes") memory = load;
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
  const trend = el("div", { class: "section" }, el("h2", { text: "GPU memory by node (fullest GPU)" }));
  root.append(trend);
  set.add(trend, {
    id: "gpu.mem_used_bytes:by-node",
    unit: "bytes",
    height: 200,
    load: async (range, points, signal) => nodeMax(await memory(range, points, signal), nodes),
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
        const list = (await multi({ name: m.id, run, range, points, signal, fields: "last" })).sort((a, b) => byLabel(a.labels.node, b.labels.node));
        return lines(list, (s) => s.labels.node || "host");
      },
    });
  }
  await Promise.all([set.refresh(), set.annotate()]);
  return { refresh: () => set.refresh(), annotate: () => set.annotate(), destroy: () => set.destroy() };
}

// Per node and bucket, the most any of its GPUs held (from the small multiples' own data).
function nodeMax(series, nodes) {
  const list = nodes.map((node) => {
    const mine = series.filter((s) => s.labels.node === node);
    const byTs = new Map();
    for (const s of mine) s.ts.forEach((t, i) => Number.isFinite(s.last[i]) && byTs.set(t, Math.max(byTs.get(t) ?? -Infinity, s.last[i])));
    const ts = Array.from(byTs.keys()).sort((a, b) => a - b);
    return { node, ts, last: ts.map((t) => byTs.get(t)) };
  });
  return lines(list, (s) => s.node);
}

// The run's nodes that report GPU metrics (from the series catalogue, no samples read).
async function multiNodes(run, ctx) {
  const series = await api("/series" + qs({ name: "gpu.util_pct", run }), { signal: ctx.signal });
  const nodes = Array.from(new Set(series.map((s) => s.labels.node).filter(Boolean))).sort(byLabel);
  return { nodes };
}
