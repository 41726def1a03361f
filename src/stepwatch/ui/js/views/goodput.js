// Where a run's wall time went, as the forecast's goodput says: one stacked horizontal bar for
// the run and one per node, productive time beside each kind of badput, with a legend giving
// the run's seconds and share of each, and each segment's on hover.

import { el, fmtDuration } from "../util.js";

// The buckets of a goodput answer, in the order drawn; `cls` colours them (app.css).
export const BUCKETS = [
  { key: "productive_s", label: "productive", cls: "gp-productive" },
  { key: "startup_s", label: "start-up", cls: "gp-startup" },
  { key: "data_wait_s", label: "data wait", cls: "gp-data" },
  { key: "evaluation_s", label: "evaluation", cls: "gp-eval" },
  { key: "checkpoint_s", label: "checkpoints", cls: "gp-ckpt" },
  { key: "stalls_s", label: "stalls", cls: "gp-stall" },
  { key: "lost_s", label: "lost to restarts", cls: "gp-lost" },
];

const share = (s, wall) => (wall > 0 ? (100 * s) / wall : 0);
const says = (b, s, wall) => b.label + ": " + fmtDuration(s) + " (" + share(s, wall).toFixed(1) + " %)";

// One bar: a segment per bucket with time in it, its width the bucket's share of the wall time.
function bar(name, spent) {
  const wall = spent.wall_s || 0;
  const parts = BUCKETS.filter((b) => (spent[b.key] || 0) > 0).map((b) =>
    el("span", { class: "gp-seg " + b.cls, dataset: { bucket: b.key, seconds: String(spent[b.key]) }, title: says(b, spent[b.key], wall), style: `width:${share(spent[b.key], wall).toFixed(2)}%` }),
  );
  const good = share(spent.productive_s || 0, wall);
  return el(
    "div",
    { class: "gp-row", dataset: { goodput: name } },
    el("span", { class: "gp-name", text: name }),
    el("div", { class: "gp-bar", role: "img", "aria-label": name + ": " + good.toFixed(0) + " % productive" }, parts),
    el("span", { class: "gp-share muted", text: good.toFixed(0) + " % of " + fmtDuration(wall) }),
  );
}

// The panel; show(goodput, byNode) draws the run's bar and each node's (null: none known yet).
export function goodputPanel(parent) {
  const body = el("div", {}, el("p", { class: "empty", text: "Asking the collector…" }));
  const root = el("div", { class: "panel", dataset: { goodputPanel: "" } }, el("h3", { text: "Where the time went" }), body);
  parent.append(root);
  return {
    show(spent, byNode) {
      if (!spent) {
        body.replaceChildren(el("p", { class: "empty", text: "Not known yet: it takes two steps." }));
        return;
      }
      const legend = el(
        "ul",
        { class: "gp-legend" },
        BUCKETS.map((b) => el("li", { dataset: { bucket: b.key } }, el("span", { class: "gp-swatch " + b.cls }), says(b, spent[b.key] || 0, spent.wall_s || 0))),
      );
      const nodes = Object.entries(byNode || {}).map(([node, s]) => bar(node, s));
      body.replaceChildren(bar("run", spent), ...nodes, legend);
    },
  };
}
