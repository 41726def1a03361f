// Incidents: alerts of one run that belong together (`GET /api/v1/alerts/incidents`), newest
// first, each with its run, when it began and for how long, open or resolved, its probable
// root cause with the evidence, the other ranked causes, the timeline of its alerts, the
// playbooks its root cause requests with their actions' states, and the analysis of the
// collector's analyst model (marked as the model's; an operator may ask it again).
// Every run's, or one run's with `run`; `state` open or all. Read again every 10 s and on each
// alert event; an unchanged answer changes nothing on the page.

import { api, ApiError, qs, serves } from "../api.js";
import { can } from "../session.js";
import { el, fmtClock, fmtDuration, fmtTime } from "../util.js";
import { entity } from "./alerts.js";

const PATH = "/alerts/incidents";
const STATES = ["all", "open"];
const EVERY_MS = 10000;

const kindOf = (a) => a.kind || a.rule;
const began = (a) => a.since || a.ts;

// A run's incidents (newest first); null when the collector has no incidents API.
export async function listIncidents(params, signal) {
  if (!(await serves("/api/v1" + PATH))) return null;
  return (await api(PATH + qs(params), { signal })) || [];
}

// "kind · node=n0 · critical", the severity coloured.
function causeLine(a) {
  return [el("strong", { text: kindOf(a) }), el("span", { class: "muted", text: " · " + entity(a.labels) + " · " }), el("span", { class: "sev-" + a.severity, text: a.severity })];
}

function evidenceList(lines) {
  if (!lines || !lines.length) return null;
  return el("ul", { class: "evidence" }, lines.map((line) => el("li", { dataset: { evidence: "" }, text: line })));
}

// How long it lasted: from its start to its last transition, or to now while open.
function lasted(inc, now) {
  const end = inc.open ? Math.max(inc.last, now) : inc.last;
  return fmtDuration(Math.max(0, end - inc.start));
}

// The playbooks the root cause's kind requests, each with the state of the action an alert of
// the incident filed (pending: it waits for an approval), or "not requested"; the
// description shows on hover, and the action's id on its state (the dashboard has no actions
// view: the CLI shows and approves it).
function playbookList(playbooks) {
  if (!playbooks || !playbooks.length) return null;
  const item = (p) =>
    el(
      "li",
      { dataset: { playbook: p.name, status: p.status || "" }, title: p.description || null },
      el("strong", { text: p.name }),
      el("span", { class: "muted", text: " · " }),
      el("span", { class: "action-" + (p.status || "none"), dataset: { field: "action" }, title: p.action_id ? `action ${p.action_id} (stepwatch actions show ${p.action_id})` : null, text: p.status || "not requested" }),
    );
  return el("div", { class: "incident-playbooks" }, el("span", { class: "muted", text: "Playbooks: " }), el("ul", {}, playbooks.map(item)));
}

// What the analyst model said, marked as the model's. Its text is untrusted (it may echo log
// lines): it is set as text, never parsed as HTML. The playbooks it names are suggestions:
// nothing was requested.
function analysisBlock(analysis, ask) {
  const suggested = analysis.suggested_playbooks || [];
  return el(
    "section",
    { class: "analysis", dataset: { analysis: analysis.model } },
    el(
      "div",
      { class: "analysis-head" },
      el("span", { class: "badge model", text: "model-written" }),
      el("span", { dataset: { field: "analysis-by" }, text: `Analysis by model ${analysis.model} · ${fmtTime(analysis.at)}` }),
      ask,
    ),
    el("p", { class: "analysis-text", dataset: { field: "analysis-text" }, text: analysis.text }),
    suggested.length
      ? el(
          "p",
          { class: "muted", dataset: { field: "suggested" } },
          "The model suggests: ",
          suggested.flatMap((name, i) => [i ? ", " : "", el("span", { dataset: { suggested: name }, text: name })]),
          " (suggestions only: nothing was requested)",
        )
      : null,
  );
}

const when = (inc, now) => fmtTime(inc.start) + " · " + (inc.open ? "for " : "lasted ") + lasted(inc, now);

function alertRow(inc, a) {
  const href = "#/alerts?" + new URLSearchParams({ run: inc.run, state: "all", alert: a.id }).toString();
  return el(
    "tr",
    { dataset: { incidentAlert: a.id, kind: kindOf(a) } },
    el("td", { class: "num", title: fmtTime(began(a)), text: fmtClock(began(a)) }),
    el("td", {}, el("a", { href, title: "open in the alerts view" }, kindOf(a))),
    el("td", { class: "sev-" + a.severity, text: a.severity }),
    el("td", { text: entity(a.labels) }),
    el("td", { class: "state-" + a.state, text: a.state + (a.acked ? " · acked" : "") + (a.silenced ? " · silenced" : "") }),
  );
}

// `ask(inc, button)`: asks the model (again) about the incident (null: no button).
function card(inc, runName, now, ask) {
  const root = inc.root_cause;
  const others = (inc.causes || []).slice(1);
  const alerts = (inc.alerts || []).slice().sort((a, b) => began(a) - began(b));
  const runHref = "#/overview?" + new URLSearchParams({ run: inc.run }).toString();
  const askButton = ask
    ? el("button", { type: "button", dataset: { action: "ask-model" }, title: "have the collector's analyst model analyse this incident" + (inc.analysis ? " again" : ""), onclick: (e) => ask(inc, e.currentTarget) }, inc.analysis ? "Ask the model again" : "Ask the model")
    : null;
  // Enter on the selected card (or a click beside its contents) opens the run.
  const open = (e) => e.target === e.currentTarget && (location.hash = runHref);
  return el(
    "article",
    { class: "panel incident" + (inc.open ? " open" : ""), dataset: { row: "", incident: inc.id, run: inc.run, open: inc.open ? "1" : "0" }, onclick: open },
    el(
      "div",
      { class: "incident-head" },
      el("span", { class: "badge " + (inc.open ? "alerting" : "resolved"), dataset: { field: "state" }, text: inc.open ? "open" : "resolved" }),
      el("a", { href: runHref, dataset: { action: "open-run" }, title: "the run's overview", onclick: (e) => e.stopPropagation() }, runName),
      el("span", { class: "muted", dataset: { field: "when" }, text: when(inc, now) }),
      el("span", { class: "muted", text: inc.alerts.length + (inc.alerts.length === 1 ? " alert" : " alerts") }),
    ),
    root
      ? el(
          "div",
          { class: "incident-root", dataset: { rootCause: kindOf(root.alert) } },
          el("span", { class: "muted", text: "Root cause: " }),
          causeLine(root.alert),
          evidenceList(root.evidence),
        )
      : null,
    others.length
      ? el(
          "div",
          { class: "incident-causes" },
          el("span", { class: "muted", text: "Also possible: " }),
          el("ol", {}, others.map((c) => el("li", { dataset: { cause: kindOf(c.alert) } }, causeLine(c.alert), c.evidence && c.evidence.length ? el("span", { class: "muted", text: " — " + c.evidence.join("; ") }) : null))),
        )
      : null,
    playbookList(inc.playbooks),
    el("table", { class: "list incident-alerts" }, el("tbody", {}, alerts.map((a) => alertRow(inc, a)))),
    inc.analysis ? analysisBlock(inc.analysis, askButton) : askButton ? el("div", { class: "analysis-none" }, askButton) : null,
  );
}

export async function render(root, ctx) {
  const run = ctx.params.run || null;
  const filter = STATES.includes(ctx.params.state) ? ctx.params.state : "all";
  const stateSel = el("select", { "aria-label": "state", dataset: { filter: "state" } }, STATES.map((s) => el("option", { value: s, text: s })));
  stateSel.value = filter;
  stateSel.addEventListener("change", () => ctx.set({ state: stateSel.value }));
  const runName = (id) => {
    const r = ctx.summaries.find((x) => x.id === id);
    return (r && r.name) || id;
  };
  const head = el("div", { class: "toolbar" }, el("label", {}, "State", stateSel));
  if (run) head.append(el("a", { href: "#/incidents" + (filter === "open" ? "?state=open" : ""), dataset: { action: "all-runs" } }, "every run's incidents"));
  const body = el("div", { class: "incidents" }, el("p", { class: "empty", text: "Asking the collector…" }));
  root.append(el("h2", { text: "Incidents" + (run ? " · " + runName(run) : "") }), head, body);
  let seen = null;
  // Whether the collector has an analyst to ask: known not to once it answered 409.
  let analyst = true;

  // POST the ask; the analysis shows with the next answer that has it. A 409 (no analyst)
  // takes every ask button away; it and any other refusal is the page's message.
  async function ask(inc, button) {
    button.disabled = true;
    try {
      await api(`/alerts/incidents/${encodeURIComponent(inc.id)}/analysis`, { method: "POST" });
      ctx.message(`Asked the model about the incident of ${runName(inc.run)}: its analysis shows here once it answers.`);
    } catch (err) {
      if (err instanceof ApiError && err.status === 409) {
        analyst = false;
        for (const b of body.querySelectorAll('[data-action="ask-model"]')) b.remove();
      }
      ctx.error(err);
    } finally {
      button.disabled = false;
    }
  }

  async function load() {
    const got = await listIncidents({ run, state: filter }, ctx.signal);
    if (ctx.signal.aborted) return;
    const signature = JSON.stringify(got);
    if (signature === seen) {
      // unchanged: nothing moves, the selection stays; only how long open ones last grows
      const now = Date.now() / 1000;
      for (const inc of got || []) {
        const span = inc.open && body.querySelector(`[data-incident="${CSS.escape(String(inc.id))}"] [data-field="when"]`);
        if (span) span.textContent = when(inc, now);
      }
      return;
    }
    seen = signature;
    if (got === null) {
      body.replaceChildren(el("p", { class: "empty", text: "This collector lists no incidents (it has no alerts API)." }));
      return;
    }
    if (!got.length) {
      const text = filter === "open" ? "No open incidents." : run ? "No incidents in this run." : "No incidents.";
      body.replaceChildren(el("p", { class: "empty", text }));
      return;
    }
    const selected = body.querySelector("[data-incident].selected");
    const now = Date.now() / 1000;
    const asks = analyst && can("operate") ? ask : null;
    const cards = got.map((inc) => card(inc, runName(inc.run), now, asks));
    if (selected) for (const c of cards) c.classList.toggle("selected", c.dataset.incident === selected.dataset.incident);
    body.replaceChildren(...cards); // one swap: no empty frame in between
  }

  await load();
  const timer = setInterval(() => !document.hidden && load().catch(ctx.error), EVERY_MS);
  return {
    refresh: load,
    live: "events",
    liveKinds: ["alert"],
    destroy: () => clearInterval(timer),
  };
}
