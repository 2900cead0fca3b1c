/**
 * The y range of a chart. With outliers ignored (TensorBoard's default) the range spans the 5th
 * to 95th percentile of the visible values once there are more than two of them, so one early
 * loss spike does not flatten the curve; otherwise it spans min..max. On a log axis only
 * positive values count.
 */
export interface YRangeOptions {
  ignoreOutliers: boolean;
  log: boolean;
}

/** The q-quantile of sorted values, linearly interpolated (d3.quantile, R-7). */
export function quantileSorted(sorted: ArrayLike<number>, q: number): number {
  const n = sorted.length;
  if (n === 0) return NaN;
  if (q <= 0 || n < 2) return sorted[0]!;
  if (q >= 1) return sorted[n - 1]!;
  const i = (n - 1) * q;
  const i0 = Math.floor(i);
  const v0 = sorted[i0]!;
  const v1 = sorted[i0 + 1]!;
  return v0 + (v1 - v0) * (i - i0);
}

/**
 * The q-quantile as quantileSorted would give it, without sorting: two selections (Hoare's
 * quickselect) in O(n). `buf` is reordered.
 */
export function quantileSelect(buf: Float64Array, q: number): number {
  const n = buf.length;
  if (n === 0) return NaN;
  if (n === 1) return buf[0]!;
  const pos = (n - 1) * Math.min(1, Math.max(0, q));
  const i0 = Math.floor(pos);
  const v0 = select(buf, i0);
  if (i0 + 1 >= n || pos === i0) return v0;
  // The next order statistic is the minimum of what lies above i0 after the selection.
  let v1 = Infinity;
  for (let i = i0 + 1; i < n; i++) if (buf[i]! < v1) v1 = buf[i]!;
  return v0 + (v1 - v0) * (pos - i0);
}

function select(a: Float64Array, k: number): number {
  let lo = 0;
  let hi = a.length - 1;
  while (hi > lo) {
    // Median of three as the pivot keeps sorted and reversed input linear.
    const mid = (lo + hi) >>> 1;
    const x = a[lo]!, y = a[mid]!, z = a[hi]!;
    const pivot = x < y ? (y < z ? y : x < z ? z : x) : x < z ? x : y < z ? z : y;
    let i = lo;
    let j = hi;
    while (i <= j) {
      while (a[i]! < pivot) i++;
      while (a[j]! > pivot) j--;
      if (i <= j) {
        const t = a[i]!;
        a[i] = a[j]!;
        a[j] = t;
        i++;
        j--;
      }
    }
    if (k <= j) hi = j;
    else if (k >= i) lo = i;
    else return a[k]!;
  }
  return a[k]!;
}

export interface Slice {
  values: ArrayLike<number>;
  start: number;
  end: number; // exclusive
}

export function collectFinite(slices: readonly Slice[], positiveOnly: boolean): Float64Array {
  let total = 0;
  for (const s of slices) total += Math.max(0, s.end - s.start);
  const buf = new Float64Array(total);
  let k = 0;
  for (const s of slices) {
    for (let i = s.start; i < s.end; i++) {
      const v = s.values[i]!;
      if (Number.isFinite(v) && (!positiveOnly || v > 0)) buf[k++] = v;
    }
  }
  return buf.subarray(0, k);
}

export function yRange(slices: readonly Slice[], opts: YRangeOptions): [number, number] | null {
  const vals = collectFinite(slices, opts.log);
  if (vals.length === 0) return null;
  let lo: number;
  let hi: number;
  if (opts.ignoreOutliers && vals.length > 2) {
    lo = quantileSelect(vals, 0.05);
    hi = quantileSelect(vals, 0.95);
  } else {
    lo = Infinity;
    hi = -Infinity;
    for (let i = 0; i < vals.length; i++) {
      const v = vals[i]!;
      if (v < lo) lo = v;
      if (v > hi) hi = v;
    }
  }
  return pad(lo, hi, opts.log);
}

/** Room above and below the data; a flat line gets a band around it. */
export function pad(lo: number, hi: number, log: boolean): [number, number] {
  if (log) {
    const a = Math.log10(lo);
    const b = Math.log10(hi);
    const span = b - a || 1;
    return [Math.pow(10, a - span * 0.05), Math.pow(10, b + span * 0.05)];
  }
  if (lo === hi) {
    const d = Math.abs(lo) * 0.1 || 1;
    return [lo - d, hi + d];
  }
  const span = hi - lo;
  return [lo - span * 0.05, hi + span * 0.05];
}
