// Small helpers shared by the views: DOM building, formatting, smoothing, colours.

// Create an element: el("div", {class: "x", dataset: {a: 1}, onclick: f}, child, "text", ...).
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "dataset") Object.assign(node.dataset, value);
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "text") node.textContent = value;
    else if (value === true) node.setAttribute(key, "");
    else node.setAttribute(key, String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export const fmtTime = (ts) => (ts ? new Date(ts * 1000).toLocaleString() : "–");
export const fmtClock = (ts) => new Date(ts * 1000).toLocaleTimeString();

// Rounded to its smallest unit first, so 119.7 s reads "2 min 0 s", not "1 min 60 s".
export function fmtDuration(s) {
  if (s === null || s === undefined || !Number.isFinite(s)) return "–";
  if (Math.round(s) < 60) return Math.round(s) + " s";
  if (Math.round(s) < 3600) return Math.floor(Math.round(s) / 60) + " min " + (Math.round(s) % 60) + " s";
  const min = Math.round(s / 60);
  if (min < 1440) return Math.floor(min / 60) + " h " + (min % 60) + " min";
  const h = Math.round(s / 3600);
  return Math.floor(h / 24) + " d " + (h % 24) + " h";
}

export function fmtAgo(ts, now = Date.now() / 1000) {
  return ts ? fmtDuration(Math.max(0, now - ts)) + " ago" : "–";
}

// The unit of a metric, read from its name as the vocabulary spells it: "..._bytes" are bytes,
// "..._bytes_per_s" bytes per second; others are plain numbers (their titles say the rest).
export function unitOf(name) {
  if (/_bytes_per_s$/.test(name)) return "bytes/s";
  if (/_bytes$/.test(name)) return "bytes";
  return "";
}

// A value in a compact form: 3 significant digits, SI suffixes for big numbers; bytes (and
// bytes per second) in binary multiples.
export function fmtNum(v, unit = "") {
  if (v === null || v === undefined) return "–";
  if (!Number.isFinite(v)) return String(v);
  const a = Math.abs(v);
  if (unit === "bytes" || unit === "bytes/s") {
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    let x = v;
    while (Math.abs(x) >= 1024 && i < units.length - 1) {
      x /= 1024;
      i += 1;
    }
    return x.toPrecision(3) + " " + units[i] + (unit === "bytes/s" ? "/s" : "");
  }
  if (a >= 1e9) return (v / 1e9).toPrecision(3) + "G";
  if (a >= 1e6) return (v / 1e6).toPrecision(3) + "M";
  if (a >= 1e4) return (v / 1e3).toPrecision(3) + "k";
  if (a !== 0 && a < 1e-3) return v.toExponential(1);
  return String(Number(v.toPrecision(4)));
}

// Exponential moving average with debiasing (as TensorBoard smooths scalars); weight in [0, 1).
// Non-finite values pass through unsmoothed and do not disturb the average.
export function ema(values, weight) {
  if (!(weight > 0)) return values.slice();
  const out = new Array(values.length);
  let last = 0;
  let n = 0;
  for (let i = 0; i < values.length; i += 1) {
    const v = values[i];
    if (v === null || !Number.isFinite(v)) {
      out[i] = v;
      continue;
    }
    last = last * weight + (1 - weight) * v;
    n += 1;
    out[i] = last / (1 - Math.pow(weight, n));
  }
  return out;
}

// The value of a CSS variable of the current theme, read once per theme (reading computed
// style while charts are being built would force a style recalculation each time).
const themeVars = new Map();
export function cssVar(name) {
  if (!themeVars.has(name)) themeVars.set(name, getComputedStyle(document.documentElement).getPropertyValue(name).trim());
  return themeVars.get(name);
}

// Forget the cached colours: the theme changed.
export const themeChanged = () => themeVars.clear();

// The i-th series colour of the current theme.
export const color = (i) => cssVar("--c" + (i % 10));

// Compare label values that may be numbers ("2" < "10").
export function byLabel(a, b) {
  const x = Number(a);
  const y = Number(b);
  if (Number.isFinite(x) && Number.isFinite(y)) return x - y;
  return String(a).localeCompare(String(b));
}

// Run fn at most once per `ms`, the last call winning (live refreshes).
export function throttle(fn, ms) {
  let timer = null;
  let due = 0;
  return (...args) => {
    const wait = Math.max(0, due - Date.now());
    if (timer) return;
    timer = setTimeout(() => {
      timer = null;
      due = Date.now() + ms;
      fn(...args);
    }, wait);
  };
}
