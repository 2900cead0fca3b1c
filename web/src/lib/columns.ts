/** JSON carries NaN and the infinities as strings (as TensorBoard does); these turn them back. */
export type JsonNumber = number | string | null;

export function toNumber(v: JsonNumber | undefined): number {
  if (typeof v === "number") return v;
  if (v === "NaN" || v === null || v === undefined) return NaN;
  if (v === "Infinity") return Infinity;
  if (v === "-Infinity") return -Infinity;
  const parsed = Number(v);
  return parsed;
}

export function toFloat64(values: readonly JsonNumber[] | undefined): Float64Array {
  const n = values ? values.length : 0;
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) out[i] = toNumber(values![i]);
  return out;
}

/** Index of the first element >= x in a sorted array (its length when every one is less). */
export function lowerBound(xs: ArrayLike<number>, x: number): number {
  let lo = 0;
  let hi = xs.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (xs[mid]! < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Index of the first element > x in a sorted array (its length when none is greater). */
export function upperBound(xs: ArrayLike<number>, x: number): number {
  let lo = 0;
  let hi = xs.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (xs[mid]! <= x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Index of the last element <= x in a sorted array (-1 when x is before the first). */
export function bisectRight(xs: ArrayLike<number>, x: number): number {
  return upperBound(xs, x) - 1;
}

/** Index of the element nearest to x in a sorted array (-1 when empty). */
export function nearestIndex(xs: ArrayLike<number>, x: number): number {
  const n = xs.length;
  if (n === 0) return -1;
  const i = bisectRight(xs, x);
  if (i < 0) return 0;
  if (i >= n - 1) return n - 1;
  return x - xs[i]! <= xs[i + 1]! - x ? i : i + 1;
}
