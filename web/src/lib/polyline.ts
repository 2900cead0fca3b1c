/**
 * Series to canvas paths. A chart of 200 runs strokes 200 lines of ~1,000 points at every slider
 * step; the path's building and the rasteriser's cost grow with the segments, and a smoothed
 * line is nearly straight over many points at a time. So a vertex is drawn only where the line
 * leaves a narrow band: points whose drawn line stays within a fraction of a pixel of each of
 * them become one segment (an error the eye cannot see at hairline width), and the
 * value-to-pixel mapping is one multiply-add per coordinate.
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
 * and at non-positive ones on a log axis. Consecutive points become one segment while the
 * segment from the last vertex passes within `tol` pixels (in both directions: through the
 * half of the point's box towards the vertex) of every point between, so points within `tol` of the last vertex always merge
 * into it (an x that goes back merges only so); the last point of each stretch is always drawn.
 * One pass: the slopes from the last vertex through the boxes of every point since it narrow as
 * points come (a sleeve), and a point outside them ends the segment at the point before it.
 * Returns the vertices emitted.
 */
export function tracePolyline(xs: ArrayLike<number>, ys: ArrayLike<number>, n: number, ax: AxisMap, ay: AxisMap, tol: number, sink: PathSink): number {
  let emitted = 0;
  let pen = false;
  // The last vertex drawn.
  let vx = 0;
  let vy = 0;
  // The last point taken into the segment from it, not drawn yet.
  let pending = false;
  let qx = 0;
  let qy = 0;
  // Slopes from the vertex that pass within tol of every point taken since it.
  let lo = -Infinity;
  let hi = Infinity;
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
      vx = px;
      vy = py;
      lo = -Infinity;
      hi = Infinity;
      continue;
    }
    let dx = px - vx;
    let dy = py - vy;
    // A point is taken while the slope to it passes through the boxes of the points before, and
    // x does not go back (the segment would end short of a point before).
    if (pending && !(dx > 0 ? px >= qx && dy >= lo * dx && dy <= hi * dx : Math.abs(dx) <= tol && Math.abs(dy) <= tol)) {
      // Outside the band: the segment ends at the point before, which starts the next one.
      sink.lineTo(qx, qy);
      emitted++;
      vx = qx;
      vy = qy;
      lo = -Infinity;
      hi = Infinity;
      dx = px - vx;
      dy = py - vy;
    }
    if (dx > 0) {
      // The slopes of the lines from the vertex through the point's box (tol either way).
      // Only the box's half towards the vertex counts: the segment may end at this point.
      if (dx > tol) {
        lo = Math.max(lo, Math.min((dy - tol) / (dx - tol), (dy - tol) / dx));
        hi = Math.min(hi, Math.max((dy + tol) / (dx - tol), (dy + tol) / dx));
      } else {
        // The box reaches back to the vertex's column: it bounds the slopes on one side at most.
        if (dy > tol) lo = Math.max(lo, (dy - tol) / dx);
        if (dy < -tol) hi = Math.min(hi, (dy + tol) / dx);
      }
    } else if (!(Math.abs(dx) <= tol && Math.abs(dy) <= tol)) {
      // Straight down or back from the vertex (an x that does not grow): a vertex of its own.
      sink.lineTo(px, py);
      emitted++;
      vx = px;
      vy = py;
      lo = -Infinity;
      hi = Infinity;
      pending = false;
      continue;
    }
    pending = true;
    qx = px;
    qy = py;
  }
  if (pending) {
    sink.lineTo(qx, qy);
    emitted++;
  }
  return emitted;
}
