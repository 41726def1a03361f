// Runs: every run with status, progress, ETA (with its p10-p90 when forecast), the chance it
// ends well, throughput, loss (and its forecast final value), open alerts and last update;
// search by name, filter by status, pick runs to compare.

import { api } from "../api.js";
import { el, fmtAgo, fmtDuration, fmtNum } from "../util.js";

const STATUSES = ["", "running", "finished", "failed", "killed"];
const HEADERS = ["", "Status", "Run", "Progress", "ETA", "Success", "Tokens/s", "Loss", "Alerts", "Updated"];
const known = (v) => v !== null && v !== undefined;

// The ETA of a running run, its p10-p90 beneath when the forecast gives one.
function etaCell(run) {
  const running = run.status === "running";
  const spread = running && known(run.eta_s_p10) && known(run.eta_s_p90) ? el("div", { class: "muted", text: fmtDuration(run.eta_s_p10) + " – " + fmtDuration(run.eta_s_p90) }) : null;
  return el("td", { class: "num", dataset: { col: "eta" }, title: spread ? "p10–p90 of the forecast ETA" : "" }, running ? fmtDuration(run.eta_s) : "–", spread);
}

// The chance the run reaches its planned end, as a badge coloured by how likely that is.
function successCell(run) {
  const p = run.success_probability;
  if (!known(p)) return el("td", { class: "num muted", dataset: { col: "success" }, text: "–" });
  const level = p >= 0.8 ? "good" : p >= 0.5 ? "fair" : "poor";
  return el("td", { class: "num", dataset: { col: "success", value: String(p) } }, el("span", { class: "badge chance-" + level, title: "chance the run reaches its planned end", text: Math.round(100 * p) + " %" }));
}

// The latest loss, and the forecast final loss beneath when known.
function lossCell(run) {
  const final = known(run.final_loss_p50) ? el("div", { class: "muted", title: "forecast final loss (p50)", text: "→ " + fmtNum(run.final_loss_p50) }) : null;
  return el("td", { class: "num" }, known(run.loss) ? fmtNum(run.loss) : "–", final);
}

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
    etaCell(run),
    successCell(run),
    el("td", { class: "num", text: run.tokens_per_s === null ? "–" : fmtNum(run.tokens_per_s) }),
    lossCell(run),
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
    el("thead", {}, el("tr", {}, HEADERS.map((h) => el("th", { text: h })))),
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
    if (!shown.length) body.append(el("tr", {}, el("td", { colspan: HEADERS.length, class: "empty", text: all.length ? "No run matches." : "No runs yet: start a training with stepwatch (or `stepwatch demo`)." })));
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
