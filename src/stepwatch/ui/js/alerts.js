// Alerts as the views need them: from the alerts API, or read-only from alert events when the
// collector has no alerts API (404), so charts still show annotations.

import { api, qs, serves, ApiError } from "./api.js";

// {available, alerts}: available is false when /alerts answered 404 (events used instead).
export async function loadAlerts(run, state = "all", signal) {
  if (await serves("/api/v1/alerts")) {
    try {
      const alerts = await api("/alerts" + qs({ run, state }), { signal });
      return { available: true, alerts: alerts || [] };
    } catch (err) {
      if (!(err instanceof ApiError) || err.status !== 404) throw err;
    }
  }
  const events = await api("/events" + qs({ run, kind: "alert", limit: 5000 }), { signal });
  return { available: false, alerts: fromEvents(events || []) };
}

// Alert events folded into one alert per id (or rule + labels), newest state last.
export function fromEvents(events) {
  const byId = new Map();
  for (const e of events) {
    const d = e.data || {};
    const labels = Object.assign({}, e.labels || {}, d.labels || {});
    const id = d.id || (d.rule || d.kind || e.text) + JSON.stringify(labels);
    const prev = byId.get(id);
    const alert = Object.assign({}, prev || {}, d, {
      id,
      rule: d.rule || (prev && prev.rule) || d.kind || "alert",
      kind: d.kind || (prev && prev.kind) || "alert",
      state: d.state || "firing",
      severity: d.severity || (prev && prev.severity) || "warning",
      ts: e.ts,
      since: d.since || (prev && prev.since) || e.ts,
      labels,
      annotations: d.annotations || (prev && prev.annotations) || { summary: e.text },
    });
    if (alert.state === "resolved") alert.resolved_ts = e.ts;
    byId.set(id, alert);
  }
  return Array.from(byId.values());
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
