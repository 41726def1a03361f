// One run's alerts as the page holds them: listed once from the alerts API (each alert in the
// state the collector's alert table holds), then kept current by the transitions of the alert
// stream, so an alert event costs no new listing. A stream that dropped may have missed
// transitions: the list is read again when it reconnects. The page computes no alert state of
// its own; a transition only replaces the alert it carries.

import { api, qs, subscribe } from "./api.js";

const held = { run: null, alerts: null, listing: null, stream: null, missed: [], listeners: new Set() };

function byId(list) {
  return new Map(list.map((a) => [String(a.id), a]));
}

// A transition onto the held alerts: the newer state of its alert (an acknowledgement stays).
function apply(alerts, alert) {
  const id = String(alert.id);
  const before = alerts.get(id);
  if (before && before.ts > alert.ts) return false;
  const next = Object.assign({}, before || {}, alert, { acked: Boolean(alert.acked || (before && before.acked)) });
  if (next.state === "resolved") next.resolved_ts = alert.ts;
  alerts.set(id, next);
  return true;
}

async function list(run) {
  const alerts = byId((await api("/alerts" + qs({ run, state: "all", limit: 10000 }))) || []);
  for (const a of alerts.values()) if (a.state === "resolved") a.resolved_ts = a.ts;
  return alerts;
}

function relist() {
  const run = held.run;
  held.missed = [];
  held.listing = list(run).then((alerts) => {
    if (held.run !== run) return alerts;
    for (const a of held.missed) apply(alerts, a); // what arrived while the list was read
    held.missed = [];
    held.alerts = alerts;
    for (const f of held.listeners) f(null);
    return alerts;
  });
  held.listing.catch(() => {
    if (held.run === run) held.listing = null; // asked again by the next reader
  });
  return held.listing;
}

function onTransition(name, alert) {
  if (name !== "alert" || !alert || alert.id === undefined) return;
  if (!held.alerts) {
    held.missed.push(alert);
    return;
  }
  if (apply(held.alerts, alert)) for (const f of held.listeners) f(alert);
}

// Hold the alerts of this run (null: of none) from now on.
export function holdAlerts(run) {
  if (held.run === run) return;
  if (held.stream) held.stream.close();
  Object.assign(held, { run, alerts: null, listing: null, stream: null, missed: [] });
  if (!run) return;
  let dropped = false;
  held.stream = subscribe("/alerts/stream" + qs({ run }), onTransition, (up) => {
    if (!up) dropped = true;
    else if (dropped && held.run === run) {
      dropped = false;
      relist().catch(() => {});
    }
  });
}

// The held alerts of a run, listed first when they are not held yet; after an action of the
// person (acknowledge, silence), `fresh` lists them again.
export async function currentAlerts(run, fresh = false) {
  holdAlerts(run);
  if (fresh || !held.listing) relist();
  const alerts = held.alerts && !fresh ? held.alerts : await held.listing;
  return Array.from(alerts.values());
}

// Call f(alert) at each transition applied (f(null) when the list was read again); the
// function returned stops it.
export function onAlerts(f) {
  held.listeners.add(f);
  return () => held.listeners.delete(f);
}

// Chart annotations: each alert from when it began until it resolved (or now).
export function annotations(alerts) {
  return alerts.map((a) => ({
    ts: a.since || a.ts,
    end: a.state === "resolved" ? a.resolved_ts || a.ts : null,
    severity: a.severity,
    label: a.rule,
  }));
}
