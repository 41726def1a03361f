// Run overview: loss, learning rate, gradient norm and tokens/s with EMA smoothing, alert
// annotations, x axis by step or time, drag to zoom; the run's forecast (the loss cone on the
// loss chart while the run is followed live, ETA, final loss, chance of success), where its
// time went, the advice its data supports, and its profiler traces.

import { el } from "../util.js";
import { multi, primary, single } from "../data.js";
import { panels, rangeBar } from "./common.js";
import { advicePanel } from "./advice.js";
import { forecastPanel, runInsights, withCone } from "./forecast.js";
import { goodputPanel } from "./goodput.js";
import { profilesPanel } from "./profiles.js";
import { listIncidents } from "./incidents.js";

export const METRICS = [
  { id: "train.loss", title: "Loss", smooth: true },
  { id: "train.lr", title: "Learning rate" },
  { id: "train.grad_norm", title: "Gradient norm", smooth: true },
  { id: "train.tokens_per_s", title: "Tokens/s", smooth: true },
  { id: "train.step_time_s", title: "Step time (rank 0), s", smooth: true },
];
const DEFAULT = METRICS.slice(0, 4).map((m) => m.id);

export async function render(root, ctx) {
  const p = ctx.params;
  const xMode = p.x === "time" ? "time" : "step";
  const weight = Math.min(0.99, Math.max(0, Number(p.smooth ?? 0.6)));
  const shown = new Set(p.series ? p.series.split(",") : DEFAULT);

  const slider = el("input", { type: "range", min: 0, max: 0.99, step: 0.01, value: weight, "aria-label": "smoothing" });
  const sliderValue = el("span", { text: weight.toFixed(2) });
  const xSelect = el("select", { "aria-label": "x axis" }, el("option", { value: "step", text: "step" }), el("option", { value: "time", text: "time" }));
  xSelect.value = xMode;
  const picks = METRICS.map((m) => {
    const box = el("input", { type: "checkbox", value: m.id });
    box.checked = shown.has(m.id);
    box.addEventListener("change", () => {
      const next = METRICS.map((x) => x.id).filter((id) => (id === m.id ? box.checked : shown.has(id)));
      ctx.set({ series: next.join(",") });
    });
    return el("label", {}, box, m.title);
  });
  // A link to the run's incidents, once it is known to have any.
  const incidentsLink = el("a", { class: "overview-links", href: "#/incidents?run=" + encodeURIComponent(ctx.run.id), dataset: { action: "incidents" }, hidden: true }, "incidents of this run");
  listIncidents({ run: ctx.run.id }, ctx.signal)
    .then((got) => (incidentsLink.hidden = !(got && got.length)))
    .catch(() => {}); // only a link: the rest of the page reports what fails
  root.append(
    el("h2", {}, "Overview · " + (ctx.run.name || ctx.run.id), incidentsLink),
    rangeBar(ctx, el("label", {}, "Smoothing", slider, sliderValue), el("label", {}, "x axis", xSelect)),
    el("div", { class: "toolbar" }, picks),
  );
  const top = el("div", { class: "grid2 section" });
  const grid = el("div", { class: "grid2" });
  const below = el("div", { class: "section profiles-section" }); // under the charts: its list moves none of them
  root.append(top, grid, below);
  const forecast = forecastPanel(top);
  const goodput = goodputPanel(top);
  const advice = advicePanel(top);
  const profiles = profilesPanel(below, ctx);
  // The forecast's panels from the answers that came; a refusal of either is reported.
  function showInsights({ forecast: fc, advice: adv }) {
    if (ctx.signal.aborted) return;
    if (fc.status === "fulfilled") {
      forecast.show(fc.value, ctx.run);
      goodput.show(fc.value.goodput, fc.value.goodput_by_node);
    }
    if (adv.status === "fulfilled") advice.show(adv.value);
    const failed = [fc, adv].find((r) => r.status === "rejected");
    if (failed) throw failed.reason;
  }
  // The charts and the panels (the loss chart's cone reads the forecast loaded first).
  async function refresh() {
    const asked = insights.load(ctx.signal);
    const done = await Promise.allSettled([set.refresh(), asked.then(showInsights), profiles.refresh()]);
    const failed = done.find((r) => r.status === "rejected");
    if (failed) throw failed.reason;
  }
  const insights = runInsights(ctx.run.id, () => refresh().catch(ctx.error));
  // The loss cone is drawn past the data while the running run is followed live.
  const coneOf = (m, range) => (m.id === "train.loss" && range.live ? insights.forecast() : null);
  const set = panels(ctx);
  for (const m of METRICS.filter((x) => shown.has(x.id))) {
    set.add(grid, {
      id: m.id,
      title: m.title,
      xMode,
      smoothing: m.smooth ? weight : 0,
      load: async (range, points, signal) => {
        const [found, fc] = await Promise.all([multi({ name: m.id, run: ctx.run.id, range, points, signal }), coneOf(m, range)]);
        return withCone(single(primary(found), { label: m.title, xMode, smooth: !!m.smooth }), fc, xMode);
      },
    });
  }
  slider.addEventListener("input", () => {
    const w = Number(slider.value);
    sliderValue.textContent = w.toFixed(2);
    set.list.forEach((panel, i) => METRICS.filter((x) => shown.has(x.id))[i].smooth && panel.setSmoothing(w));
    ctx.set({ smooth: w.toFixed(2) }, { rerender: false });
  });
  xSelect.addEventListener("change", () => ctx.set({ x: xSelect.value }));
  await Promise.all([refresh().catch(ctx.error), set.annotate()]);
  return {
    refresh,
    annotate: () => set.annotate(),
    destroy() {
      insights.stop();
      set.destroy();
    },
  };
}
