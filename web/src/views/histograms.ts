/**
 * Histograms (offset: one ridge per step, newest in front; overlay: every step on one
 * baseline) drawn on a canvas, and distributions (TensorBoard's nine percentiles as bands
 * over steps) drawn with uPlot.
 */
import uPlot from "uplot";
import { h } from "../dom";
import { toFloat64, type JsonNumber } from "../lib/columns";
import { extent, rebin, type HistStep } from "../lib/histogram";
import { fmtNum, fmtStep } from "../chart/format";
import { themeColors, currentTheme } from "../theme";
import { RunTagView, type RunTagSpec } from "./runtagcards";
import type { ViewContext, ViewFactory } from "./view";

type Mode = "offset" | "overlay";
let mode: Mode = localStorage.getItem("tbscope_hist_mode") === "overlay" ? "overlay" : "offset";

interface HistResponse {
  columns: { step: number[]; wall_time: JsonNumber[]; left: JsonNumber[][]; right: JsonNumber[][]; count: JsonNumber[][] };
}

const BINS = 40;

function stepColor(t: number, dark: boolean): string {
  // Older steps pale, newer ones saturated, in the accent's hue.
  const l = dark ? 30 + 40 * t : 78 - 42 * t;
  return `hsl(24 ${dark ? 85 : 90}% ${l}%)`;
}

function drawHistogram(canvas: HTMLCanvasElement, steps: number[], data: Float64Array[], lo: number, hi: number, hover: number): void {
  const dpr = devicePixelRatio;
  const W = canvas.clientWidth;
  const H = canvas.clientHeight;
  if (W === 0 || H === 0) return;
  canvas.width = Math.round(W * dpr);
  canvas.height = Math.round(H * dpr);
  const ctx = canvas.getContext("2d")!;
  ctx.scale(dpr, dpr);
  const t = themeColors();
  const dark = currentTheme() === "dark";
  ctx.clearRect(0, 0, W, H);
  const padL = 8;
  const padR = mode === "offset" ? 56 : 12;
  const padB = 22;
  const padT = 8;
  const plotW = W - padL - padR;
  const plotH = H - padT - padB;
  let maxC = 0;
  for (const d of data) for (let i = 0; i < d.length; i++) maxC = Math.max(maxC, d[i]!);
  if (maxC === 0) maxC = 1;
  const n = data.length;
  const ridge = mode === "offset" ? plotH * 0.45 : plotH;
  const offsetSpan = mode === "offset" ? plotH - ridge : 0;
  const x = (k: number) => padL + ((k + 0.5) / BINS) * plotW;
  ctx.font = `10.5px ${t.font}`;
  ctx.lineWidth = 1;
  // Axis: values along x.
  ctx.fillStyle = t.axis;
  ctx.strokeStyle = t.grid;
  ctx.beginPath();
  ctx.moveTo(padL, H - padB + 0.5);
  ctx.lineTo(padL + plotW, H - padB + 0.5);
  ctx.stroke();
  for (let k = 0; k <= 4; k++) {
    const v = lo + ((hi - lo) * k) / 4;
    const px = padL + (plotW * k) / 4;
    ctx.textAlign = k === 0 ? "left" : k === 4 ? "right" : "center";
    ctx.fillText(fmtNum(v, 3), px, H - 6);
  }
  for (let s = 0; s < n; s++) {
    const d = data[s]!;
    const base = padT + ridge + (n > 1 ? (offsetSpan * s) / (n - 1) : offsetSpan);
    const tcol = n > 1 ? s / (n - 1) : 1;
    ctx.beginPath();
    ctx.moveTo(x(0), base);
    for (let k = 0; k < BINS; k++) ctx.lineTo(x(k), base - (d[k]! / maxC) * ridge);
    ctx.lineTo(x(BINS - 1), base);
    if (mode === "offset") {
      ctx.fillStyle = t.bg;
      ctx.fill();
    }
    ctx.strokeStyle = s === hover ? t.fg : stepColor(tcol, dark);
    ctx.lineWidth = s === hover ? 1.8 : 1;
    ctx.stroke();
  }
  if (mode === "offset" && n > 0) {
    ctx.fillStyle = t.axis;
    ctx.textAlign = "left";
    const label = (s: number) => ctx.fillText(fmtStep(steps[s]!), padL + plotW + 6, padT + ridge + (n > 1 ? (offsetSpan * s) / (n - 1) : offsetSpan) + 3);
    label(0);
    if (n > 1) label(n - 1);
    if (hover >= 0 && hover !== 0 && hover !== n - 1) {
      ctx.fillStyle = t.fg;
      label(hover);
    }
  }
}

const histogramSpec: RunTagSpec = {
  kind: "histograms",
  title: "Histograms",
  cardClass: "hist-card",
  emptyDetail: "Histograms logged with add_histogram or tf.summary.histogram appear here.",
  toolbar(_ctx, view) {
    const seg = h(
      "div",
      { class: "segmented", role: "radiogroup", "aria-label": "Histogram mode" },
      (["offset", "overlay"] as const).map((m) => {
        const b = h("button", { type: "button", role: "radio", "data-mode": m, "aria-checked": String(mode === m), text: m === "offset" ? "Offset" : "Overlay" });
        b.addEventListener("click", () => {
          mode = m;
          localStorage.setItem("tbscope_hist_mode", m);
          for (const x of seg.querySelectorAll<HTMLElement>("[data-mode]")) x.setAttribute("aria-checked", String(x.dataset.mode === m));
          view.refreshAll();
        });
        return b;
      }),
    );
    return [seg];
  },
  body(ctx, run, tag, el) {
    const canvas = h("canvas", { class: "hist-canvas" });
    const tip = h("div", { class: "chart-tooltip" });
    let steps: number[] = [];
    let data: Float64Array[] = [];
    let lo = 0;
    let hi = 1;
    let hover = -1;
    const redraw = () => drawHistogram(canvas, steps, data, lo, hi, hover);
    const ro = new ResizeObserver(redraw);
    canvas.addEventListener("mousemove", (e) => {
      if (data.length === 0) return;
      const r = canvas.getBoundingClientRect();
      const fy = (e.clientY - r.top) / r.height;
      const fx = Math.min(0.9999, Math.max(0, (e.clientX - r.left - 8) / (r.width - (mode === "offset" ? 64 : 20))));
      hover = mode === "offset" ? Math.round(Math.min(1, Math.max(0, (fy - 0.45) / 0.45)) * (data.length - 1)) : data.length - 1;
      const k = Math.floor(fx * BINS);
      const d = data[hover]!;
      tip.replaceChildren(
        h("div", { text: `step ${fmtStep(steps[hover]!)}` }),
        h("div", { class: "xlabel", text: `[${fmtNum(lo + ((hi - lo) * k) / BINS, 4)}, ${fmtNum(lo + ((hi - lo) * (k + 1)) / BINS, 4)}): ${fmtNum(d[k]!, 4)}` }),
      );
      tip.classList.add("show");
      tip.style.left = `${Math.min(e.clientX - r.left + 12, r.width - 160)}px`;
      tip.style.top = `${e.clientY - r.top + 12}px`;
      redraw();
    });
    canvas.addEventListener("mouseleave", () => {
      hover = -1;
      tip.classList.remove("show");
      redraw();
    });
    return {
      async load(signal) {
        const res = await ctx.api.get<HistResponse>("histograms", { tag, run, points: 51 }, signal);
        const c = res.columns;
        const hs: HistStep[] = c.step.map((_, i) => ({ left: toFloat64(c.left[i]), right: toFloat64(c.right[i]), count: toFloat64(c.count[i]) }));
        const ex = extent(hs);
        steps = c.step;
        if (!ex) {
          data = [];
          el.replaceChildren(h("div", { class: "chart-empty show", text: "Empty histograms" }));
          return;
        }
        [lo, hi] = ex;
        data = hs.map((s) => rebin(s, lo, hi, BINS));
        if (!canvas.isConnected) {
          el.replaceChildren(canvas, tip);
          ro.observe(canvas);
        }
        redraw();
      },
      destroy() {
        ro.disconnect();
      },
    };
  },
};

interface DistResponse {
  basis_points: number[];
  columns: { step: number[]; wall_time: JsonNumber[]; values: JsonNumber[][] };
}

const distributionSpec: RunTagSpec = {
  kind: "histograms",
  title: "Distributions",
  cardClass: "dist-card",
  emptyDetail: "Distributions are drawn from histograms: log some with add_histogram.",
  body(ctx, run, tag, el) {
    let u: uPlot | null = null;
    const box = h("div", { class: "dist-chart" });
    let ro: ResizeObserver | null = null;
    return {
      async load(signal) {
        const res = await ctx.api.get<DistResponse>("distributions", { tag, run, points: 51 }, signal);
        const c = res.columns;
        const k = res.basis_points.length;
        const xs = Float64Array.from(c.step);
        const ys: Float64Array[] = [];
        for (let j = 0; j < k; j++) ys.push(Float64Array.from(c.values.map((row) => toFloat64(row)[j] ?? NaN)));
        const t = themeColors();
        const color = ctx.store.colorOf(run);
        const series: uPlot.Series[] = [{}];
        for (let j = 0; j < k; j++) {
          const median = res.basis_points[j] === 5000;
          series.push({ label: `${res.basis_points[j]! / 100}%`, stroke: median ? color : color + "55", width: median ? 1.5 : 0.5, points: { show: false } });
        }
        const bands: uPlot.Band[] = [];
        // uPlot bands go from the upper series down to the lower one.
        for (let j = 0; j < Math.floor(k / 2); j++) bands.push({ series: [k - j, j + 1], fill: color + ["1f", "2e", "40", "55"][Math.min(3, j)]! });
        u?.destroy();
        el.replaceChildren(box);
        const rect = box.getBoundingClientRect();
        const axis = (fmt: (v: number) => string): uPlot.Axis => ({ stroke: t.axis, grid: { stroke: t.grid, width: 1 }, ticks: { stroke: t.grid, width: 1, size: 4 }, font: `11px ${t.font}`, values: (_u, vals) => vals.map(fmt) });
        u = new uPlot(
          {
            width: Math.max(200, rect.width),
            height: Math.max(120, rect.height),
            legend: { show: false },
            cursor: { points: { show: false }, drag: { x: true, y: false } },
            scales: { x: { time: false } },
            axes: [axis(fmtStep), { ...axis((v) => fmtNum(v, 3)), size: 50 }],
            series,
            bands,
          },
          [xs, ...ys] as uPlot.AlignedData,
          box,
        );
        if (!ro) {
          ro = new ResizeObserver(() => {
            const r = box.getBoundingClientRect();
            if (u && r.width > 50) u.setSize({ width: r.width, height: r.height });
          });
          ro.observe(box);
        }
      },
      destroy() {
        ro?.disconnect();
        u?.destroy();
      },
    };
  },
};

export const histograms: ViewFactory = (ctx: ViewContext) => new RunTagView(ctx, histogramSpec);
export const distributions: ViewFactory = (ctx: ViewContext) => new RunTagView(ctx, distributionSpec);
