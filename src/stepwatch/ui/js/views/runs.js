// Runs: every run with status, progress, ETA, throughput, open alerts and last update;
// search by name, filter by status, pick runs to compare.

import { api } from "../api.js";
import { el, fmtAgo, fmtDuration, fmtNum } from "../util.js";

const STATUSES = ["", "running", "finished", "failed", "killed"];

function row(run, ctx, chosen) {
  const progress = run.progress ?? null;
  const pick = el("input", { type: "checkbox", title: "compare", "aria-label": "compare " + run.id, onclick: (e) => e.stopPropagation() });
  pick.checked = chosen.has(run.id);
  pick.addEventListener("change", () => (pick.checked ? chosen.add(run.id) : chosen.delete(run.id)));
  return el(
    "tr",
    { dataset: { row: "", runId: run.id }, onclick: () => ctx.go("overview", { run: run.id, from: null, to: null }) },
    el("td", {}, pick),
    el("td", { class: "status-" + run.status, text: run.status }),
    el("td", {}, el("strong", { text: run.name || run.id }), el("div", { class: "muted", text: run.id + (run.project ? " · " + run.project : "") })),
    el(
      "td",
      {},
      el("span", { class: "progress", title: progress === null ? "" : (100 * progress).toFixed(1) + "%" }, el("span", { style: `width:${(100 * (progress || 0)).toFixed(1)}%` })),
      " ",
      run.step === null ? "–" : (run.step + 1).toLocaleString() + (run.planned_total_steps ? " / " + run.planned_total_steps.toLocaleString() : ""),
    ),
    el("td", { class: "num", text: run.status === "running" ? fmtDuration(run.eta_s) : "–" }),
    el("td", { class: "num", text: run.tokens_per_s === null ? "–" : fmtNum(run.tokens_per_s) }),
    el("td", { class: "num", text: run.loss === null ? "–" : fmtNum(run.loss) }),
    el(
      "td",
      { class: "num" },
      run.open_alerts
        ? el("a", { class: "badge alerting", href: "#/alerts?run=" + encodeURIComponent(run.id), onclick: (e) => e.stopPropagation(), text: String(run.open_alerts) })
        : el("span", { class: "muted", text: "0" }),
    ),
    el("td", { class: "num", title: run.last_ts ? new Date(run.last_ts * 1000).toLocaleString() : "", text: fmtAgo(run.last_ts) }),
  );
}

export async function render(root, ctx) {
  const chosen = new Set((ctx.params.compare || "").split(",").filter(Boolean));
  const search = el("input", { type: "search", placeholder: "search runs (/)", value: ctx.params.q || "", dataset: { search: "" }, "aria-label": "search runs" });
  const status = el("select", { "aria-label": "status" }, STATUSES.map((s) => el("option", { value: s, text: s || "any status" })));
  status.value = ctx.params.status || "";
  const body = el("tbody");
  const table = el(
    "table",
    { class: "list", id: "runs" },
    el("thead", {}, el("tr", {}, ["", "Status", "Run", "Progress", "ETA", "Tokens/s", "Loss", "Alerts", "Updated"].map((h) => el("th", { text: h })))),
    body,
  );
  const compareButton = el("button", { type: "button", onclick: () => chosen.size && ctx.go("compare", { runs: Array.from(chosen).join(","), run: null }) }, "Compare selected");
  root.append(el("h2", { text: "Runs" }), el("div", { class: "toolbar" }, search, status, compareButton), table);

  let all = ctx.summaries;
  function draw() {
    const q = search.value.trim().toLowerCase();
    const shown = all.filter((r) => (!status.value || r.status === status.value) && (!q || (r.name + " " + r.id + " " + r.project).toLowerCase().includes(q)));
    const selected = body.querySelector("tr.selected");
    const keep = selected && selected.dataset.runId;
    body.replaceChildren(...shown.map((r) => row(r, ctx, chosen)));
    if (keep) for (const tr of body.rows) tr.classList.toggle("selected", tr.dataset.runId === keep);
    if (!shown.length) body.append(el("tr", {}, el("td", { colspan: 9, class: "empty", text: all.length ? "No run matches." : "No runs yet: start a training with stepwatch (or `stepwatch demo`)." })));
  }
  search.addEventListener("input", () => {
    ctx.set({ q: search.value }, { rerender: false });
    draw();
  });
  status.addEventListener("change", () => {
    ctx.set({ status: status.value }, { rerender: false });
    draw();
  });
  draw();
  return {
    async refresh() {
      all = (await api("/runs/summary", { signal: ctx.signal })) || [];
      draw();
    },
  };
}
