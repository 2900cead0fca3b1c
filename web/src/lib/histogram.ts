/**
 * Histogram steps arrive with their own bucket edges (legacy histograms use exponential
 * buckets, new ones uniform ones); to draw steps against one another each is re-binned onto
 * one shared set of uniform bins, spreading a bucket's count evenly over its width (a bucket
 * of zero width puts its count in the bin that holds it). Counts are conserved.
 */
export interface HistStep {
  left: ArrayLike<number>;
  right: ArrayLike<number>;
  count: ArrayLike<number>;
}

export function extent(steps: readonly HistStep[]): [number, number] | null {
  let lo = Infinity;
  let hi = -Infinity;
  for (const s of steps) {
    for (let i = 0; i < s.count.length; i++) {
      if (!(s.count[i]! > 0)) continue;
      const l = s.left[i]!;
      const r = s.right[i]!;
      if (Number.isFinite(l)) lo = Math.min(lo, l, r);
      if (Number.isFinite(r)) hi = Math.max(hi, l, r);
    }
  }
  if (!(lo <= hi)) return null;
  if (lo === hi) return [lo - 0.5, hi + 0.5];
  return [lo, hi];
}

export function rebin(step: HistStep, lo: number, hi: number, bins: number): Float64Array {
  const out = new Float64Array(bins);
  const width = (hi - lo) / bins;
  const binOf = (x: number) => Math.min(bins - 1, Math.max(0, Math.floor((x - lo) / width)));
  for (let i = 0; i < step.count.length; i++) {
    const c = step.count[i]!;
    if (!(c > 0)) continue;
    let l = step.left[i]!;
    let r = step.right[i]!;
    if (l > r) [l, r] = [r, l];
    if (!Number.isFinite(l) || !Number.isFinite(r) || r - l <= 0) {
      const x = Number.isFinite(l) ? l : r;
      out[Number.isFinite(x) ? binOf(x) : x > 0 ? bins - 1 : 0]! += c;
      continue;
    }
    const a = binOf(l);
    const b = binOf(r);
    if (a === b) {
      out[a]! += c;
      continue;
    }
    const density = c / (r - l);
    for (let k = a; k <= b; k++) {
      const bl = lo + k * width;
      const br = k === bins - 1 ? Math.max(hi, r) : bl + width;
      const overlap = Math.min(r, br) - Math.max(l, k === 0 ? Math.min(lo, l) : bl);
      if (overlap > 0) out[k]! += density * overlap;
    }
  }
  return out;
}
