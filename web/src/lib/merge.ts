/**
 * Zooming refetches one window of a series at full resolution (the server downsamples inside
 * the window only); the result replaces the overview's points inside the window and keeps the
 * overview outside it, so panning out never shows a hole.
 */
import { lowerBound, upperBound } from "./columns";

export interface SeriesColumns {
  step: Float64Array;
  wallTime: Float64Array;
  value: Float64Array;
  smoothed: Float64Array | null;
}

/**
 * `lo`..`hi` is the window (inclusive) along `key`: steps for a step axis, wall time for the
 * wall-time and relative axes (relative time is wall time minus the series' first point).
 */
export function mergeWindow(
  overview: SeriesColumns,
  detail: SeriesColumns,
  lo: number,
  hi: number,
  key: "step" | "wallTime" = "step",
): SeriesColumns {
  const a = lowerBound(overview[key], lo);
  const b = upperBound(overview[key], hi);
  const da = lowerBound(detail[key], lo);
  const db = upperBound(detail[key], hi);
  const n = a + (db - da) + (overview.step.length - b);
  const withSmoothed = overview.smoothed !== null && detail.smoothed !== null;
  const out: SeriesColumns = {
    step: new Float64Array(n),
    wallTime: new Float64Array(n),
    value: new Float64Array(n),
    smoothed: withSmoothed ? new Float64Array(n) : null,
  };
  const copy = (src: SeriesColumns, from: number, to: number, at: number): void => {
    out.step.set(src.step.subarray(from, to), at);
    out.wallTime.set(src.wallTime.subarray(from, to), at);
    out.value.set(src.value.subarray(from, to), at);
    if (out.smoothed && src.smoothed) out.smoothed.set(src.smoothed.subarray(from, to), at);
  };
  copy(overview, 0, a, 0);
  copy(detail, da, db, a);
  copy(overview, b, overview.step.length, a + (db - da));
  return out;
}
