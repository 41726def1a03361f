// Logs: search and filter by node, rank and level (in the store), tracebacks folded, and a
// window around a moment (?at=ts, as alerts link here) with the nearest line marked.

import { api, qs } from "../api.js";
import { el, fmtTime } from "../util.js";

const LEVELS = ["", "debug", "info", "warning", "error", "critical"];
const AROUND_S = 120;
const LIMIT = 1000;

function line(e, hit) {
  const level = (e.data && e.data.level) || "";
  const labels = e.labels || {};
  const text = e.data && e.data.traceback
    ? el("details", {}, el("summary", { text: (e.data.exception || e.text.split("\n").slice(-1)[0] || "traceback") + ` (${e.data.lines || e.text.split("\n").length} lines)` }), el("pre", { class: "log-text", text: e.text }))
    : el("pre", { class: "log-text", text: e.text });
  const toggle = (ev) => {
    const fold = text.tagName === "DETAILS" ? text : null;
    if (fold && !fold.contains(ev.target)) fold.open = !fold.open; // Enter on a selected row
  };
  return el(
    "div",
    { class: "row" + (hit ? " hit selected" : ""), dataset: { row: "", ts: e.ts }, onclick: toggle },
    el("span", { class: "muted", text: fmtTime(e.ts) }),
    el("span", { text: labels.node || "" }),
    el("span", { text: labels.rank !== undefined ? "rank " + labels.rank : "" }),
    el("span", { class: "lvl-" + level, text: level }),
    text,
  );
}

export async function render(root, ctx) {
  const p = ctx.params;
  const at = p.at !== undefined ? Number(p.at) : null;
  const q = el("input", { type: "search", placeholder: "search text (/)", value: p.q || "", dataset: { search: "" }, "aria-label": "search logs" });
  const node = el("input", { type: "text", placeholder: "node", value: p.node || "", size: 10, "aria-label": "node" });
  const rank = el("input", { type: "text", placeholder: "rank", value: p.rank || "", size: 5, "aria-label": "rank" });
  const level = el("select", { "aria-label": "level" }, LEVELS.map((l) => el("option", { value: l, text: l || "any level" })));
  level.value = p.level || "";
  const apply = () => ctx.set({ q: q.value, node: node.value, rank: rank.value, level: level.value });
  for (const input of [q, node, rank]) input.addEventListener("keydown", (e) => e.key === "Enter" && apply());
  level.addEventListener("change", apply);
  const around = at !== null ? el("span", { class: "muted" }, `±${AROUND_S / 60} min around ${fmtTime(at)} `, el("button", { type: "button", onclick: () => ctx.set({ at: null }) }, "all times")) : null;
  const list = el("div", { class: "logs panel", dataset: { logs: "" } });
  root.append(el("h2", { text: "Logs · " + (ctx.run.name || ctx.run.id) }), el("div", { class: "toolbar" }, q, node, rank, level, el("button", { type: "button", onclick: apply }, "Search"), around), list);

  async function load() {
    const range = ctx.range();
    const start = at !== null ? at - AROUND_S : p.from !== undefined ? range.start : null;
    const end = at !== null ? at + AROUND_S : p.to !== undefined ? range.end : null;
    const events = (await api("/logs" + qs({ run: ctx.run.id, q: p.q, node: p.node, rank: p.rank, level: p.level, start, end, limit: LIMIT }), { signal: ctx.signal })) || [];
    let nearest = -1;
    if (at !== null) events.forEach((e, i) => (nearest = nearest < 0 || Math.abs(e.ts - at) < Math.abs(events[nearest].ts - at) ? i : nearest));
    const opened = new Set(Array.from(list.querySelectorAll("details[open]"), (d) => d.closest("[data-ts]").dataset.ts));
    list.replaceChildren(...events.map((e, i) => line(e, i === nearest)));
    for (const row of list.querySelectorAll("[data-ts]")) if (opened.has(row.dataset.ts)) row.querySelector("details").open = true;
    if (!events.length) list.append(el("p", { class: "empty", text: "No log lines match." }));
    const hit = list.querySelector(".hit");
    if (hit && !opened.size) hit.scrollIntoView({ block: "center" });
  }
  await load();
  return {
    live: "events",
    liveKinds: ["log"],
    refresh: at === null ? load : undefined,
    escape: () => list.querySelectorAll("details[open]").forEach((d) => (d.open = false)),
  };
}
