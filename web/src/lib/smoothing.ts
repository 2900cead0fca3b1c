/**
 * TensorBoard's scalar smoothing, exactly: a zero-initialised exponential moving average with
 * Adam-style debiasing, not weighted by x spacing. Non-finite points pass through unchanged and
 * do not advance the average; a constant series is returned as is (TensorBoard #786: the
 * debiasing would otherwise add float noise to a flat line).
 */
export function emaSmooth(values: ArrayLike<number>, weight: number): Float64Array {
  return emaSmoothInto(values, weight, new Float64Array(values.length));
}

/**
 * emaSmooth into `out` (at least as long as `values`), which is returned: a slider move smooths
 * every series of the charts on screen, and reusing their buffers keeps that free of garbage.
 */
export function emaSmoothInto(values: ArrayLike<number>, weight: number, out: Float64Array): Float64Array {
  const n = values.length;
  if (out.length < n) throw new RangeError(`emaSmoothInto: a buffer of ${out.length} for ${n} values`);
  let w = Number.isFinite(weight) ? weight : 0;
  w = Math.min(1, Math.max(0, w));
  const first = n > 0 ? values[0]! : NaN;
  let constant = true;
  for (let i = 0; i < n; i++) {
    // NaN != NaN, so a NaN anywhere (first point included) makes the series non-constant.
    if (values[i] !== first) {
      constant = false;
      break;
    }
  }
  if (w === 0 || constant) {
    for (let i = 0; i < n; i++) out[i] = values[i]!;
    return out;
  }
  let last = 0;
  let count = 0;
  // TensorBoard divides by 1 - w^count. Once w^count is below 2^-54, 1 - w^count rounds to
  // exactly 1 and stays there (w < 1), so Math.pow, the loop's dearest step, stops there with
  // bit-identical results.
  let debiasing = w < 1;
  for (let i = 0; i < n; i++) {
    const y = values[i]!;
    if (!Number.isFinite(y)) {
      out[i] = y;
      continue;
    }
    last = last * w + (1 - w) * y;
    count++;
    if (debiasing) {
      const p = Math.pow(w, count);
      if (p < 2 ** -54) debiasing = false;
      out[i] = last / (1 - p);
    } else {
      out[i] = last;
    }
  }
  return out;
}

/** The number of points TensorBoard shows per series by default (its scalar sampling). */
export const TENSORBOARD_VIEW_POINTS = 1000;

/**
 * The per-point weight that smooths a series of `points` logged points as much as `weight`
 * smooths TensorBoard's default view of it (at most 1,000 sampled points): the same decay per
 * step, so the slider looks as it does in TensorBoard however long the run, and the smoothing
 * of every logged point does not change with downsampling or zoom. Up to 1,000 points it is
 * `weight` itself (TensorBoard's formula exactly).
 */
export function perPointWeight(weight: number, points: number): number {
  if (!(weight > 0) || points <= TENSORBOARD_VIEW_POINTS) return weight;
  if (weight >= 1) return 1;
  return Math.pow(weight, TENSORBOARD_VIEW_POINTS / points);
}
