// Where a run's wall time went, as the forecast's goodput says: one stacked horizontal bar for
// the run and one per node, productive time beside each kind of badput, with a legend giving
// the run's seconds and share of each, and each segment's on hover. The stacked bar itself
// (shares) draws the trace view's breakdown too.

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

// Parts of a whole as a stacked bar: parts {key, label, cls (its colour)} with their seconds
// in values[key], of `total` seconds, written by `fmt`; `attr` is the data attribute naming a
// part on its segment and legend line. share(s): s as a percentage of the total; says(part):
// its time and share; bar(label): a segment per part with time in it, as wide as its share,
// says() on hover, `label` read aloud; legend(): a line per part.
export function shares(parts, values, total, fmt, attr) {
  const seconds = (p) => values[p.key] || 0;
  const share = (s) => (total > 0 ? (100 * s) / total : 0);
  const says = (p) => p.label + ": " + fmt(seconds(p)) + " (" + share(seconds(p)).toFixed(1) + " %)";
  const segment = (p) => el("span", { class: "gp-seg " + p.cls, dataset: { [attr]: p.key, seconds: String(seconds(p)) }, title: says(p), style: `width:${share(seconds(p)).toFixed(2)}%` });
  return {
    share,
    says,
    bar: (label) => el("div", { class: "gp-bar", role: "img", "aria-label": label }, parts.filter((p) => seconds(p) > 0).map(segment)),
    legend: () => el("ul", { class: "gp-legend" }, parts.map((p) => el("li", { dataset: { [attr]: p.key } }, el("span", { class: "gp-swatch " + p.cls }), says(p)))),
  };
}

// A goodput answer's buckets, as shares of its wall time.
const spentShares = (spent) => shares(BUCKETS, spent, spent.wall_s || 0, fmtDuration, "bucket");

// One bar, named, with its productive share beside it.
function bar(name, spent) {
  const split = spentShares(spent);
  const good = split.share(spent.productive_s || 0);
  return el(
    "div",
    { class: "gp-row", dataset: { goodput: name } },
    el("span", { class: "gp-name", text: name }),
    split.bar(name + ": " + good.toFixed(0) + " % productive"),
    el("span", { class: "gp-share muted", text: good.toFixed(0) + " % of " + fmtDuration(spent.wall_s || 0) }),
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
      const nodes = Object.entries(byNode || {}).map(([node, s]) => bar(node, s));
      body.replaceChildren(bar("run", spent), ...nodes, spentShares(spent).legend());
    },
  };
}
