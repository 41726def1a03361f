// A run's profiler traces (uploaded by stepwatch.torch.profile or `stepwatch profile RUN`):
// the list on the run's page, each with a link to the trace view and one to download it as
// the Chrome trace it is (Perfetto and chrome://tracing open it); for operators, the control
// that asks a running run for one (the `profile` command, on some ranks or every one).

import { API, api } from "../api.js";
import { can } from "../session.js";
import { el, fmtNum, fmtTime } from "../util.js";

// The run's list is asked for again at most this often (the overview refreshes every 2 s).
const LIST_EVERY_MS = 10000;
// While a profile asked for is under way, its command and the list are asked for this often.
const FOLLOW_EVERY_MS = 1000;

const base = (runId) => "/runs/" + encodeURIComponent(runId) + "/profiles";

// The run's traces, newest first.
export const listProfiles = (runId, signal) => api(base(runId), { signal });

// Where a trace downloads (gzip Chrome trace JSON, the collector's own file).
export const downloadUrl = (runId, id) => API + base(runId) + "/" + encodeURIComponent(id);

// The analysis of a trace: `stepwatch trace --json`'s object with its `timeline` and `profile`.
export const analysis = (runId, id, signal) => api(base(runId) + "/" + encodeURIComponent(id) + "/analysis", { signal });

export const rankOf = (p) => (p.rank === null || p.rank === undefined ? "–" : p.rank);

// "steps 2–4" (first_step known) or "3 steps".
export function stepsOf(p) {
  if (p.first_step === null || p.first_step === undefined) return p.steps + (p.steps === 1 ? " step" : " steps");
  return p.steps === 1 ? "step " + p.first_step : "steps " + p.first_step + "–" + (p.first_step + p.steps - 1);
}

// A one-line name of a trace, for pickers.
export const profileLabel = (p) => "rank " + rankOf(p) + " · " + stepsOf(p) + " · " + fmtTime(p.ts);

// The link that downloads a trace for Perfetto.
export function downloadLink(runId, p) {
  return el("a", { href: downloadUrl(runId, p.id), download: `${runId}-${p.id}.json.gz`, dataset: { action: "download-profile" }, title: "gzip Chrome trace: open it in ui.perfetto.dev or chrome://tracing" }, "download for Perfetto");
}

// The run's traces as a table, each linked to its view (or, with none, how to get one).
export function profileList(runId, list) {
  if (!list.length) return el("p", { class: "empty" }, "No profiler traces of this run: ", el("code", { text: "stepwatch profile " + runId }), " asks a run under stepwatch.torch.control for one.");
  const open = (p) => "#/trace?" + new URLSearchParams({ run: runId, profile: p.id }).toString();
  const rows = list.map((p) =>
    el(
      "tr",
      { dataset: { row: "", profileId: p.id }, onclick: (e) => e.target.tagName !== "A" && (location.hash = open(p)) },
      el("td", { text: String(rankOf(p)) }),
      el("td", { text: stepsOf(p) }),
      el("td", { text: fmtTime(p.ts) }),
      el("td", { class: "num", text: fmtNum(p.bytes, "bytes") }),
      el("td", {}, el("a", { href: open(p), dataset: { action: "open-profile" } }, "open"), " · ", downloadLink(runId, p)),
    ),
  );
  const head = el("tr", {}, ["rank", "steps", "taken", "size", ""].map((h) => el("th", { text: h })));
  return el("table", { class: "list" }, el("thead", {}, head), el("tbody", {}, rows));
}

// "3, 5" as [3, 5]; null when a part is not a rank number.
function parseRanks(text) {
  const parts = text.split(/[\s,]+/).filter(Boolean);
  return parts.every((p) => /^\d+$/.test(p)) ? [...new Set(parts.map(Number))].sort((a, b) => a - b) : null;
}

// A pause that ends early when the view is left.
const pause = (ms, signal) =>
  new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => (clearTimeout(timer), resolve()), { once: true });
  });

// The control that asks the run to profile its next steps: steps, ranks (empty: every rank),
// and the state of the command (`data-status`: pending → profiling → done, or failed /
// unsupported / refused) until its traces are in the list; `relist()` shows the list anew.
function profileControl(ctx, relist) {
  const steps = el("input", { type: "number", min: 1, max: 1000, value: 5, "aria-label": "steps to profile", dataset: { field: "profile-steps" } });
  const ranks = el("input", { type: "text", size: 10, placeholder: "every rank", "aria-label": "ranks to profile", title: "rank numbers, e.g. 3, 5; empty: every rank", dataset: { field: "profile-ranks" } });
  const state = el("span", { class: "muted", dataset: { profileCommand: "" } });
  const show = (status, text) => {
    state.dataset.status = status;
    state.textContent = text;
  };
  const base = "/runs/" + encodeURIComponent(ctx.run.id);
  // Follow the command until it is answered, then the list until each rank's trace is in.
  async function follow(command, before) {
    const due = command.ranks.map(String);
    for (;;) {
      await pause(FOLLOW_EVERY_MS, ctx.signal);
      if (ctx.signal.aborted) return;
      const [got] = (await api(base + "/commands?after=" + (command.seq - 1), { signal: ctx.signal })) || [];
      if (!got || got.status === "pending") {
        const answered = Object.keys((got && got.answers) || {}).length;
        show("pending", due.length > 1 && answered ? `pending: ${answered} of ${due.length} ranks have begun` : "pending: the run takes it at its next step");
        continue;
      }
      if (got.status !== "ok") return show(got.status, got.status + ": " + got.detail);
      const fresh = ((await listProfiles(ctx.run.id, ctx.signal)) || []).filter((p) => !before.has(p.id));
      const missing = due.filter((r) => !fresh.some((p) => String(p.rank) === r));
      if (fresh.length && !missing.length) {
        show("done", `done: ${fresh.length} trace${fresh.length === 1 ? "" : "s"} in the list`);
        return relist();
      }
      show("profiling", `profiling ${command.args.steps} steps` + (missing.length ? " on rank " + missing.join(", ") : "") + "…");
    }
  }
  const button = el("button", { type: "button", dataset: { action: "profile" } }, "Profile");
  button.addEventListener("click", async () => {
    const chosen = parseRanks(ranks.value);
    const n = Number(steps.value);
    if (chosen === null) return show("refused", "ranks are rank numbers, e.g. 3, 5");
    if (!Number.isInteger(n) || n < 1 || n > 1000) return show("refused", "steps: a whole number from 1 to 1000");
    button.disabled = true;
    try {
      const before = new Set(((await listProfiles(ctx.run.id, ctx.signal)) || []).map((p) => p.id));
      const command = await api(base + "/commands", { method: "POST", body: { action: "profile", args: { steps: n }, ranks: chosen }, signal: ctx.signal });
      show("pending", "pending: the run takes it at its next step");
      await follow(command, before);
    } catch (err) {
      if (err.name !== "AbortError") show("refused", "refused: " + err.message);
    } finally {
      button.disabled = false;
    }
  });
  return el("div", { class: "toolbar", dataset: { profileControl: "" } }, el("label", {}, "steps", steps), el("label", {}, "ranks", ranks), button, state);
}

// The run page's panel; refresh() asks for the list again (at most every LIST_EVERY_MS).
export function profilesPanel(parent, ctx) {
  const body = el("div", {}, el("p", { class: "empty", text: "Asking the collector…" }));
  const panel = el("div", { class: "panel", dataset: { profiles: "" } }, el("h3", { text: "Profiles" }));
  let at = 0;
  async function relist() {
    at = Date.now();
    const list = (await listProfiles(ctx.run.id, ctx.signal)) || [];
    if (ctx.signal.aborted) return;
    body.replaceChildren(profileList(ctx.run.id, list));
  }
  if (ctx.run.status === "running" && can("operate")) panel.append(profileControl(ctx, relist));
  panel.append(body);
  parent.append(panel);
  return {
    async refresh() {
      if (Date.now() - at >= LIST_EVERY_MS) await relist();
    },
  };
}
