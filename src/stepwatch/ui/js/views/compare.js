// Compare runs: one metric of two or more runs overlaid, by step or by time since each start.

import { el } from "../util.js";
import { multi, primary } from "../data.js";
import { align } from "../chart.js";
import { METRICS } from "./overview.js";
import { panels } from "./common.js";

export async function render(root, ctx) {
  const p = ctx.params;
  const summaries = ctx.summaries;
  // Without a choice yet, the run being looked at is the first one.
  const chosen = (p.runs ?? p.run ?? "").split(",").filter((id) => summaries.some((r) => r.id === id));
  const metric = METRICS.some((m) => m.id === p.metric) ? p.metric : METRICS[0].id;
  const xMode = p.x === "time" ? "time" : "step";
  const metricSel = el("select", { "aria-label": "metric" }, METRICS.map((m) => el("option", { value: m.id, text: m.title })));
  metricSel.value = metric;
  metricSel.addEventListener("change", () => ctx.set({ metric: metricSel.value }));
  const xSel = el("select", { "aria-label": "x axis" }, el("option", { value: "step", text: "step" }), el("option", { value: "time", text: "time since start" }));
  xSel.value = xMode;
  xSel.addEventListener("change", () => ctx.set({ x: xSel.value }));
  const boxes = summaries.map((r) => {
    const box = el("input", { type: "checkbox", value: r.id });
    box.checked = chosen.includes(r.id);
    box.addEventListener("change", () => {
      const next = summaries.filter((x) => (x.id === r.id ? box.checked : chosen.includes(x.id))).map((x) => x.id);
      ctx.set({ runs: next.join(",") });
    });
    return el("label", { dataset: { runId: r.id } }, box, r.name || r.id);
  });
  root.append(
    el("h2", { text: "Compare runs" }),
    el("div", { class: "toolbar" }, el("label", {}, "Metric", metricSel), el("label", {}, "x axis", xSel)),
    el("div", { class: "toolbar" }, boxes.length ? boxes : el("span", { class: "empty", text: "No runs yet." })),
  );
  if (chosen.length < 2) {
    root.append(el("p", { class: "empty", text: chosen.length ? "Pick another run to overlay." : "Pick two or more runs to overlay." }));
    return {};
  }
  const set = panels(ctx);
  // The newest summaries: live data moves each run's end.
  const current = () => chosen.map((id) => ctx.summaries.find((r) => r.id === id) || summaries.find((r) => r.id === id));
  const title = METRICS.find((m) => m.id === metric).title;
  set.add(root, {
    id: "compare:" + metric,
    title: title + (xMode === "step" ? " by step" : " by time since start (s)"),
    xMode: "value",
    xLabel: xMode === "step" ? "step" : "seconds since start",
    height: 360,
    onRange: null,
    onReset: null,
    load: async (_range, points, signal) => {
      const runs = current();
      const got = await Promise.all(
        runs.map(async (r) => {
          const range = { start: r.start, end: Math.max(r.last_ts || r.start, r.start + 1) };
          return primary(await multi({ name: metric, run: r.id, range, points, signal }));
        }),
      );
      const items = got.map((s, i) => {
        if (!s) return { ts: [], cols: { v: [] } };
        if (xMode === "time") return { ts: s.ts.map((t) => Math.round(t - runs[i].start)), cols: { v: s.last } };
        const keep = s.step.map((st, k) => k).filter((k) => s.step[k] !== null);
        return { ts: keep.map((k) => s.step[k]), cols: { v: keep.map((k) => s.last[k]) } };
      });
      const { x, cols } = align(items);
      return { x, ts: x, series: runs.map((r, i) => ({ label: r.name || r.id, values: cols[i].v, spanGaps: true })) };
    },
  });
  // The chart spans the runs' lives (each run is fetched over its own).
  const span = () => {
    const runs = current();
    return { start: Math.min(...runs.map((r) => r.start)), end: Math.max(...runs.map((r) => r.last_ts || r.start)) };
  };
  const refresh = () => set.list[0].update(span(), ctx.signal);
  await refresh();
  return { refresh, destroy: () => set.destroy() };
}
