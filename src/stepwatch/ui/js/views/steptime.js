// Step time: P50/P90/P99 across ranks over time, and the data/compute/comm breakdown (medians).

import { el } from "../util.js";
import { percentiles, quantileLines } from "../data.js";
import { panels, rangeBar } from "./common.js";

const PARTS = [
  { id: "train.data_time_s", label: "data" },
  { id: "train.compute_time_s", label: "compute" },
  { id: "train.comm_time_s", label: "comm" },
];

export async function render(root, ctx) {
  const run = ctx.run.id;
  root.append(el("h2", { text: "Step time · " + (ctx.run.name || ctx.run.id) }), rangeBar(ctx));
  const grid = el("div", { class: "grid2" });
  root.append(grid);
  const set = panels(ctx);
  set.add(grid, {
    id: "train.step_time_s",
    title: "Step time across ranks, s (P50 / P90 / P99)",
    height: 260,
    load: async (range, points, signal) => {
      const groups = await percentiles({ name: "train.step_time_s", run, range, points, q: [0.5, 0.9, 0.99], signal });
      return quantileLines(groups, (g, q) => "P" + Math.round(Number(q) * 100));
    },
  });
  set.add(grid, {
    id: "steptime.breakdown",
    title: "Breakdown: median across ranks, s",
    height: 260,
    load: async (range, points, signal) => {
      const got = await Promise.all(PARTS.map((part) => percentiles({ name: part.id, run, range, points, q: [0.5], signal })));
      const groups = got.map((g, i) => Object.assign(g[0] || { ts: [], q: { 0.5: [] } }, { part: PARTS[i].label }));
      return quantileLines(groups, (g) => g.part);
    },
  });
  await Promise.all([set.refresh(), set.annotate()]);
  return { refresh: () => set.refresh(), annotate: () => set.annotate(), destroy: () => set.destroy() };
}
