// Chart panels: a uPlot chart that loads its own data for a time range at its pixel width,
// draws min/max bands and lines, alert annotations, and reports drag-to-zoom selections.
//
// Test hooks on the container: data-chart (id), data-points (x positions drawn),
// data-ready="1" once drawn (also for an empty result, with data-points="0"), data-x-end (the
// last x drawn: a time, a step or a value),
// data-start / data-end (the time range shown, seconds), data-annotations (alert markers drawn).

import { el, cssVar, color, ema, fmtNum } from "./util.js";
import { AXIS_FONT, textWidth, xAxisTicks } from "./ticks.js";

const BAND_ALPHA = 0.18;
const Y_AXIS_PX = 70;
// Tick marks, gap and margin of the y axis besides its labels.
const Y_AXIS_PAD_PX = 22;

// The y axis's width: 70 px, or more where its widest label needs it (bytes per second).
const yAxisSize = (u, values) => Math.max(Y_AXIS_PX, Math.ceil(Math.max(0, ...(values || []).map((v) => textWidth(v)))) + Y_AXIS_PAD_PX);

// First index i with arr[i] >= v (arr ascending).
function lowerBound(arr, v) {
  let lo = 0;
  let hi = arr.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (arr[mid] < v) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function finiteExtent(arrays) {
  let lo = Infinity;
  let hi = -Infinity;
  for (const arr of arrays) {
    for (const v of arr) {
      if (v !== null && Number.isFinite(v)) {
        if (v < lo) lo = v;
        if (v > hi) hi = v;
      }
    }
  }
  if (lo > hi) return [0, 1];
  if (lo === hi) return [lo - Math.abs(lo || 1) * 0.05, hi + Math.abs(hi || 1) * 0.05];
  const pad = (hi - lo) * 0.05;
  return [lo - pad, hi + pad];
}

// The y range of the other series widened to take in `soft` series (a forecast), by at most
// its own height each way: a wild forecast cannot squash the data into a line.
function softened([lo, hi], soft) {
  if (!soft.some((arr) => arr.some((v) => v !== null && Number.isFinite(v)))) return [lo, hi];
  const [a, b] = finiteExtent(soft);
  const span = hi - lo;
  return [Math.min(lo, Math.max(a, lo - span)), Math.max(hi, Math.min(b, hi + span))];
}

function withAlpha(c, a) {
  if (c.startsWith("#") && c.length === 7) {
    const n = parseInt(c.slice(1), 16);
    return `rgba(${n >> 16}, ${(n >> 8) & 255}, ${n & 255}, ${a})`;
  }
  return c;
}

export class ChartPanel {
  // opts: id, title, height, unit, legend, load(range, points) -> {x, ts, series:[{label, values, min?, max?, smooth?,
  // color?, dash?, width?, soft? (widens the y range by at most the others' height)}]},
  // xMode ("time" | "step" | "value"), xLabel (legend name of x), smoothing (0..1), annotations [{ts, end?, severity, label}],
  // onRange(start, end) for drag-to-zoom, onReset() for double-click, sync (charts with the same
  // key share the cursor), onPick(series index) for a click on a legend-less chart.
  constructor(parent, opts) {
    this.opts = Object.assign({ height: 220, xMode: "time", smoothing: 0, annotations: [], legend: true }, opts);
    // Without a legend, the header tells the series nearest the cursor and its value.
    this.readout = el("span", { class: "readout muted" });
    this.root = el("div", { class: "panel" }, opts.title ? el("h3", {}, opts.title, " ", this.readout) : null);
    this.box = el("div", { class: "chart", dataset: { chart: opts.id } });
    this.root.append(this.box);
    parent.append(this.root);
    this.plot = null;
    this.last = null;
    this.near = null;
    this.dragged = false;
    this.observer = new ResizeObserver(() => this.resize());
    this.observer.observe(this.box);
  }

  // Fetch for `range` ({start, end}) at about one point per pixel, then draw.
  async update(range, signal) {
    const points = Math.max(32, Math.min(4000, Math.round(this.box.clientWidth || 600)));
    const data = await this.opts.load(range, points, signal);
    if (signal && signal.aborted) return;
    this.last = { data, range };
    this.draw();
  }

  setSmoothing(weight) {
    this.opts.smoothing = weight;
    if (this.last) this.draw();
  }

  setAnnotations(list) {
    this.opts.annotations = list || [];
    if (this.plot) this.plot.redraw(false);
  }

  // uPlot's aligned data and series options for the cached result.
  build() {
    const { data } = this.last;
    const gaps = (arr) => arr.map((v) => (v !== null && Number.isFinite(v) ? v : null)); // NaN/Inf break the line
    const columns = [data.x];
    const series = [{}];
    this.bands = [];
    const all = [];
    const soft = [];
    data.series.forEach((s, i) => {
      const c = s.color || color(i);
      const extent = s.soft ? soft : all;
      if (s.min && s.max) {
        this.bands.push({ min: s.min, max: s.max, color: withAlpha(c, BAND_ALPHA) });
        extent.push(s.min, s.max);
      }
      const w = this.opts.smoothing;
      const values = gaps(s.values);
      if (s.smooth && w > 0) {
        columns.push(values);
        series.push({ label: s.label + " (raw)", stroke: withAlpha(c, 0.3), width: 1, points: { show: false } });
        const smoothed = gaps(ema(s.values, w));
        columns.push(smoothed);
        series.push({ label: s.label, stroke: c, width: 1.5, points: { show: false } });
        all.push(values);
      } else {
        columns.push(values);
        series.push({ label: s.label, stroke: c, width: s.width || 1, dash: s.dash, spanGaps: !!s.spanGaps, points: { show: false } });
        extent.push(values);
      }
    });
    this.yExtent = softened(finiteExtent(all), soft);
    return { columns, series };
  }

  draw() {
    const { data, range } = this.last;
    const ds = this.box.dataset;
    const n = data.x.length;
    ds.start = String(range.start);
    ds.end = String(range.end);
    if (!n) {
      this.destroyPlot();
      this.box.replaceChildren(el("div", { class: "empty", text: "No data in this range." }));
      ds.points = "0";
      delete ds.xEnd;
      ds.annotations = "0";
      ds.ready = "1";
      return;
    }
    const { columns, series } = this.build();
    const shape = series.map((s) => s.label).join("\u0000") + "|" + this.opts.xMode;
    if (this.plot && this.shape === shape) {
      this.plot.setData(columns, true);
    } else {
      this.destroyPlot();
      this.box.replaceChildren();
      this.shape = shape;
      this.plot = new uPlot(this.options(series), columns, this.box);
    }
    ds.points = String(n);
    ds.xEnd = String(data.x[n - 1]);
    ds.ready = "1";
  }

  options(series) {
    const fg = cssVar("--muted");
    const grid = cssVar("--grid");
    const unit = this.opts.unit;
    const axis = { stroke: fg, font: AXIS_FONT, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } };
    const time = this.opts.xMode === "time";
    return {
      width: Math.max(120, this.box.clientWidth || 600),
      height: this.opts.height,
      legend: { show: this.opts.legend },
      scales: {
        x: { time },
        y: { range: () => this.yExtent },
      },
      series: series.map((s, i) => (i === 0 ? { label: this.opts.xLabel || (time ? "time" : this.opts.xMode) } : Object.assign({ value: (u, v) => fmtNum(v, unit) }, s))),
      axes: [Object.assign(xAxisTicks(time, Y_AXIS_PX), axis), Object.assign({ size: yAxisSize, values: (u, vals) => vals.map((v) => fmtNum(v, unit)) }, axis)],
      cursor: { drag: { x: true, y: false, setScale: false }, sync: this.opts.sync ? { key: this.opts.sync } : undefined },
      hooks: {
        drawAxes: [(u) => this.paintBands(u)],
        draw: [(u) => this.paintAnnotations(u)],
        setSelect: [(u) => this.selected(u)],
        setCursor: this.opts.legend ? [] : [(u) => this.hovered(u)],
        ready: [(u) => this.wire(u)],
      },
    };
  }

  // Min/max spread of each bucket as a filled band behind the lines (gaps break it).
  paintBands(u) {
    const ctx = u.ctx;
    const x = u.data[0];
    const { left, top, width, height } = u.bbox;
    ctx.save();
    ctx.beginPath();
    ctx.rect(left, top, width, height);
    ctx.clip(); // a band past the y range stays inside the plot
    for (const band of this.bands) {
      ctx.fillStyle = band.color;
      let open = [];
      const flush = () => {
        if (open.length > 1) {
          ctx.beginPath();
          open.forEach(([px, , hi], k) => (k ? ctx.lineTo(px, hi) : ctx.moveTo(px, hi)));
          for (let k = open.length - 1; k >= 0; k -= 1) ctx.lineTo(open[k][0], open[k][1]);
          ctx.closePath();
          ctx.fill();
        }
        open = [];
      };
      for (let i = 0; i < x.length; i += 1) {
        const lo = band.min[i];
        const hi = band.max[i];
        if (lo === null || hi === null || !Number.isFinite(lo) || !Number.isFinite(hi)) {
          flush();
          continue;
        }
        open.push([u.valToPos(x[i], "x", true), u.valToPos(lo, "y", true), u.valToPos(hi, "y", true)]);
      }
      flush();
    }
    ctx.restore();
  }

  // x position of a time stamp: itself on a time axis, else the x of the nearest bucket.
  xOfTs(ts) {
    if (this.opts.xMode === "time") return ts;
    const t = this.last.data.ts;
    if (!t || !t.length) return null;
    const i = Math.min(t.length - 1, lowerBound(t, ts));
    return this.last.data.x[i];
  }

  tsOfX(x) {
    if (this.opts.xMode === "time") return x;
    const { data } = this.last;
    const i = Math.min(data.x.length - 1, lowerBound(data.x, x));
    return data.ts[i];
  }

  // Alerts as vertical markers (a band while an alert lasted), coloured by severity.
  paintAnnotations(u) {
    const list = this.opts.annotations;
    let drawn = 0;
    this.box.dataset.annotations = "0";
    if (!list || !list.length) return;
    const ctx = u.ctx;
    const { top, height, left, width } = u.bbox;
    ctx.save();
    for (const a of list) {
      const x0 = this.xOfTs(a.ts);
      if (x0 === null) continue;
      const c = cssVar(a.severity === "critical" ? "--bad" : a.severity === "warning" ? "--warn" : "--info");
      const p0 = u.valToPos(x0, "x", true);
      if (p0 < left - 1 || p0 > left + width + 1) continue;
      if (a.end) {
        const p1 = Math.min(left + width, u.valToPos(this.xOfTs(a.end), "x", true));
        ctx.fillStyle = withAlpha(c, 0.12);
        ctx.fillRect(p0, top, Math.max(2, p1 - p0), height);
      }
      ctx.strokeStyle = c;
      ctx.lineWidth = 1.5;
      ctx.setLineDash([4, 3]);
      ctx.beginPath();
      ctx.moveTo(p0, top);
      ctx.lineTo(p0, top + height);
      ctx.stroke();
      drawn += 1;
    }
    ctx.restore();
    this.box.dataset.annotations = String(drawn);
  }

  wire(u) {
    u.over.addEventListener("dblclick", () => this.opts.onReset && this.opts.onReset());
    u.over.addEventListener("click", () => {
      if (this.dragged || !this.opts.onPick || this.near === null) return;
      this.opts.onPick(this.near);
    });
    u.over.addEventListener("mousedown", () => (this.dragged = false));
    u.over.addEventListener("mouseleave", () => {
      this.near = null;
      this.readout.textContent = "";
    });
    if (this.opts.onPick) u.over.style.cursor = "pointer";
  }

  // The series whose value at the cursor is nearest the cursor's height.
  hovered(u) {
    const { idx, top } = u.cursor;
    this.near = null;
    if (idx === null || idx === undefined || top === null || top < 0) {
      this.readout.textContent = "";
      return;
    }
    const y = u.posToVal(top, "y");
    let best = Infinity;
    for (let i = 1; i < u.series.length; i += 1) {
      const v = u.data[i][idx];
      if (v === null || v === undefined) continue;
      if (Math.abs(v - y) < best) {
        best = Math.abs(v - y);
        this.near = i - 1;
      }
    }
    this.readout.textContent = this.near === null ? "" : `${u.series[this.near + 1].label}: ${fmtNum(u.data[this.near + 1][idx], this.opts.unit)}`;
  }

  selected(u) {
    const sel = u.select;
    if (sel.width < 4) return;
    this.dragged = true;
    const a = this.tsOfX(u.posToVal(sel.left, "x"));
    const b = this.tsOfX(u.posToVal(sel.left + sel.width, "x"));
    u.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
    if (this.opts.onRange && b > a) this.opts.onRange(a, b);
  }

  resize() {
    if (!this.plot) return;
    const w = Math.max(120, this.box.clientWidth);
    if (Math.abs(w - this.plot.width) > 2) this.plot.setSize({ width: w, height: this.opts.height });
  }

  destroyPlot() {
    if (this.plot) {
      this.plot.destroy();
      this.plot = null;
      this.shape = null;
    }
  }

  destroy() {
    this.observer.disconnect();
    this.destroyPlot();
  }
}

// Put several bucketed series (each with its own ts list) on one x axis: the union of buckets.
// items: [{ts:[], cols:{name: []}}]; returns {x, cols:[{name: []}]} with nulls where absent.
export function align(items) {
  const set = new Set();
  for (const it of items) for (const t of it.ts) set.add(t);
  const x = Array.from(set).sort((a, b) => a - b);
  const index = new Map(x.map((t, i) => [t, i]));
  const cols = items.map((it) => {
    const out = {};
    for (const [name, values] of Object.entries(it.cols)) {
      const col = new Array(x.length).fill(null);
      it.ts.forEach((t, i) => (col[index.get(t)] = values[i]));
      out[name] = col;
    }
    return out;
  });
  return { x, cols };
}
