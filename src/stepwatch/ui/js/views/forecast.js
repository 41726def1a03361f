// The run's forecast in the run view: the answers of /forecast and /advice read at most every
// 10 s (the route fits the whole run, so live data does not ask for it every 2 s), the loss
// cone merged into the loss chart, and the panel of ETA, final loss and chance of success.

import { api } from "../api.js";
import { align } from "../chart.js";
import { cssVar, el, fmtDuration, fmtNum, fmtTime } from "../util.js";

// A forecast is asked for again at most this often; the charts follow live data every 2 s.
const FORECAST_EVERY_MS = 10000;

const BASIS = {
  schedule: "the learning-rate schedule the run states",
  observed: "the learning rate seen (no schedule stated: it is assumed held, then brought down by the end)",
  steps: "the steps alone (no learning rate logged)",
};

// The forecast and advice of a run ({forecast, advice}, each as Promise.allSettled gives it),
// asked for again only once FORECAST_EVERY_MS have passed since the last time; a load within
// that keeps the last answers and calls onDue() once they may be asked for again, so the view
// catches up with data that came meanwhile.
export function runInsights(runId, onDue) {
  const base = "/runs/" + encodeURIComponent(runId);
  let at = 0;
  let pending = null;
  let timer = null;
  return {
    load(signal) {
      const wait = at + FORECAST_EVERY_MS - Date.now();
      if (pending && wait > 0) {
        if (!timer) timer = setTimeout(() => ((timer = null), onDue()), wait);
        return pending;
      }
      at = Date.now();
      const asked = [api(base + "/forecast", { signal }), api(base + "/advice", { signal })];
      pending = Promise.allSettled(asked).then(([forecast, advice]) => ({ forecast, advice }));
      return pending;
    },
    // The forecast of the last load (null until it came, or when it was refused).
    async forecast() {
      const got = pending && (await pending);
      return got && got.forecast.status === "fulfilled" ? got.forecast.value : null;
    },
    stop() {
      clearTimeout(timer);
    },
  };
}

// Where the cone's steps go on x: the steps themselves, or (time axis) the times the ETA gives
// them, paced evenly from the last time drawn. Null when they cannot be placed.
function coneX(cone, fc, xMode, lastX) {
  if (xMode === "step") return cone.step.slice();
  const first = cone.step[0];
  const span = cone.step[cone.step.length - 1] - first;
  if (fc.eta_s === null || fc.eta_s === undefined || !(span > 0)) return null;
  return cone.step.map((s) => lastX + ((s - first) / span) * fc.eta_s);
}

// How far past the data the cone goes at most, in spans of the data drawn: early in a long
// run the data keeps a third of the chart, and the cone reaches the planned end from then on.
const AHEAD_SPANS = 2;

// The cone's points up to ``limit`` on x (its first ones always), or null when fewer than two.
function within(cone, xs, limit) {
  const n = xs.filter((x) => x <= limit).length;
  if (n < 2) return null;
  const cut = (a) => a.slice(0, n);
  return { cone: { step: cut(cone.step), p10: cut(cone.p10), p50: cut(cone.p50), p90: cut(cone.p90) }, n };
}

// Chart data ({x, ts, series}) with the forecast cone added past its last point: the p50 as a
// dashed line over a p10-p90 band, in the forecast colour, up to the planned last step (or
// AHEAD_SPANS of the data drawn past it, when the run is young). The data is returned as it is
// when there is no cone.
export function withCone(data, fc, xMode) {
  const whole = fc && fc.loss_cone;
  if (!whole || !whole.step || !whole.step.length || !data.x.length) return data;
  const lastX = data.x[data.x.length - 1];
  const allXs = coneX(whole, fc, xMode, lastX);
  if (!allXs) return data;
  const kept = within(whole, allXs, lastX + AHEAD_SPANS * (lastX - data.x[0]));
  if (!kept) return data;
  const cone = kept.cone;
  const xs = allXs.slice(0, kept.n);
  const lastTs = data.ts[data.ts.length - 1];
  const timed = xMode === "step" ? coneX(whole, fc, "time", lastTs) : xs;
  const ahead = timed && timed.slice(0, kept.n);
  const own = { ts: data.ts };
  data.series.forEach((s, i) => {
    own["v" + i] = s.values;
    if (s.min && s.max) Object.assign(own, { ["lo" + i]: s.min, ["hi" + i]: s.max });
  });
  const future = { ts: ahead || xs.map(() => lastTs), p10: cone.p10, p50: cone.p50, p90: cone.p90 };
  const { x, cols } = align([
    { ts: data.x, cols: own },
    { ts: xs, cols: future },
  ]);
  const [mine, next] = cols;
  const series = data.series.map((s, i) => Object.assign({}, s, { values: mine["v" + i], min: s.min ? mine["lo" + i] : null, max: s.max ? mine["hi" + i] : null }));
  series.push({ label: "forecast p50 (band p10–p90)", values: next.p50, min: next.p10, max: next.p90, color: cssVar("--forecast"), dash: [6, 4], width: 1.5, soft: true });
  const ts = mine.ts.map((t, i) => (t === null ? next.ts[i] : t));
  return { x, ts, series };
}

const interval = (lo, hi, fmt) => (lo === null || lo === undefined || hi === null || hi === undefined ? null : "p10–p90 " + fmt(lo) + " – " + fmt(hi));

const pct = (p) => (p === null || p === undefined ? "–" : Math.round(100 * p) + " %");

// A line of the panel: its name, its value in bold, what qualifies it.
function fact(field, value, name, main, ...more) {
  return el("div", { class: "fact", dataset: { field, value: value === null || value === undefined ? "" : String(value) } }, el("dt", { text: name }), el("dd", {}, el("strong", { text: main }), ...more.filter(Boolean).map((m) => el("div", { class: "muted", text: m }))));
}

// What the forecast knew: its basis, the steps seen of the plan, and a stated schedule it
// could not read.
function knew(fc) {
  const planned = fc.planned_total_steps;
  if (!planned) return "Nothing to forecast to: the run states no planned total of steps.";
  const seen = fc.at_step === null || fc.at_step === undefined ? "no step yet" : (fc.at_step + 1).toLocaleString() + " of " + planned.toLocaleString() + " planned steps";
  if (!fc.basis) return "Too little known yet (" + seen + ").";
  return "Forecast from " + BASIS[fc.basis] + ", and " + seen + "; the recent pace alone would say " + fmtDuration(fc.naive_eta_s) + ".";
}

// The panel: ETA with its interval and the planned end's time, the final loss with its
// interval, the chance of success, and what the forecast knew.
export function forecastPanel(parent) {
  const root = el("div", { class: "panel forecast", dataset: { forecast: "" } }, el("h3", { text: "Forecast" }));
  const body = el("div", {}, el("p", { class: "empty", text: "Asking the collector…" }));
  root.append(body);
  parent.append(root);
  return {
    show(fc, run) {
      const running = run && run.status === "running";
      const end = running && fc.eta_s !== null && run.last_ts ? run.last_ts + fc.eta_s : null;
      const eta = running
        ? fact("eta", fc.eta_s, "ETA", fmtDuration(fc.eta_s), interval(fc.eta_s_p10, fc.eta_s_p90, fmtDuration), end && "planned end (step " + fc.planned_total_steps.toLocaleString() + ") about " + fmtTime(end))
        : fact("eta", null, "ETA", "–", "the run has " + (run ? run.status : "ended"));
      const loss = fact("final-loss", fc.final_loss_p50, "Final loss", fmtNum(fc.final_loss_p50), interval(fc.final_loss_p10, fc.final_loss_p90, fmtNum));
      const success = fact("success", fc.success_probability, "Success", pct(fc.success_probability), "chance the run reaches its planned end");
      const lines = [el("dl", { class: "facts" }, eta, loss, success), el("p", { class: "muted", dataset: { field: "basis" }, text: knew(fc) })];
      if (fc.schedule_error) lines.push(el("p", { class: "form-error", dataset: { field: "schedule-error" }, text: "The stated schedule cannot be read (" + fc.schedule_error + "): the forecast goes by the rate seen." }));
      body.replaceChildren(...lines);
      root.dataset.ready = "1";
    },
  };
}
