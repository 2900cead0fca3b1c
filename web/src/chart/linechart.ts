/**
 * One scalar chart: every selected run as a line (raw faint behind, smoothed on top). uPlot, in
 * its faceted mode (mode 2), draws the axes and grid and handles the cursor and the zoom
 * selection; the lines are stroked here, each run from its own x column. Runs downsampled by the
 * server do not share x values (aligning 200 runs on a union of x values would cost 200 times the
 * points), and uPlot's per-series Path2D building took most of a smoothing frame: one plain
 * canvas path per run, from a multiply-add per coordinate, costs a fraction of it.
 */
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import type { XAxis } from "../lib/urlstate";
import { lowerBound, nearestIndex } from "../lib/columns";
import { yRange, type Slice } from "../lib/yrange";
import { axisMap, tracePolyline, type AxisMap } from "../lib/polyline";
import { fmtDuration, fmtNum, fmtStep, fmtTime } from "./format";
import { h, clear } from "../dom";
import { themeColors } from "../theme";

export interface LineSeries {
  key: string;
  color: string;
  x: Float64Array;
  step: Float64Array;
  wallTime: Float64Array;
  value: Float64Array;
  smoothed: Float64Array | null;
}

export interface LineChartOptions {
  xAxis: XAxis;
  logY: boolean;
  ignoreOutliers: boolean;
  /** The user zoomed (x window in x-axis units) or reset (null). */
  onZoom: (window: [number, number] | null) => void;
  /** Called after each draw (the benchmark and the tests watch it). */
  onDraw?: () => void;
}

/** Vertices closer than this (canvas pixels, both directions) to the last one drawn merge into it. */
const MERGE_PX = 0.5;

export class LineChart {
  readonly root: HTMLElement;
  private u: uPlot | null = null;
  private series: LineSeries[] = [];
  private opts: LineChartOptions;
  private tooltip: HTMLElement;
  private empty: HTMLElement;
  zoom: [number, number] | null = null;
  private width = 0;
  private height = 0;
  private ro: ResizeObserver;

  constructor(parent: HTMLElement, opts: LineChartOptions) {
    this.opts = opts;
    this.root = h("div", { class: "linechart" });
    this.tooltip = h("div", { class: "chart-tooltip", role: "tooltip" });
    this.empty = h("div", { class: "chart-empty", text: "No data for the selected runs" });
    this.root.append(this.tooltip, this.empty);
    parent.appendChild(this.root);
    this.ro = new ResizeObserver(() => this.resize());
    this.ro.observe(this.root);
  }

  setOptions(patch: Partial<LineChartOptions>): void {
    const rebuild = patch.xAxis !== undefined && patch.xAxis !== this.opts.xAxis || patch.logY !== undefined && patch.logY !== this.opts.logY;
    if (patch.xAxis !== undefined && patch.xAxis !== this.opts.xAxis) this.zoom = null;
    this.opts = { ...this.opts, ...patch };
    if (rebuild) this.build();
    else this.rescale();
  }

  setData(series: LineSeries[]): void {
    this.series = series;
    this.empty.classList.toggle("show", series.length === 0);
    // The lines are drawn from this.series in the draw hooks: new data needs no new uPlot, only
    // a redraw (rescale draws, synchronously).
    if (this.u === null) this.build();
    else this.rescale();
  }

  /** The x extent of the data (all series). */
  private dataXRange(): [number, number] | null {
    let lo = Infinity;
    let hi = -Infinity;
    for (const s of this.series) {
      if (s.x.length === 0) continue;
      lo = Math.min(lo, s.x[0]!);
      hi = Math.max(hi, s.x[s.x.length - 1]!);
    }
    if (lo > hi) return null;
    if (lo === hi) return [lo - 1, hi + 1];
    return [lo, hi];
  }

  private xWindow(): [number, number] | null {
    return this.zoom ?? this.dataXRange();
  }

  /** The last y range and what it was computed from: a smoothing change keeps both. */
  private yCache: { values: Float64Array[]; xs: Float64Array[]; xw: [number, number] | null; ignore: boolean; log: boolean; range: [number, number] } | null = null;

  private yWindow(xw: [number, number] | null): [number, number] {
    const c = this.yCache;
    const ignore = this.opts.ignoreOutliers;
    const log = this.opts.logY;
    if (
      c &&
      c.ignore === ignore &&
      c.log === log &&
      (c.xw === xw || (c.xw !== null && xw !== null && c.xw[0] === xw[0] && c.xw[1] === xw[1])) &&
      c.values.length === this.series.length &&
      this.series.every((s, i) => s.value === c.values[i] && s.x === c.xs[i])
    ) {
      return c.range;
    }
    const slices: Slice[] = [];
    for (const s of this.series) {
      const a = xw ? lowerBound(s.x, xw[0]) : 0;
      const b = xw ? lowerBound(s.x, xw[1] + Number.EPSILON * Math.abs(xw[1]) + 1e-300) : s.x.length;
      // The range comes from the raw values only: a smoothed value always lies between raw
      // ones, and a range that does not move with the smoothing slider lets the faint raw
      // layer be drawn once and reused while the slider moves.
      slices.push({ values: s.value, start: a, end: b });
    }
    const range = yRange(slices, { ignoreOutliers: ignore, log }) ?? (log ? [0.1, 10] : [0, 1]);
    this.yCache = { values: this.series.map((s) => s.value), xs: this.series.map((s) => s.x), xw: xw ? [xw[0], xw[1]] : null, ignore, log, range };
    return range;
  }

  /** Pixel maps of the current scales, in canvas pixels. */
  private maps(u: uPlot): [AxisMap, AxisMap] {
    const { left, top, width, height } = u.bbox;
    const sx = u.scales.x!;
    const sy = u.scales.y!;
    return [axisMap(sx.min!, sx.max!, left, left + width, false), axisMap(sy.min!, sy.max!, top + height, top, this.opts.logY)];
  }

  /** Strokes each series' ys as one path, clipped to the plot. */
  private strokeLines(ctx: CanvasRenderingContext2D, u: uPlot, lines: { s: LineSeries; ys: Float64Array; color: string }[], width: number): void {
    if (lines.length === 0) return;
    const [ax, ay] = this.maps(u);
    const { left, top, width: w, height } = u.bbox;
    ctx.save();
    ctx.beginPath();
    ctx.rect(left, top, w, height);
    ctx.clip();
    ctx.lineWidth = width;
    ctx.lineJoin = "round";
    ctx.lineCap = "butt";
    for (const { s, ys, color } of lines) {
      ctx.strokeStyle = color;
      ctx.beginPath();
      tracePolyline(s.x, ys, Math.min(s.x.length, ys.length), ax, ay, MERGE_PX, ctx);
      ctx.stroke();
    }
    ctx.restore();
  }

  /** Many lines: one device pixel wide, which software rasterisers draw as hairlines, several
   * times faster than wider antialiased strokes; few lines: a little heavier, easier to read. */
  private lineWidth(): number {
    return this.series.length > 20 ? 1 / devicePixelRatio : 1.5;
  }

  /** The lines in front: smoothed where there is smoothing, raw otherwise (runs first, then smoothed ones on top). */
  private drawLines(u: uPlot): void {
    const smoothing = this.series.some((s) => s.smoothed);
    const lines: { s: LineSeries; ys: Float64Array; color: string }[] = [];
    for (const s of this.series) if (!(smoothing && s.smoothed)) lines.push({ s, ys: s.value, color: s.color });
    for (const s of this.series) if (s.smoothed) lines.push({ s, ys: s.smoothed, color: s.color });
    this.strokeLines(u.ctx, u, lines, this.lineWidth());
  }

  /**
   * The faint raw lines behind smoothed ones, drawn into an offscreen canvas and reused while
   * only the smoothing changes (same raw data, scales and size).
   */
  private rawLayer: { canvas: HTMLCanvasElement; key: string; data: LineSeries[] } | null = null;
  private rawFrame = 0;

  private drawRawLayer(u: uPlot): void {
    const now = this.rawFrame === -1;
    if (now) this.rawFrame = 0;
    const smoothed = this.series.filter((s) => s.smoothed);
    if (smoothed.length === 0) return;
    const sx = u.scales.x!;
    const sy = u.scales.y!;
    const key = [u.width, u.height, devicePixelRatio, sx.min, sx.max, sy.min, sy.max, this.opts.logY, themeColors().bg].join(",");
    const same = this.rawLayer && this.rawLayer.key === key && this.rawLayer.data.length === smoothed.length && this.rawLayer.data.every((s, i) => s.value === smoothed[i]!.value && s.x === smoothed[i]!.x && s.color === smoothed[i]!.color);
    if (!same && !now && this.rawFrame === 0) {
      // New raw lines (new data, zoom, size): the smoothed lines are painted first and the
      // faint layer behind them in the frame after the next (that next frame's callbacks, the
      // first-paint mark among them, run before its work), so a chart shows its lines sooner.
      this.rawFrame = requestAnimationFrame(() => {
        this.rawFrame = requestAnimationFrame(() => {
          this.rawFrame = -1; // the redraw this asks for (uPlot draws in a microtask) draws the layer
          this.u?.redraw(false);
        });
      });
      return;
    }
    if (!same) {
      const canvas = this.rawLayer?.canvas ?? document.createElement("canvas");
      canvas.width = u.ctx.canvas.width;
      canvas.height = u.ctx.canvas.height;
      const ctx = canvas.getContext("2d")!;
      ctx.clearRect(0, 0, canvas.width, canvas.height);
      this.strokeLines(ctx, u, smoothed.map((s) => ({ s, ys: s.value, color: s.color + "40" })), 1);
      this.rawLayer = { canvas, key, data: smoothed };
    }
    u.ctx.drawImage(this.rawLayer!.canvas, 0, 0);
  }

  private rescale(): void {
    if (!this.u) return;
    const xw = this.xWindow();
    const yw = this.yWindow(xw);
    this.u.batch(() => {
      if (xw) this.u!.setScale("x", { min: xw[0], max: xw[1] });
      this.u!.setScale("y", { min: yw[0], max: yw[1] });
    });
  }

  private xFormatter(): (v: number) => string {
    switch (this.opts.xAxis) {
      case "relative":
        return fmtDuration;
      case "wall_time":
        return fmtTime;
      default:
        return fmtStep;
    }
  }

  private build(): void {
    this.u?.destroy();
    this.u = null;
    const rect = this.root.getBoundingClientRect();
    this.width = Math.max(100, Math.floor(rect.width));
    this.height = Math.max(80, Math.floor(rect.height));
    const t = themeColors();
    // uPlot's faceted mode takes the x scale from a series: one invisible, empty one. The lines
    // are stroked in the draw hooks (drawLines), not by uPlot.
    const seriesOpts: uPlot.Series[] = [{}, { show: false, points: { show: false }, facets: [{ scale: "x", auto: false }, { scale: "y", auto: false }] } as uPlot.Series];
    const axisFont = `11px ${t.font}`;
    const xfmt = this.xFormatter();
    const isTime = this.opts.xAxis === "wall_time";
    const opts: uPlot.Options = {
      mode: 2,
      width: this.width,
      height: this.height,
      pxAlign: 0,
      legend: { show: false },
      cursor: {
        drag: { x: true, y: false, setScale: false },
        points: { show: false },
        bind: { dblclick: () => () => null },
        dataIdx: () => null,
      } as uPlot.Cursor,
      select: { show: true, left: 0, top: 0, width: 0, height: 0 },
      scales: {
        x: { time: isTime, auto: false, range: (_u, min, max) => [min, max] },
        y: { auto: false, distr: this.opts.logY ? 3 : 1, log: 10, range: (_u, min, max) => [min, max] },
      },
      axes: [
        {
          stroke: t.axis,
          grid: { stroke: t.grid, width: 1 },
          ticks: { stroke: t.grid, width: 1, size: 4 },
          font: axisFont,
          size: 28,
          space: 60,
          ...(isTime ? {} : { values: (_u: uPlot, vals: number[]) => vals.map(xfmt) }),
        },
        {
          stroke: t.axis,
          grid: { stroke: t.grid, width: 1 },
          ticks: { stroke: t.grid, width: 1, size: 4 },
          font: axisFont,
          size: 52,
          space: 28,
          values: (_u: uPlot, vals: number[]) => vals.map((v) => fmtNum(v, 3)),
        },
      ],
      series: seriesOpts,
      hooks: {
        setSelect: [(u) => this.onSelect(u)],
        setCursor: [(u) => this.onCursor(u)],
        drawAxes: [(u) => this.drawRawLayer(u)],
        draw: [(u) => this.drawLines(u), (u) => this.drawMarks(u), () => this.opts.onDraw?.()],
      },
    };
    const data = [null, [new Float64Array(0), new Float64Array(0)]];
    this.u = new uPlot(opts, data as unknown as uPlot.AlignedData, (u, init) => {
      this.root.insertBefore(u.root, this.tooltip);
      init();
    });
    this.u.over.addEventListener("dblclick", () => this.resetZoom());
    this.u.over.addEventListener("mouseleave", () => this.tooltip.classList.remove("show"));
    this.rescale();
  }

  /** A series of a few points (an eval per epoch, a final metric) would be invisible as a
   * line alone, so its points get dots. */
  private drawMarks(u: uPlot): void {
    const ctx = u.ctx;
    const { left, top, width, height } = u.bbox;
    ctx.save();
    ctx.beginPath();
    ctx.rect(left, top, width, height);
    ctx.clip();
    const r = 2.5 * devicePixelRatio;
    for (const s of this.series) {
      if (s.x.length > 24) continue;
      const ys = s.smoothed ?? s.value;
      ctx.fillStyle = s.color;
      for (let i = 0; i < s.x.length; i++) {
        const y = ys[i]!;
        if (!Number.isFinite(y) || (this.opts.logY && y <= 0)) continue;
        ctx.beginPath();
        ctx.arc(u.valToPos(s.x[i]!, "x", true), u.valToPos(y, "y", true), r, 0, 2 * Math.PI);
        ctx.fill();
      }
    }
    ctx.restore();
  }

  /** Colours come from the theme when the chart is built: a new theme rebuilds it. */
  rebuild(): void {
    this.rawLayer = null;
    this.build();
  }

  resetZoom(): void {
    if (this.zoom === null) return;
    this.zoom = null;
    this.rescale();
    this.opts.onZoom(null);
  }

  setZoom(window: [number, number] | null): void {
    this.zoom = window;
    this.rescale();
  }

  private onSelect(u: uPlot): void {
    const sel = u.select;
    if (sel.width < 4) return;
    const min = u.posToVal(sel.left, "x");
    const max = u.posToVal(sel.left + sel.width, "x");
    u.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
    this.zoom = [min, max];
    this.rescale();
    this.opts.onZoom(this.zoom);
  }

  private onCursor(u: uPlot): void {
    const left = u.cursor.left ?? -1;
    if (left < 0 || this.series.length === 0) {
      this.tooltip.classList.remove("show");
      return;
    }
    const xv = u.posToVal(left, "x");
    const rows: { s: LineSeries; i: number; v: number; sm: number }[] = [];
    for (const s of this.series) {
      const i = nearestIndex(s.x, xv);
      if (i < 0) continue;
      // Skip runs whose nearest point is far off screen (they ended before the cursor).
      const px = u.valToPos(s.x[i]!, "x");
      if (Math.abs(px - left) > 40) continue;
      const v = s.value[i]!;
      const sm = s.smoothed ? s.smoothed[i]! : v;
      rows.push({ s, i, v, sm });
    }
    if (rows.length === 0) {
      this.tooltip.classList.remove("show");
      return;
    }
    rows.sort((a, b) => (Number.isNaN(b.sm) ? -1 : Number.isNaN(a.sm) ? 1 : b.sm - a.sm));
    const smoothing = this.series.some((s) => s.smoothed);
    clear(this.tooltip);
    const table = h("table");
    const head = h("tr", null, h("th"), h("th", { text: "Run" }), smoothing ? h("th", { class: "num", text: "Smoothed" }) : null, h("th", { class: "num", text: "Value" }), h("th", { class: "num", text: "Step" }));
    table.appendChild(head);
    const max = 16;
    for (const r of rows.slice(0, max)) {
      const sw = h("span", { class: "swatch" });
      sw.style.background = r.s.color;
      table.appendChild(
        h(
          "tr",
          null,
          h("td", null, sw),
          h("td", { class: "run", text: r.s.key }),
          smoothing ? h("td", { class: "num", text: fmtNum(r.sm, 5) }) : null,
          h("td", { class: "num", text: fmtNum(r.v, 5) }),
          h("td", { class: "num", text: fmtStep(r.s.step[r.i]!) }),
        ),
      );
    }
    this.tooltip.appendChild(table);
    if (rows.length > max) this.tooltip.appendChild(h("div", { class: "more", text: `and ${rows.length - max} more runs` }));
    const first = rows[0]!;
    const xLabel = this.opts.xAxis === "wall_time" ? fmtTime(first.s.wallTime[first.i]!) : this.opts.xAxis === "relative" ? fmtDuration(first.s.x[first.i]!) : "";
    if (xLabel) this.tooltip.insertBefore(h("div", { class: "xlabel", text: xLabel }), table);
    this.tooltip.classList.add("show");
    // Keep the tooltip inside the card: right of the cursor, or left when near the edge.
    const plotLeft = u.over.offsetLeft;
    const tw = this.tooltip.offsetWidth;
    const x = plotLeft + left + 14;
    this.tooltip.style.left = `${x + tw > this.width ? Math.max(0, plotLeft + left - tw - 14) : x}px`;
    this.tooltip.style.top = `${Math.max(0, (u.cursor.top ?? 0) - 10)}px`;
  }

  private resize(): void {
    const rect = this.root.getBoundingClientRect();
    const w = Math.floor(rect.width);
    const hgt = Math.floor(rect.height);
    if (!this.u || w < 50 || hgt < 50 || (w === this.width && hgt === this.height)) return;
    this.width = w;
    this.height = hgt;
    this.u.setSize({ width: w, height: hgt });
  }

  /** Plot-area pixel width, for asking the server for about one point per pixel column. */
  plotWidth(): number {
    return this.u ? this.u.bbox.width / devicePixelRatio : Math.max(200, this.root.clientWidth - 60);
  }

  /** The chart as a PNG: background, title and a legend of the runs drawn with it. */
  async toPNG(title: string): Promise<Blob> {
    const u = this.u;
    const t = themeColors();
    const dpr = devicePixelRatio;
    const src = u ? u.ctx.canvas : null;
    const w = src ? src.width : 600;
    const legendRows = Math.min(this.series.length, 30);
    const lh = 16 * dpr;
    const top = 28 * dpr;
    const hgt = (src ? src.height : 300) + top + legendRows * lh + 10 * dpr;
    const c = document.createElement("canvas");
    c.width = w;
    c.height = hgt;
    const ctx = c.getContext("2d")!;
    ctx.fillStyle = t.bg;
    ctx.fillRect(0, 0, w, hgt);
    ctx.fillStyle = t.fg;
    ctx.font = `600 ${13 * dpr}px ${t.font}`;
    ctx.fillText(title, 10 * dpr, 18 * dpr);
    if (src) ctx.drawImage(src, 0, top);
    ctx.font = `${11 * dpr}px ${t.font}`;
    let y = top + (src ? src.height : 0) + 14 * dpr;
    for (const s of this.series.slice(0, legendRows)) {
      ctx.fillStyle = s.color;
      ctx.fillRect(10 * dpr, y - 8 * dpr, 10 * dpr, 3 * dpr);
      ctx.fillStyle = t.fg;
      ctx.fillText(s.key, 26 * dpr, y);
      y += lh;
    }
    return new Promise((resolve, reject) => c.toBlob((b) => (b ? resolve(b) : reject(new Error("PNG encoding failed"))), "image/png"));
  }

  destroy(): void {
    if (this.rawFrame > 0) cancelAnimationFrame(this.rawFrame);
    this.ro.disconnect();
    this.u?.destroy();
    this.u = null;
    this.root.remove();
  }
}
