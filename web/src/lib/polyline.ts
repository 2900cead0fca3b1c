/**
 * Series to canvas paths. A chart of 200 runs strokes 200 lines of ~1,000 points at every slider
 * step; the rasteriser's cost grows with the segments, so points that land within a fraction of
 * a pixel of the last vertex drawn are merged into it (an error the eye cannot see at hairline
 * width), and the value-to-pixel mapping is one multiply-add per coordinate.
 */

/** What a path is traced into: a CanvasRenderingContext2D, or a recorder in tests. */
export interface PathSink {
  moveTo(x: number, y: number): void;
  lineTo(x: number, y: number): void;
}

/** pixel = off + scale * v, with v = log10(value) on a log axis. */
export interface AxisMap {
  off: number;
  scale: number;
  log: boolean;
}

/** The map of a scale [min, max] onto pixels [from, to] (to < from for a y axis, which grows downwards). */
export function axisMap(min: number, max: number, from: number, to: number, log: boolean): AxisMap {
  const lo = log ? Math.log10(min) : min;
  const hi = log ? Math.log10(max) : max;
  const scale = hi === lo ? 0 : (to - from) / (hi - lo);
  return { off: from - lo * scale, scale, log };
}

/**
 * Traces `n` points of (xs, ys) into `sink`: a gap (a new subpath) at every non-finite value,
 * and at non-positive ones on a log axis; a point within `tol` pixels of the last vertex in both
 * directions is merged into it, except the last point of each stretch, which is always drawn.
 * Returns the vertices emitted.
 */
export function tracePolyline(xs: ArrayLike<number>, ys: ArrayLike<number>, n: number, ax: AxisMap, ay: AxisMap, tol: number, sink: PathSink): number {
  let emitted = 0;
  let pen = false;
  let lx = 0;
  let ly = 0;
  let pending = false;
  let qx = 0;
  let qy = 0;
  for (let i = 0; i < n; i++) {
    const x = xs[i]!;
    const y = ys[i]!;
    if (!Number.isFinite(x) || !Number.isFinite(y) || (ay.log && y <= 0) || (ax.log && x <= 0)) {
      if (pending) {
        sink.lineTo(qx, qy);
        emitted++;
        pending = false;
      }
      pen = false;
      continue;
    }
    const px = ax.off + ax.scale * (ax.log ? Math.log10(x) : x);
    const py = ay.off + ay.scale * (ay.log ? Math.log10(y) : y);
    if (!pen) {
      sink.moveTo(px, py);
      emitted++;
      pen = true;
      lx = px;
      ly = py;
      continue;
    }
    if (Math.abs(px - lx) < tol && Math.abs(py - ly) < tol) {
      pending = true;
      qx = px;
      qy = py;
      continue;
    }
    sink.lineTo(px, py);
    emitted++;
    pending = false;
    lx = px;
    ly = py;
  }
  if (pending) {
    sink.lineTo(qx, qy);
    emitted++;
  }
  return emitted;
}
