// What chart views share: the range toolbar and a set of chart panels refreshed together.

import { el, fmtTime } from "../util.js";
import { ChartPanel } from "../chart.js";

// The toolbar line: the range shown, live or fixed, and a reset when zoomed.
export function rangeBar(ctx, ...extra) {
  const text = el("span", { class: "muted", dataset: { range: "" } });
  const reset = el("button", { type: "button", onclick: () => ctx.resetZoom(), title: "show the whole run (z)" }, "Reset zoom");
  const update = () => {
    const r = ctx.range();
    text.textContent = fmtTime(r.start) + " – " + (r.live ? "now (live)" : fmtTime(r.end));
    reset.hidden = ctx.params.from === undefined && ctx.params.to === undefined;
  };
  update();
  ctx.rangeListeners.push(update);
  return el("div", { class: "toolbar" }, text, reset, ...extra);
}

// Panels that load for ctx.range(), zoom on drag and reset on double-click; refresh() refetches.
export function panels(ctx) {
  const list = [];
  let annotations = [];
  const api = {
    list,
    add(parent, opts) {
      const defaults = { onRange: (a, b) => ctx.zoom(a, b), onReset: () => ctx.resetZoom(), annotations, sync: ctx.name };
      const p = new ChartPanel(parent, Object.assign(defaults, opts));
      list.push(p);
      return p;
    },
    async refresh() {
      const range = ctx.range();
      await Promise.all(list.map((p) => p.update(range, ctx.signal)));
    },
    async annotate() {
      annotations = await ctx.annotations();
      list.forEach((p) => p.setAnnotations(annotations));
    },
    destroy() {
      list.forEach((p) => p.destroy());
    },
  };
  return api;
}
