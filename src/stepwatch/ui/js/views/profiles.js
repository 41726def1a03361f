// A run's profiler traces (uploaded by stepwatch.torch.profile or `stepwatch profile RUN`):
// the list on the run's page, each with a link to the trace view and one to download it as
// the Chrome trace it is (Perfetto and chrome://tracing open it).

import { API, api } from "../api.js";
import { el, fmtNum, fmtTime } from "../util.js";

// The run's list is asked for again at most this often (the overview refreshes every 2 s).
const LIST_EVERY_MS = 10000;

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

// The table of a run's traces; `open(p)` is the hash link of a trace's view.
export function profileTable(runId, list, open) {
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

// The run page's panel; refresh() asks for the list again (at most every LIST_EVERY_MS).
export function profilesPanel(parent, ctx) {
  const body = el("div", {}, el("p", { class: "empty", text: "Asking the collector…" }));
  parent.append(el("div", { class: "panel", dataset: { profiles: "" } }, el("h3", { text: "Profiles" }), body));
  let at = 0;
  const open = (p) => "#/trace?" + new URLSearchParams({ run: ctx.run.id, profile: p.id }).toString();
  return {
    async refresh() {
      if (Date.now() - at < LIST_EVERY_MS) return;
      at = Date.now();
      const list = (await listProfiles(ctx.run.id, ctx.signal)) || [];
      if (ctx.signal.aborted) return;
      body.replaceChildren(
        list.length
          ? profileTable(ctx.run.id, list, open)
          : el("p", { class: "empty" }, "No profiler traces of this run: ", el("code", { text: "stepwatch profile " + ctx.run.id }), " asks a run under stepwatch.torch.control for one."),
      );
    },
  };
}
