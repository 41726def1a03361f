// A run's profiler trace, analysed by the collector (`stepwatch trace` on the kept file):
// where the step's time went (a bar), the profiled step as a timeline, the operators (and
// kernels) by self time, and the advice; a second trace (another rank) beside it, on the
// same time scale. Without a trace chosen, the run's traces to pick from.

import { el, fmtNum } from "../util.js";
import { shares } from "./goodput.js";
import { analysis, downloadLink, listProfiles, profileLabel, profileList, rankOf, stepsOf } from "./profiles.js";
import { KINDS, drawTimeline, fmtUs, timeScale } from "./tracetimeline.js";

// Operator rows shown before "show all".
const TOP_ROWS = 25;
const PARTS = [
  { key: "compute", label: "compute", cls: "tb-compute" },
  { key: "comm", label: "communication", cls: "tb-comm" },
  { key: "memcpy", label: "memory copies", cls: "tb-memcpy" },
  { key: "idle", label: "idle", cls: "tb-idle" },
];
const COLUMNS = [
  { key: "name", label: "name", num: false },
  { key: "self_us", label: "self time", num: true },
  { key: "calls", label: "calls", num: true },
  { key: "share", label: "share", num: true },
  { key: "kind", label: "kind", num: false },
];

const pct = (x) => (100 * x).toFixed(1) + " %";

// Where the time went: a segment per part, its width the part's share of the capacity (the
// span on every GPU, or on the training thread).
function breakdownBar(a, id) {
  const capacity = (a.span_s || 0) * Math.max(a.devices || 0, 1);
  const split = shares(PARTS, a.breakdown, capacity, (s) => fmtUs(s * 1e6), "part");
  const where = a.basis === "gpu" ? `on ${a.devices} GPU${a.devices === 1 ? "" : "s"}` : "on the training thread (no GPU events: the CPU basis)";
  return el(
    "div",
    { class: "trace-breakdown", dataset: { breakdown: id, basis: a.basis } },
    el("div", { class: "muted", text: `Time ${where}, over ${fmtUs((a.span_s || 0) * 1e6)} (${a.steps} profiled step${a.steps === 1 ? "" : "s"})` }),
    split.bar(PARTS.map(split.says).join(", ")),
    split.legend(),
  );
}

// Operators (or kernels) by self time: sortable by a click on a column's head, the top rows
// first and the rest on demand.
function statTable(title, stats, id, kind) {
  const state = { key: "self_us", desc: true, all: false };
  const box = el("div", { class: "trace-table" });
  function draw() {
    const sorted = stats.slice().sort((x, y) => {
      const a = x[state.key];
      const b = y[state.key];
      const c = typeof a === "string" ? a.localeCompare(b) : a - b;
      return state.desc ? -c : c;
    });
    const shown = state.all ? sorted : sorted.slice(0, TOP_ROWS);
    const head = el(
      "tr",
      {},
      COLUMNS.map((c) =>
        el(
          "th",
          {
            class: c.num ? "num sortable" : "sortable",
            dataset: { sort: c.key },
            "aria-sort": state.key === c.key ? (state.desc ? "descending" : "ascending") : "none",
            title: "sort by " + c.label,
            onclick: () => {
              state.desc = state.key === c.key ? !state.desc : c.num;
              state.key = c.key;
              draw();
            },
          },
          c.label + (state.key === c.key ? (state.desc ? " ▾" : " ▴") : ""),
        ),
      ),
    );
    const rows = shown.map((s) =>
      el(
        "tr",
        { dataset: { op: s.name } },
        el("td", { class: "op-name", text: s.name, title: s.name }),
        el("td", { class: "num", text: fmtUs(s.self_us) }),
        el("td", { class: "num", text: s.calls.toLocaleString() }),
        el("td", { class: "num", text: pct(s.share) }),
        el("td", { class: "muted", text: s.kind }),
      ),
    );
    const more = stats.length > TOP_ROWS ? el("button", { type: "button", onclick: () => ((state.all = !state.all), draw()) }, state.all ? "show the top " + TOP_ROWS : "show all " + stats.length.toLocaleString()) : null;
    box.replaceChildren(el("h3", { text: title }), el("table", { class: "list trace-ops", dataset: { [kind]: id } }, el("thead", {}, head), el("tbody", {}, rows)), more);
  }
  draw();
  return box;
}

function advice(items) {
  if (!items.length) return el("p", { class: "empty", text: "No advice: nothing in this trace argues for a change." });
  return el(
    "ol",
    { class: "advice" },
    items.map((a) =>
      el(
        "li",
        { class: "advice-item", dataset: { traceAdvice: "", kind: a.kind } },
        el("strong", { text: a.kind }),
        el("p", { text: a.message }),
        el("ul", { class: "measures muted" }, Object.entries(a.numbers || {}).map(([k, v]) => el("li", {}, el("code", { text: k }), " " + fmtNum(v)))),
      ),
    ),
  );
}

// One trace's column: what it is, its bar, timeline, tables and advice.
function pane(parent, runId, a, scale) {
  const p = a.profile;
  const t = a.timeline;
  const root = el("div", { class: "panel trace-pane", dataset: { trace: p.id } });
  parent.append(root);
  const step = t.step ? `${t.step}, ${fmtUs(t.dur_us)}` : `the whole trace (no ProfilerStep), ${fmtUs(t.dur_us)}`;
  const capped = t.capped ? ` · the ${t.spans.length.toLocaleString()} longest of ${t.spans_in_step.toLocaleString()} spans` : ` · ${t.spans.length.toLocaleString()} spans`;
  const world = a.world_size ? ` of ${a.world_size}` : "";
  root.append(
    el("h3", {}, `Rank ${rankOf(p)}${world} · ${stepsOf(p)} · ${a.events.toLocaleString()} events `, downloadLink(runId, p)),
    breakdownBar(a, p.id),
    el("h3", { class: "trace-sub", text: "Timeline: " + step + capped }),
  );
  const timeline = drawTimeline(root, t, scale, p.id);
  root.append(statTable("Operators by self time", a.ops, p.id, "ops"));
  if (a.kernels.length) root.append(statTable("Kernels by time", a.kernels, p.id, "kernels"));
  root.append(el("h3", { text: "Advice" }), advice(a.advice || []));
  return timeline;
}

export async function render(root, ctx) {
  const p = ctx.params;
  const runId = ctx.run.id;
  const list = (await listProfiles(runId, ctx.signal)) || [];
  root.append(el("h2", { text: "Trace · " + (ctx.run.name || runId) }));
  const chosen = list.find((x) => x.id === p.profile);
  if (!chosen) {
    if (p.profile) root.append(el("p", { class: "empty", text: `Run ${runId} has no trace ${p.profile} (the oldest are dropped).` }));
    const traces = profileList(runId, list);
    root.append(list.length ? el("div", { class: "panel", dataset: { profiles: "" } }, el("h3", { text: "Pick a trace" }), traces) : traces);
    return {};
  }
  const others = list.filter((x) => x.id !== chosen.id);
  const second = others.find((x) => x.id === p.vs) || null;
  const pick = el("select", { "aria-label": "trace", dataset: { pick: "trace" } }, list.map((x) => el("option", { value: x.id, text: profileLabel(x) })));
  pick.value = chosen.id;
  pick.addEventListener("change", () => ctx.set({ profile: pick.value, vs: pick.value === p.vs ? null : p.vs }));
  const tools = [el("label", {}, "Trace", pick)];
  if (others.length) {
    const ranks = new Set(list.map((x) => String(x.rank)));
    const vs = el("select", { "aria-label": "second trace", dataset: { pick: "vs" } }, el("option", { value: "", text: "(none)" }), others.map((x) => el("option", { value: x.id, text: profileLabel(x) })));
    vs.value = second ? second.id : "";
    vs.addEventListener("change", () => ctx.set({ vs: vs.value }));
    tools.push(el("label", { title: ranks.size > 1 ? "another rank's trace, on the same time scale" : "another trace, on the same time scale" }, "Beside it", vs));
  }
  const legend = el("ul", { class: "gp-legend trace-legend" }, KINDS.map((k) => el("li", {}, el("span", { class: "gp-swatch", style: `background:var(${k.color})` }), k.label)));
  root.append(el("div", { class: "toolbar" }, tools, el("span", { class: "muted", text: "drag across a timeline to zoom, double-click to see the whole step" })), legend);
  const status = el("p", { class: "empty", text: "Analysing the trace…" });
  root.append(status);
  const shown = [chosen, second].filter(Boolean);
  const answers = await Promise.all(shown.map((x) => analysis(runId, x.id, ctx.signal)));
  status.remove();
  if (ctx.signal.aborted) return {};
  const scale = timeScale(Math.max(...answers.map((a) => a.timeline.dur_us)));
  const cols = el("div", { class: "trace-cols" + (answers.length > 1 ? " two" : ""), dataset: { traces: String(answers.length) } });
  root.append(cols);
  const timelines = answers.map((a) => pane(cols, runId, a, scale));
  return {
    escape: () => scale.reset(),
    destroy: () => timelines.forEach((t) => t.destroy()),
  };
}
