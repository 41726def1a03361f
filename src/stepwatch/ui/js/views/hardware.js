// Hardware: GPU utilization, memory, temperature and power per node (one line per GPU) as
// small multiples, GPU memory trend by node, and host CPU, memory, network and disk.

import { el, byLabel, unitOf } from "../util.js";
import { multi, lines } from "../data.js";
import { panels, rangeBar } from "./common.js";

const GPU = [
  { id: "gpu.util_pct", title: "GPU utilization %" },
  { id: "gpu.mem_used_bytes", title: "GPU memory used" },
  { id: "gpu.temp_c", title: "GPU temperature °C" },
  { id: "gpu.power_w", title: "GPU power W" },
];
const HOST = [
  { id: "host.cpu_pct", title: "CPU %" },
  { id: "host.mem_used_bytes", title: "Memory used" },
  { id: "host.net_rx_bytes_per_s", title: "Network receive" },
  { id: "host.net_tx_bytes_per_s", title: "Network transmit" },
  { id: "host.disk_write_bytes_per_s", title: "Disk write" },
];

// One request per range serves every small multiple (about the same width), another the hosts.
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

// About the width of one small multiple (grid of 240 px minimum columns), before it exists.
function smallWidth(root) {
  const width = root.clientWidth || 1200;
  const cols = Math.max(1, Math.floor((width + 8) / 248));
  return Math.max(32, Math.round((width - (cols - 1) * 8) / cols - 22));
}

// About the width of one chart of a two-column grid (460 px minimum columns).
function wideWidth(root) {
  const width = root.clientWidth || 1200;
  const cols = Math.max(1, Math.floor((width + 12) / 472));
  return Math.max(32, Math.round((width - (cols - 1) * 12) / cols - 22));
}

export async function render(root, ctx) {
  const run = ctx.run.id;
  root.append(el("h2", { text: "Hardware · " + (ctx.run.name || ctx.run.id) }), rangeBar(ctx));
  // Both requests start now; the nodes to lay out come with the GPU answer.
  const gpuLoad = shared((range, points, signal) => multi({ name: GPU.map((m) => m.id), run, range, points, signal, fields: "last" }));
  const hostLoad = shared((range, points, signal) => multi({ name: HOST.map((m) => m.id), run, range, points, signal, fields: "last" }));
  const of = (load, name) => async (range, points, signal) => (await load(range, points, signal)).filter((s) => s.name === name);
  const range = ctx.range();
  hostLoad(range, wideWidth(root), ctx.signal).catch(() => null); // errors surface from the panels
  const first = await gpuLoad(range, smallWidth(root), ctx.signal);
  const nodes = Array.from(new Set(first.map((s) => s.labels.node).filter(Boolean))).sort(byLabel);
  const set = panels(ctx);
  if (!nodes.length) root.append(el("p", { class: "empty", text: "No GPU metrics for this run in this range." }));
  const memory = of(gpuLoad, "gpu.mem_used_bytes");
  for (const m of GPU) {
    const load = of(gpuLoad, m.id);
    const gpusOf = {};
    const section = el("div", { class: "section" }, el("h2", { text: m.title }));
    const grid = el("div", { class: "grid-small" });
    section.append(grid);
    root.append(section);
    for (const node of nodes) {
      set.add(grid, {
        id: `${m.id}:${node}`,
        title: node,
        unit: unitOf(m.id),
        height: 140,
        legend: false,
        load: async (range, points, signal) => {
          gpusOf[node] = (await load(range, points, signal)).filter((s) => s.labels.node === node).sort((a, b) => byLabel(a.labels.gpu, b.labels.gpu));
          return lines(gpusOf[node], (s) => "gpu " + s.labels.gpu);
        },
        // A click drills into the GPU under the cursor against its peers.
        onPick: (i) => gpusOf[node][i] && ctx.go("node", { metric: m.id, node, gpu: gpusOf[node][i].labels.gpu }),
      });
    }
  }
  const trend = el("div", { class: "section" }, el("h2", { text: "GPU memory by node (fullest GPU)" }));
  root.append(trend);
  set.add(trend, {
    id: "gpu.mem_used_bytes:by-node",
    unit: unitOf("gpu.mem_used_bytes"),
    height: 200,
    load: async (range, points, signal) => nodeMax(await memory(range, points, signal), nodes),
  });
  const host = el("div", { class: "section" }, el("h2", { text: "Hosts" }));
  const hostGrid = el("div", { class: "grid2" });
  host.append(hostGrid);
  root.append(host);
  for (const m of HOST) {
    const load = of(hostLoad, m.id);
    set.add(hostGrid, {
      id: m.id,
      title: m.title,
      unit: unitOf(m.id),
      height: 180,
      load: async (range, points, signal) => {
        const list = (await load(range, points, signal)).sort((a, b) => byLabel(a.labels.node, b.labels.node));
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
