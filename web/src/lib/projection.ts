/**
 * The embeddings view's arithmetic, free of the DOM: colours by a metadata column, search, the
 * 3-D rotation, fitting points to a canvas and finding the point under the cursor.
 */
import { compileFilter } from "./filter";

export type Cell = string | number | null;

export interface LegendEntry {
  label: string;
  color: string;
  count: number;
}

export interface Coloring {
  /** One CSS colour per point. */
  colors: string[];
  kind: "none" | "category" | "gradient";
  legend: LegendEntry[];
  /** For a gradient: the range the ramp spans. */
  min?: number;
  max?: number;
}

/** 20 distinguishable colours (Tableau 20 order); categories past them share OTHER. */
export const CATEGORY_COLORS = [
  "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
  "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2", "#c7c7c7", "#dbdb8d", "#9edae5",
]; // prettier-ignore
export const OTHER = "#9aa0a6";
export const MISSING = "#d0d3d8";

/**
 * Colours for `values`: a gradient over [min, max] for a numeric column, else a colour per
 * category, the most frequent first (ties by label), the rest as "other". Missing cells are grey.
 */
export function colorBy(values: readonly Cell[] | null, type: "number" | "string", ramp: (t: number) => string, fallback = "#2f6fde"): Coloring {
  if (!values) return { colors: [], kind: "none", legend: [] };
  if (type === "number") {
    let lo = Infinity;
    let hi = -Infinity;
    for (const v of values) if (typeof v === "number" && Number.isFinite(v)) ((lo = Math.min(lo, v)), (hi = Math.max(hi, v)));
    if (lo > hi) return { colors: values.map(() => MISSING), kind: "gradient", legend: [] };
    const colors = values.map((v) => (typeof v === "number" && Number.isFinite(v) ? ramp(hi > lo ? (v - lo) / (hi - lo) : 0.5) : MISSING));
    return { colors, kind: "gradient", legend: [], min: lo, max: hi };
  }
  const counts = new Map<string, number>();
  for (const v of values) if (v !== null) counts.set(String(v), (counts.get(String(v)) ?? 0) + 1);
  const order = [...counts.entries()].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  const color = new Map<string, string>();
  order.forEach(([label], i) => color.set(label, CATEGORY_COLORS[i] ?? OTHER));
  const legend: LegendEntry[] = order.slice(0, CATEGORY_COLORS.length).map(([label, count], i) => ({ label, color: CATEGORY_COLORS[i]!, count }));
  const rest = order.slice(CATEGORY_COLORS.length).reduce((s, [, c]) => s + c, 0);
  if (rest > 0) legend.push({ label: `${order.length - CATEGORY_COLORS.length} others`, color: OTHER, count: rest });
  const colors = values.map((v) => (v === null ? MISSING : (color.get(String(v)) ?? fallback)));
  return { colors, kind: "category", legend };
}

/** Indices of the points whose cell matches `query` (the runs filter's syntax: text, glob or
 * /regex/); null when the query is empty. */
export function search(values: readonly Cell[], query: string): { matches: number[] | null; error: string | null } {
  const f = compileFilter(query);
  if (f.empty) return { matches: null, error: null };
  if (f.error) return { matches: [], error: f.error };
  const out: number[] = [];
  values.forEach((v, i) => {
    if (v !== null && f.test(String(v))) out.push(i);
  });
  return { matches: out, error: null };
}

export interface Camera {
  yaw: number; // radians about the vertical axis
  pitch: number; // radians about the horizontal axis
  zoom: number;
  panX: number; // in units of the fitted scale
  panY: number;
}

export const HOME: Camera = { yaw: 0.6, pitch: 0.35, zoom: 1, panX: 0, panY: 0 };

/** Centre and half-extent of the points (the largest of the axes, so rotation keeps scale). */
export function bounds(xs: ArrayLike<number>, ys: ArrayLike<number>, zs: ArrayLike<number> | null): { cx: number; cy: number; cz: number; r: number } {
  const n = xs.length;
  const lo = [Infinity, Infinity, Infinity];
  const hi = [-Infinity, -Infinity, -Infinity];
  for (let i = 0; i < n; i++) {
    const p = [xs[i]!, ys[i]!, zs ? zs[i]! : 0];
    for (let k = 0; k < 3; k++) {
      if (!Number.isFinite(p[k]!)) continue;
      lo[k] = Math.min(lo[k]!, p[k]!);
      hi[k] = Math.max(hi[k]!, p[k]!);
    }
  }
  const mid = (k: number) => (lo[k]! <= hi[k]! ? (lo[k]! + hi[k]!) / 2 : 0);
  const cx = mid(0);
  const cy = mid(1);
  const cz = mid(2);
  let r = 0;
  if (zs) {
    // Rotation can turn any diagonal towards the viewer: fit the bounding sphere.
    for (let i = 0; i < n; i++) {
      const d = Math.hypot(xs[i]! - cx, ys[i]! - cy, zs[i]! - cz);
      if (Number.isFinite(d)) r = Math.max(r, d);
    }
  } else {
    for (let k = 0; k < 2; k++) if (lo[k]! <= hi[k]!) r = Math.max(r, (hi[k]! - lo[k]!) / 2);
  }
  return { cx, cy, cz, r: r > 0 ? r : 1 };
}

/**
 * Screen positions of the points: centred, rotated (3-D: yaw then pitch, orthographic with a
 * little perspective), scaled to fit `width` x `height` less `pad`, then zoomed and panned.
 * `depth` is in [0, 1], 1 nearest the viewer (0.5 for every point in 2-D).
 */
export function toScreen(
  xs: ArrayLike<number>,
  ys: ArrayLike<number>,
  zs: ArrayLike<number> | null,
  cam: Camera,
  width: number,
  height: number,
  pad = 16,
): { sx: Float32Array; sy: Float32Array; depth: Float32Array } {
  const n = xs.length;
  const b = bounds(xs, ys, zs);
  const scale = (Math.max(1, Math.min(width, height) / 2 - pad) / b.r) * cam.zoom;
  const sx = new Float32Array(n);
  const sy = new Float32Array(n);
  const depth = new Float32Array(n);
  const cyaw = Math.cos(cam.yaw);
  const syaw = Math.sin(cam.yaw);
  const cp = Math.cos(cam.pitch);
  const sp = Math.sin(cam.pitch);
  const ox = width / 2 + cam.panX * scale;
  const oy = height / 2 + cam.panY * scale;
  for (let i = 0; i < n; i++) {
    let x = xs[i]! - b.cx;
    let y = ys[i]! - b.cy;
    if (zs) {
      const z = zs[i]! - b.cz;
      const x1 = cyaw * x + syaw * z;
      const z1 = -syaw * x + cyaw * z;
      const y1 = cp * y - sp * z1;
      const z2 = sp * y + cp * z1;
      const persp = 1 / (1 - 0.15 * (z2 / b.r));
      x = x1 * persp;
      y = y1 * persp;
      depth[i] = 0.5 + 0.5 * Math.max(-1, Math.min(1, z2 / b.r));
    } else depth[i] = 0.5;
    sx[i] = ox + x * scale;
    sy[i] = oy - y * scale; // y up
  }
  return { sx, sy, depth };
}

/** The point nearest (px, py) within `radius` pixels (the front-most on ties), or -1. */
export function nearest(sx: Float32Array, sy: Float32Array, depth: Float32Array, px: number, py: number, radius = 8, visible?: (i: number) => boolean): number {
  let best = -1;
  let bestD = radius * radius;
  for (let i = 0; i < sx.length; i++) {
    if (visible && !visible(i)) continue;
    const dx = sx[i]! - px;
    const dy = sy[i]! - py;
    const d = dx * dx + dy * dy;
    if (d < bestD || (d === bestD && best >= 0 && depth[i]! > depth[best]!)) {
      best = i;
      bestD = d;
    }
  }
  return best;
}

/** Draw order: far points first, so near ones cover them. */
export function backToFront(depth: Float32Array): Uint32Array {
  const order = new Uint32Array(depth.length);
  for (let i = 0; i < order.length; i++) order[i] = i;
  return order.sort((a, b) => depth[a]! - depth[b]!);
}
