// Axis ticks whose labels fit: the finest step at which every label, measured in the font it
// is drawn in, keeps a gap to its neighbours and stays inside the axis at its width in pixels.
// Time axes (local time) and number axes (steps, seconds) alike, for the uPlot charts and for
// the strips drawn in the DOM (alerts timeline, sync heatmap).

import { el } from "./util.js";

export const AXIS_FONT = "12px system-ui, sans-serif";
const GAP_PX = 16;
const MIN = 60;
const HOUR = 3600;
const DAY = 86400;
const TIME_STEPS = [1, 2, 5, 10, 15, 30, MIN, 2 * MIN, 5 * MIN, 10 * MIN, 15 * MIN, 30 * MIN, HOUR, 2 * HOUR, 3 * HOUR, 6 * HOUR, 12 * HOUR, DAY, 2 * DAY, 7 * DAY, 14 * DAY, 28 * DAY];
// Clock formats, the locale's first, then 24-hour ones (no "AM"/"PM": shorter on narrow axes).
const clock = (extra) => [{}, { hourCycle: "h23" }].map((h) => new Intl.DateTimeFormat(undefined, Object.assign({ hour: "2-digit", minute: "2-digit" }, extra, h)));
const SECONDS = clock({ second: "2-digit" });
const MINUTES = clock({});
const DAYS = new Intl.DateTimeFormat(undefined, { month: "short", day: "numeric" });

let ruler = null;

// Width in CSS pixels of `text` drawn in `font`.
export function textWidth(text, font = AXIS_FONT) {
  ruler = ruler || document.createElement("canvas").getContext("2d");
  ruler.font = font;
  return ruler.measureText(text).width;
}

// Seconds to add to a timestamp to count in local time (ticks on local minutes, midnights).
const localOffset = (ts) => -new Date(ts * 1000).getTimezoneOffset() * 60;

// A time label as precise as the step needs, in clock format `form` (0 or 1); a tick at local
// midnight names its day.
function timeLabel(ts, step, form) {
  const d = new Date(ts * 1000);
  if (step >= DAY || (step >= MIN && (ts + localOffset(ts)) % DAY === 0)) return DAYS.format(d);
  return (step >= MIN ? MINUTES : SECONDS)[form].format(d);
}

// A number label with the decimals the step needs, in k/M/G of the axis's largest value.
function numberLabel(v, step, top) {
  const [unit, suffix] = top >= 1e9 ? [1e9, "G"] : top >= 1e6 ? [1e6, "M"] : top >= 1e4 ? [1e3, "k"] : [1, ""];
  const decimals = Math.max(0, Math.ceil(-Math.log10(step / unit) - 1e-9));
  return (v / unit).toFixed(decimals) + suffix;
}

// Multiples of `step` in [min, max], counted from `offset` seconds (local time's, or 0).
function multiples(min, max, step, offset) {
  const first = Math.ceil((min + offset) / step) * step - offset;
  const out = [];
  for (let i = 0; first + i * step <= max; i += 1) out.push(first + i * step);
  return out;
}

// 1, 2, 5 times powers of ten, whole numbers, from about a pixel's worth of the range up.
function numberSteps(min, max, px) {
  const e0 = Math.max(0, Math.floor(Math.log10(Math.max((max - min) / px, 1))));
  const out = [];
  for (let e = e0; e <= e0 + 18; e += 1) for (const m of [1, 2, 5]) out.push(m * 10 ** e);
  return out;
}

// The labelled ticks of the finest step that fits: {splits, labels, squeezed}. Labels are centred on
// their ticks; one whose half would stick out of [-room, px] is left out. Where no step keeps
// its labels apart with one inside (a span of seconds on a small multiple), the one label of
// the coarsest step nearest the middle (squeezed): an axis is never left unnamed while a tick
// fits.
function fit(min, max, px, room, steps, split, label) {
  const perUnit = px / Math.max(max - min, 1e-9);
  const labelled = (step) => {
    const splits = [];
    const labels = [];
    for (const v of split(step)) {
      const text = label(v, step);
      const half = textWidth(text) / 2;
      const at = (v - min) * perUnit;
      if (at - half < -room || at + half > px) continue;
      splits.push(v);
      labels.push(text);
    }
    return { splits, labels };
  };
  for (const step of steps) {
    const spacing = step * perUnit;
    if (spacing < GAP_PX + textWidth(label(min, step))) continue; // too fine to measure them all
    const got = labelled(step);
    if (got.labels.length && Math.max(...got.labels.map((t) => textWidth(t))) + GAP_PX <= spacing) return Object.assign(got, { squeezed: false });
  }
  const middle = (min + max) / 2;
  for (const step of steps.slice().reverse()) {
    const got = labelled(step);
    if (!got.splits.length) continue;
    const i = got.splits.reduce((best, v, k) => (Math.abs(v - middle) < Math.abs(got.splits[best] - middle) ? k : best), 0);
    return { splits: [got.splits[i]], labels: [got.labels[i]], squeezed: true };
  }
  return { splits: [], labels: [], squeezed: true };
}

// Ticks of a time axis over [min, max] seconds drawn `px` pixels wide (labels may reach `room`
// pixels left of it): in the locale's clock, or the shorter 24-hour one where that shows more
// or fits where the other is squeezed.
export function timeTicks(min, max, px, room = 0) {
  const offset = localOffset(min);
  const [long, short] = [0, 1].map((form) => fit(min, max, px, room, TIME_STEPS, (step) => multiples(min, max, step, offset), (v, step) => timeLabel(v, step, form)));
  const rank = (got) => (got.squeezed ? 0 : 1e6) + got.splits.length;
  return rank(short) > rank(long) ? short : long;
}

// Ticks of a number axis (steps, seconds: whole numbers) over [min, max] drawn `px` pixels wide.
export function numberTicks(min, max, px, room = 0) {
  const top = Math.max(Math.abs(min), Math.abs(max));
  return fit(min, max, px, room, numberSteps(min, max, px), (step) => multiples(min, max, step, 0), (v, step) => numberLabel(v, step, top));
}

// The x axis options of a uPlot chart: ticks picked for the plot's width when uPlot asks for
// the spacing (it passes the width only there), then handed over as its splits and values.
// Labels may reach under the y axis (`yAxisPx` wide, empty below the plot).
export function xAxisTicks(time, yAxisPx) {
  let picked = { splits: [], labels: [] };
  return {
    font: AXIS_FONT,
    space: (u, axis, min, max, px) => {
      picked = (time ? timeTicks : numberTicks)(min, max, px, yAxisPx / 2);
      return 1; // any spacing: uPlot's own step is not used
    },
    splits: () => picked.splits,
    values: () => picked.labels,
  };
}

// A time axis under a strip drawn in the DOM spanning [t0, t1]; laid out again when resized.
export function timeAxis(t0, t1) {
  const axis = el("div", { class: "time-axis", dataset: { axis: "time", start: t0, end: t1 } });
  const lay = () => {
    const { splits, labels } = timeTicks(t0, t1, axis.clientWidth);
    const span = Math.max(t1 - t0, 1e-9);
    axis.replaceChildren(...splits.map((t, i) => el("span", { style: `left:${(100 * (t - t0)) / span}%`, dataset: { ts: t }, text: labels[i] })));
  };
  new ResizeObserver(lay).observe(axis);
  return axis;
}
