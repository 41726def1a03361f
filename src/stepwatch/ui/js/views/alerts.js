// Alerts: a timeline and a list of the run's alerts (as the page holds them: each transition
// of the alert stream redraws them, no new listing); details with the playbook text,
// acknowledge and silence; silences listed with their removal. Read-only for a role that may
// not operate.

import { api, serves } from "../api.js";
import { el, fmtTime, fmtDuration, fmtNum, throttle } from "../util.js";
import { currentAlerts, onAlerts } from "../alerts.js";
import { can } from "../session.js";
import { timeAxis } from "../ticks.js";

const STATES = ["all", "open", "firing", "resolved"];
const SILENCE_DURATIONS = [["1 h", 3600], ["4 h", 14400], ["1 day", 86400], ["1 week", 604800]];

function summary(a) {
  return (a.annotations && (a.annotations.summary || a.annotations.description)) || a.rule || a.kind;
}

// Where an alert fired: its node, rank and GPU labels, or the run as a whole.
export function entity(labels) {
  return ["node", "rank", "gpu"].filter((k) => labels && labels[k] !== undefined).map((k) => k + "=" + labels[k]).join(" ") || "run";
}

function isOpen(a) {
  return a.state !== "resolved";
}

// Markers over the charts' time range (live: up to the newest alert too), with its time axis.
function timeline(alerts, ctx, onPick) {
  const bar = el("div", { class: "timeline" });
  const r = ctx.range();
  const t0 = r.start;
  const t1 = Math.max(t0 + 1, r.live ? Math.max(r.end, ...alerts.map((a) => a.ts)) : r.end);
  const span = t1 - t0;
  for (const a of alerts) {
    const start = Math.max(t0, a.since || a.ts);
    const end = Math.min(t1, isOpen(a) ? t1 : a.resolved_ts || a.ts);
    if (end < start) continue; // outside the range
    bar.append(
      el("span", {
        class: "mark sev-" + a.severity,
        title: `${a.rule} · ${entity(a.labels)} · ${fmtTime(a.since || a.ts)}`,
        style: `left:${(100 * (start - t0)) / span}%;width:${Math.max(0.3, (100 * (end - start)) / span)}%`,
        onclick: () => onPick(a.id),
      }),
    );
  }
  const dataset = { chart: "alerts.timeline", points: bar.childElementCount, start: t0, end: t1, ready: 1 };
  return el("div", { class: "timeline-wrap", dataset }, bar, timeAxis(t0, t1));
}

export async function render(root, ctx) {
  const run = ctx.run.id;
  const filter = STATES.includes(ctx.params.state) ? ctx.params.state : "all";
  const stateSel = el("select", { "aria-label": "state" }, STATES.map((s) => el("option", { value: s, text: s })));
  stateSel.value = filter;
  stateSel.addEventListener("change", () => ctx.set({ state: stateSel.value, alert: null }));
  const head = el("div", { class: "toolbar" }, el("label", {}, "State", stateSel));
  const body = el("div");
  const details = el("div", { class: "details" });
  const silences = el("div", { class: "section" });
  root.append(el("h2", { text: "Alerts · " + (ctx.run.name || ctx.run.id) }), head, body, details, silences);
  let alerts = [];
  let seen = null;

  // `fresh`: list again (after an action of the person), else what the page holds.
  async function load(fresh = false) {
    const got = await currentAlerts(run, fresh);
    const signature = JSON.stringify(got);
    if (signature === seen) return; // unchanged: keep what the user is typing in the details
    seen = signature;
    alerts = got.sort((a, b) => (b.since || b.ts) - (a.since || a.ts));
    draw();
    if (fresh || !silences.childElementCount) await drawSilences();
  }

  function shown() {
    if (filter === "all") return alerts;
    if (filter === "open") return alerts.filter(isOpen);
    return alerts.filter((a) => a.state === filter);
  }

  function draw() {
    const list = shown();
    body.replaceChildren();
    if (!list.length) {
      body.append(el("p", { class: "empty", text: alerts.length ? "No alert in this state." : "No alerts for this run." }));
      details.replaceChildren();
      return;
    }
    body.append(timeline(list, ctx, open));
    const rows = list.map((a) =>
      el(
        "tr",
        { dataset: { row: "", alertId: a.id }, onclick: () => open(a.id) },
        el("td", { class: "sev-" + a.severity, text: a.severity }),
        el("td", { class: "state-" + a.state, text: a.state + (a.acked ? " · acked" : "") + (a.silenced ? " · silenced" : "") }),
        el("td", {}, el("strong", { text: a.rule }), el("div", { class: "muted", text: summary(a) })),
        el("td", { text: entity(a.labels) }),
        el("td", { text: fmtTime(a.since || a.ts) }),
        el("td", { class: "num", text: a.value === undefined ? "" : fmtNum(typeof a.value === "string" ? Number(a.value) : a.value) }),
      ),
    );
    body.append(el("table", { class: "list" }, el("thead", {}, el("tr", {}, ["Severity", "State", "Alert", "Where", "Since", "Value"].map((h) => el("th", { text: h })))), el("tbody", {}, rows)));
    if (ctx.params.alert) open(ctx.params.alert, false);
  }

  function open(id, record = true) {
    const a = alerts.find((x) => String(x.id) === String(id));
    for (const tr of body.querySelectorAll("tr[data-alert-id]")) tr.classList.toggle("selected", tr.dataset.alertId === String(id));
    if (!a) return;
    if (record) ctx.set({ alert: id }, { rerender: false });
    const ann = a.annotations || {};
    const when = a.since || a.ts;
    const actions = el("div", { class: "toolbar" });
    if (!can("operate")) actions.append(el("span", { class: "muted", text: "Acknowledging and silencing need the operator role." }));
    if (can("operate")) {
      const comment = el("input", { type: "text", placeholder: "comment", "aria-label": "comment" });
      const duration = el("select", { "aria-label": "silence for" }, SILENCE_DURATIONS.map(([t, s]) => el("option", { value: s, text: t })));
      actions.append(
        comment,
        el("button", { type: "button", dataset: { action: "ack" }, disabled: a.acked || undefined, onclick: () => act(() => api(`/alerts/${encodeURIComponent(a.id)}/ack`, { method: "POST", body: { comment: comment.value } })) }, a.acked ? "Acknowledged" : "Acknowledge"),
        el("label", {}, "Silence", duration),
        el("button", { type: "button", dataset: { action: "silence" }, onclick: () => act(() => api("/silences", { method: "POST", body: { matchers: matchers(a), duration_s: Number(duration.value), comment: comment.value } })) }, "Silence " + matchers(a).join(", ")),
      );
    }
    actions.append(el("a", { href: `#/logs?run=${encodeURIComponent(run)}&at=${when}` + (a.labels && a.labels.node ? "&node=" + encodeURIComponent(a.labels.node) : "") }, "Logs around this time"));
    actions.append(el("a", { href: `#/overview?run=${encodeURIComponent(run)}&from=${(when - 600).toFixed(0)}&to=${((a.resolved_ts || a.ts) + 600).toFixed(0)}` }, "Charts around it"));
    details.replaceChildren(
      el(
        "div",
        { class: "panel", dataset: { alertDetails: a.id } },
        el("h2", {}, el("span", { class: "sev-" + a.severity, text: a.severity + " " }), a.rule),
        el("p", { text: summary(a) }),
        ann.description && ann.description !== summary(a) ? el("p", { text: ann.description }) : null,
        el("p", { class: "muted", text: `${a.state} · ${entity(a.labels)} · since ${fmtTime(when)}` + (isOpen(a) ? ` (${fmtDuration(Date.now() / 1000 - when)})` : "") }),
        a.playbook ? el("div", {}, el("h3", { text: "Playbook" }), el("pre", { text: a.playbook })) : null,
        actions,
      ),
    );
  }

  // Silence what made this alert: its kind and where it fired.
  function matchers(a) {
    const out = [`kind=${a.kind || a.rule}`];
    for (const k of ["node", "rank", "gpu"]) if (a.labels && a.labels[k] !== undefined) out.push(`${k}=${a.labels[k]}`);
    return out;
  }

  async function act(call) {
    try {
      await call();
      ctx.message("");
      seen = null;
      await load(true);
    } catch (err) {
      ctx.error(err);
    }
  }

  async function drawSilences() {
    if (!(await serves("/api/v1/silences"))) return;
    const list = (await api("/silences", { signal: ctx.signal })) || [];
    silences.replaceChildren(el("h2", { text: "Silences" }));
    if (!list.length) {
      silences.append(el("p", { class: "empty", text: "No silences." }));
      return;
    }
    silences.append(
      el(
        "table",
        { class: "list" },
        el("tbody", {}, list.map((s) =>
          el("tr", { dataset: { silenceId: s.id } },
            el("td", { text: (s.matchers || []).join(", ") }),
            el("td", { text: s.comment || "" }),
            el("td", { text: s.created_by || "" }),
            el("td", { text: s.ends ? "until " + fmtTime(s.ends) : s.duration_s ? fmtDuration(s.duration_s) : "" }),
            el("td", {}, can("operate") ? el("button", { type: "button", dataset: { action: "unsilence" }, onclick: () => act(() => api(`/silences/${encodeURIComponent(s.id)}`, { method: "DELETE" })) }, "Remove") : null),
          ),
        )),
      ),
    );
  }

  await load();
  const redraw = throttle(() => load().catch(ctx.error), 250);
  const stop = onAlerts(redraw);
  return {
    refresh: () => load(),
    destroy: stop,
    escape() {
      details.replaceChildren();
      ctx.set({ alert: null }, { rerender: false });
      for (const tr of body.querySelectorAll("tr.selected")) tr.classList.remove("selected");
    },
  };
}
