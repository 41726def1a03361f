// One profiled step on a canvas: a row per CPU thread and GPU stream, spans nested by depth
// in lanes, coloured by kind; hover names a span and its duration, a drag zooms into a time
// range and a double-click shows the whole step again. Timelines given one `scale` share
// the time axis (two ranks side by side line up).

import { cssVar, el } from "../util.js";

const LANE = 15;
const HEADER = 16;
const AXIS = 22;
const GAP = 6;
// Lanes drawn per row at most (deeper spans go in the last one).
const MAX_LANES = 24;

// Microseconds as people read them: 850 µs, 12.3 ms, 1.25 s.
export function fmtUs(us) {
  if (us === null || us === undefined || !Number.isFinite(us)) return "–";
  const a = Math.abs(us);
  if (a >= 1e6) return Number((us / 1e6).toPrecision(3)) + " s";
  if (a >= 1e3) return Number((us / 1e3).toPrecision(3)) + " ms";
  return Number(us.toPrecision(3)) + " µs";
}

// What a span is (its `kind`, which the collector names by the analysis' own rules), for its
// colour and the legend.
export const KINDS = [
  { key: "step", label: "step / annotation", color: "--c8" },
  { key: "cpu", label: "CPU operator", color: "--c0" },
  { key: "runtime", label: "CUDA runtime", color: "--c5" },
  { key: "python", label: "Python", color: "--c3" },
  { key: "kernel", label: "GPU kernel", color: "--c2" },
  { key: "memcpy", label: "memory copy", color: "--c4" },
  { key: "comm", label: "communication", color: "--c1" },
];

// A time range shared by timelines: {start, end} in µs from the step's start; listeners redraw.
export function timeScale(durUs) {
  const scale = {
    full: Math.max(durUs, 1),
    start: 0,
    end: Math.max(durUs, 1),
    listeners: [],
    set(start, end) {
      scale.start = Math.max(0, start);
      scale.end = Math.min(scale.full, Math.max(end, scale.start + 0.01));
      scale.listeners.forEach((f) => f());
    },
    reset() {
      scale.set(0, scale.full);
    },
  };
  return scale;
}

// 1-2-5 steps so that about `n` ticks fit.
function tickStep(span, n) {
  const raw = span / Math.max(1, n);
  const p = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
  return 10 * p;
}

// Rows laid out: each row's top, its lanes, its spans; spans per lane for hovering.
function layout(timeline) {
  const rows = timeline.rows.map((r) => ({ name: r.name, kind: r.kind, spans: [], lanes: 1, top: 0 }));
  for (const s of timeline.spans) {
    const row = rows[s.row];
    if (!row) continue;
    const lane = Math.min(s.depth, MAX_LANES - 1);
    row.spans.push({ s, lane, kind: s.kind });
    row.lanes = Math.max(row.lanes, lane + 1);
  }
  let y = AXIS;
  for (const row of rows) {
    row.top = y;
    y += HEADER + row.lanes * LANE + GAP;
  }
  return { rows, height: y };
}

// Draw `timeline` (an analysis' `timeline`) into `parent`, on the time range of `scale`.
// Returns {destroy}.
export function drawTimeline(parent, timeline, scale, id) {
  const wrap = el("div", { class: "trace-timeline", dataset: { timeline: id } });
  const canvas = el("canvas", { "aria-label": "timeline of the profiled step" });
  const tip = el("div", { class: "tooltip", hidden: true, dataset: { timelineTip: "" } });
  const band = el("div", { class: "trace-band", hidden: true });
  wrap.append(canvas, band, tip);
  parent.append(wrap);
  const { rows, height } = layout(timeline);
  wrap.dataset.spans = String(timeline.spans.length);
  wrap.dataset.rows = String(rows.length);
  if (!rows.length) {
    wrap.replaceChildren(el("p", { class: "empty", text: "No spans in this trace." }));
    wrap.dataset.ready = "1";
    return { destroy() {} };
  }
  let width = 0;
  const xOf = (t) => ((t - scale.start) / (scale.end - scale.start)) * width;
  const tOf = (x) => scale.start + (x / width) * (scale.end - scale.start);

  function draw() {
    width = Math.max(200, wrap.clientWidth || 600);
    const ratio = window.devicePixelRatio || 1;
    canvas.width = Math.round(width * ratio);
    canvas.height = Math.round(height * ratio);
    canvas.style.width = width + "px";
    canvas.style.height = height + "px";
    const g = canvas.getContext("2d");
    g.setTransform(ratio, 0, 0, ratio, 0, 0);
    g.clearRect(0, 0, width, height);
    g.font = "11px system-ui, sans-serif";
    g.textBaseline = "middle";
    // the axis
    const step = tickStep(scale.end - scale.start, Math.floor(width / 90));
    g.strokeStyle = cssVar("--grid");
    g.fillStyle = cssVar("--muted");
    for (let t = Math.ceil(scale.start / step) * step; t <= scale.end; t += step) {
      const x = Math.round(xOf(t)) + 0.5;
      g.beginPath();
      g.moveTo(x, AXIS - 4);
      g.lineTo(x, height);
      g.stroke();
      g.fillText(fmtUs(t), Math.min(x + 3, width - 50), AXIS / 2);
    }
    const colours = Object.fromEntries(KINDS.map((k) => [k.key, cssVar(k.color)]));
    let drawn = 0;
    for (const row of rows) {
      g.fillStyle = cssVar("--fg");
      g.fillText(row.name + (row.kind === "gpu" ? " (GPU)" : ""), 2, row.top + HEADER / 2);
      for (const { s, lane, kind } of row.spans) {
        const x0 = xOf(s.start_us);
        const x1 = xOf(s.start_us + s.dur_us);
        if (x1 < 0 || x0 > width) continue;
        const x = Math.max(0, x0);
        const w = Math.max(1, Math.min(width, x1) - x);
        const y = row.top + HEADER + lane * LANE;
        g.fillStyle = colours[kind];
        g.globalAlpha = 0.85;
        g.fillRect(x, y, w, LANE - 2);
        g.globalAlpha = 1;
        drawn += 1;
        if (w > 36) {
          g.save();
          g.beginPath();
          g.rect(x, y, w, LANE - 2);
          g.clip();
          g.fillStyle = "#fff";
          g.fillText(s.name, x + 3, y + (LANE - 2) / 2);
          g.restore();
        }
      }
    }
    wrap.dataset.drawn = String(drawn);
    wrap.dataset.start = String(scale.start);
    wrap.dataset.end = String(scale.end);
    wrap.dataset.ready = "1";
  }

  // The span under a point: its row by y, its lane, then the span covering the time.
  function spanAt(px, py) {
    const row = rows.find((r) => py >= r.top + HEADER && py < r.top + HEADER + r.lanes * LANE);
    if (!row) return null;
    const lane = Math.floor((py - row.top - HEADER) / LANE);
    const t = tOf(px);
    const slack = (scale.end - scale.start) / width; // a span drawn 1 px wide is hit at 1 px
    let best = null;
    for (const hit of row.spans) {
      if (hit.lane !== lane || t < hit.s.start_us - slack || t > hit.s.start_us + hit.s.dur_us + slack) continue;
      if (!best || hit.s.dur_us < best.s.dur_us) best = hit;
    }
    return best && { row, hit: best };
  }

  const pos = (e) => {
    const rect = canvas.getBoundingClientRect();
    return { x: e.clientX - rect.left, y: e.clientY - rect.top };
  };
  let drag = null;
  canvas.addEventListener("mousemove", (e) => {
    const p = pos(e);
    if (drag) {
      band.hidden = false;
      band.style.left = Math.min(drag, p.x) + "px";
      band.style.width = Math.abs(p.x - drag) + "px";
      band.style.height = height + "px";
    }
    const found = spanAt(p.x, p.y);
    if (!found) {
      tip.hidden = true;
      return;
    }
    const s = found.hit.s;
    tip.replaceChildren(
      el("strong", { text: s.name }),
      el("div", { text: fmtUs(s.dur_us) + (s.cut ? " in this step" : "") + " · at " + fmtUs(s.start_us) }),
      el("div", { class: "muted", text: (s.cat || "?") + " · " + found.row.name + " · depth " + s.depth }),
    );
    tip.dataset.name = s.name;
    tip.hidden = false;
    tip.style.left = Math.min(p.x + 12, Math.max(0, width - 260)) + "px";
    tip.style.top = p.y + 14 + "px";
  });
  canvas.addEventListener("mouseleave", () => {
    tip.hidden = true;
  });
  canvas.addEventListener("mousedown", (e) => {
    drag = pos(e).x;
  });
  window.addEventListener("mouseup", onUp);
  function onUp(e) {
    if (drag === null) return;
    const x = pos(e).x;
    const from = drag;
    drag = null;
    band.hidden = true;
    if (Math.abs(x - from) > 4) scale.set(tOf(Math.min(from, x)), tOf(Math.max(from, x)));
  }
  canvas.addEventListener("dblclick", () => scale.reset());
  scale.listeners.push(draw);
  const resize = new ResizeObserver(() => {
    if (Math.abs((wrap.clientWidth || 0) - width) > 1) draw();
  });
  resize.observe(wrap);
  draw();
  return {
    destroy() {
      resize.disconnect();
      window.removeEventListener("mouseup", onUp);
      scale.listeners.splice(scale.listeners.indexOf(draw), 1);
    },
  };
}
