/** Pure helpers of the profile timeline: units, ticks, zoom windows (tested with vitest). */

/** Microseconds, the Chrome trace's unit, in the unit that reads best. */
export function fmtMicros(us: number, digits = 4): string {
  if (!Number.isFinite(us)) return "–";
  const a = Math.abs(us);
  const fmt = (v: number) => String(Number(v.toPrecision(digits)));
  if (a >= 1e6) return `${fmt(us / 1e6)} s`;
  if (a >= 1e3) return `${fmt(us / 1e3)} ms`;
  return `${fmt(us)} µs`;
}

/** A round tick step (1, 2 or 5 times a power of ten) giving at most `maxTicks` ticks. */
export function tickStep(span: number, maxTicks = 8): number {
  if (!(span > 0)) return 1;
  const base = Math.pow(10, Math.floor(Math.log10(span / maxTicks)));
  for (const m of [1, 2, 5, 10]) if (span / (m * base) <= maxTicks) return m * base;
  return 10 * base;
}

/** The window [a, b] kept inside [lo, hi] and at least `minSpan` wide (a zoom never leaves the trace). */
export function clampWindow(a: number, b: number, lo: number, hi: number, minSpan = 1): [number, number] {
  const span = Math.min(hi - lo, Math.max(minSpan, b - a));
  const start = Math.max(lo, Math.min(a, hi - span));
  return [start, start + span];
}

/** The window after zooming by factor `k` (> 1 zooms out) around time `t`. */
export function zoomAround(a: number, b: number, t: number, k: number): [number, number] {
  return [t - (t - a) * k, t + (b - t) * k];
}
