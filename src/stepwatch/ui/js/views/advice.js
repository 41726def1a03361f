// The run's advice: each item's title, why, the measurements behind it and the change it
// suggests (a setting from one value to another, or an action); a healthy run gets none.

import { el, fmtNum } from "../util.js";

const stated = (v) => (v === null || v === undefined ? "not stated" : String(v));

// A change as a sentence: "num_workers: 2 → 3 (×1.43)", a second setting after "and", or the
// action to take.
export function changeText(change) {
  if (!change) return "";
  if (change.action) return change.action;
  const scale = change.scale === null || change.scale === undefined ? "" : " (×" + fmtNum(change.scale) + ")";
  const to = change.to === null || change.to === undefined ? "" : " → " + String(change.to);
  const first = change.setting + ": " + stated(change.from) + to + scale;
  return change.and ? first + "; and " + changeText(change.and) : first;
}

function item(a) {
  const measures = Object.entries(a.measurements || {}).map(([k, v]) => el("li", {}, el("code", { text: k }), " " + fmtNum(v)));
  return el(
    "li",
    { class: "advice-item", dataset: { advice: "", kind: a.kind } },
    el("strong", { text: a.title }),
    el("p", { text: a.why }),
    el("ul", { class: "measures muted", "aria-label": "measurements" }, measures),
    el("p", { class: "change" }, el("span", { class: "muted", text: "Suggested: " }), changeText(a.change)),
  );
}

// The panel; show(answer) draws the items of an /advice answer.
export function advicePanel(parent) {
  const body = el("div", {}, el("p", { class: "empty", text: "Asking the collector…" }));
  const root = el("div", { class: "panel", dataset: { advicePanel: "" } }, el("h3", { text: "Advice" }), body);
  parent.append(root);
  return {
    show(answer) {
      const items = (answer && answer.advice) || [];
      body.replaceChildren(items.length ? el("ol", { class: "advice" }, items.map(item)) : el("p", { class: "empty", text: "No advice: nothing in the run's data argues for a change." }));
    },
  };
}
