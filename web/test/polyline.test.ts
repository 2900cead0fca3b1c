import { describe, expect, it } from "vitest";
import { axisMap, tracePolyline, type PathSink } from "../src/lib/polyline";

type Op = ["M" | "L", number, number];

function record(): PathSink & { ops: Op[] } {
  const ops: Op[] = [];
  return { ops, moveTo: (x, y) => ops.push(["M", x, y]), lineTo: (x, y) => ops.push(["L", x, y]) };
}

const ident = axisMap(0, 1, 0, 1, false);

function trace(xs: number[], ys: number[], tol = 0, ay = ident) {
  const r = record();
  const n = tracePolyline(xs, ys, xs.length, ident, ay, tol, r);
  expect(n).toBe(r.ops.length);
  return r.ops;
}

describe("axisMap", () => {
  it("maps the scale's ends onto the pixel range, y growing downwards", () => {
    const x = axisMap(100, 300, 10, 410, false);
    expect(x.off + x.scale * 100).toBe(10);
    expect(x.off + x.scale * 300).toBe(410);
    const y = axisMap(-1, 1, 200, 0, false);
    expect(y.off + y.scale * -1).toBe(200);
    expect(y.off + y.scale * 1).toBe(0);
    expect(y.off + y.scale * 0).toBe(100);
  });
  it("maps decades evenly on a log axis", () => {
    const y = axisMap(0.01, 100, 400, 0, true);
    expect(y.off + y.scale * Math.log10(0.01)).toBeCloseTo(400, 9);
    expect(y.off + y.scale * Math.log10(1)).toBeCloseTo(200, 9);
    expect(y.off + y.scale * Math.log10(100)).toBeCloseTo(0, 9);
  });
  it("a zero-width scale maps everything to the start instead of NaN", () => {
    const m = axisMap(5, 5, 3, 9, false);
    expect(m.off + m.scale * 5).toBe(3);
  });
});

describe("tracePolyline", () => {
  it("draws every point with no tolerance", () => {
    expect(trace([0, 1, 2], [5, 6, 4])).toEqual([
      ["M", 0, 5],
      ["L", 1, 6],
      ["L", 2, 4],
    ]);
  });
  it("nothing for no points or only gaps", () => {
    expect(trace([], [])).toEqual([]);
    expect(trace([0, 1], [NaN, Infinity])).toEqual([]);
  });
  it("breaks the line at NaN and infinities and starts a new subpath after them", () => {
    expect(trace([0, 1, 2, 3, 4], [1, NaN, 2, -Infinity, 3])).toEqual([
      ["M", 0, 1],
      ["M", 2, 2],
      ["M", 4, 3],
    ]);
    expect(trace([0, 1, 2, 3], [1, 2, NaN, 4])).toEqual([
      ["M", 0, 1],
      ["L", 1, 2],
      ["M", 3, 4],
    ]);
  });
  it("a non-finite x is a gap too", () => {
    expect(trace([0, NaN, 2, 3], [1, 2, 3, 4])).toEqual([
      ["M", 0, 1],
      ["M", 2, 3],
      ["L", 3, 4],
    ]);
  });
  it("non-positive values are gaps on a log axis, not on a linear one", () => {
    const log = axisMap(1, 100, 2, 0, true);
    const ops = trace([0, 1, 2, 3], [10, 0, -5, 100], 0, log);
    expect(ops.map((o) => o[0])).toEqual(["M", "M"]);
    expect(ops[0]![2]).toBeCloseTo(1, 12);
    expect(ops[1]![2]).toBeCloseTo(0, 12);
    expect(trace([0, 1, 2], [10, 0, -5]).length).toBe(3);
  });
  it("merges points within the tolerance into one segment, keeping each stretch's last point", () => {
    const xs = [0, 0.1, 0.2, 0.3, 5];
    expect(trace(xs, [0, 0.1, 0.2, 0.3, 0.4], 0.5)).toEqual([
      ["M", 0, 0],
      ["L", 5, 0.4],
    ]);
    // The stretch ends at a gap: its last point is drawn before the gap.
    expect(trace([0, 0.1, 0.2, 1], [0, 0.1, 0.2, NaN], 0.5)).toEqual([
      ["M", 0, 0],
      ["L", 0.2, 0.2],
    ]);
    // The series ends inside the tolerance: its last point is still drawn.
    expect(trace([0, 0.1, 0.2], [0, 0.1, 0.2], 0.5)).toEqual([
      ["M", 0, 0],
      ["L", 0.2, 0.2],
    ]);
  });
  it("keeps a spike one pixel column wide", () => {
    const xs = [0, 0.2, 0.4, 0.6, 0.8];
    const ops = trace(xs, [0, 0, 50, 0, 0], 0.5);
    expect(ops).toContainEqual(["L", 0.4, 50]);
    expect(ops.at(-1)).toEqual(["L", 0.8, 0]);
  });
  /** The drawn line's y at x (the segment over x), for a path of increasing x. */
  function yAt(ops: Op[], x: number): number {
    let j = 0;
    while (j + 1 < ops.length && ops[j + 1]![1] < x) j++;
    const a = ops[j]!;
    const b = ops[j + 1] ?? a;
    return b[1] === a[1] ? a[2] : a[2] + ((b[2] - a[2]) * (x - a[1])) / (b[1] - a[1]);
  }

  /** True when the drawn line (increasing x) passes through the box of half-width tol around (x, y). */
  function passesNear(ops: Op[], x: number, y: number, tol: number): boolean {
    const xs = [x - tol, x + tol, ...ops.map((o) => o[1]).filter((v) => v > x - tol && v < x + tol)];
    const ys = xs.map((v) => yAt(ops, v));
    return Math.min(...ys) <= y + tol + 1e-9 && Math.max(...ys) >= y - tol - 1e-9;
  }

  it("the drawn line passes within the tolerance of every point (dense noisy series)", () => {
    const n = 5000;
    const xs = Array.from({ length: n }, (_, i) => i * 0.07);
    const ys = Array.from({ length: n }, (_, i) => Math.sin(i / 40) * 30 + ((i * 7919) % 11) / 10);
    const tol = 0.5;
    const ops = trace(xs, ys, tol);
    expect(ops.length).toBeLessThan(n / 2);
    expect(ops[0]).toEqual(["M", 0, ys[0]]);
    expect(ops.at(-1)).toEqual(["L", xs[n - 1], ys[n - 1]]);
    for (let i = 0; i < n; i++) expect(passesNear(ops, xs[i]!, ys[i]!, tol)).toBe(true);
  });
  it("a straight stretch is one segment however many points it has", () => {
    const xs = Array.from({ length: 1000 }, (_, i) => i / 3);
    expect(trace(xs, xs.map((x) => 2 * x + 1), 0.25)).toEqual([
      ["M", 0, 1],
      ["L", 999 / 3, (2 * 999) / 3 + 1],
    ]);
  });
  it("a smooth curve takes a vertex every few pixels, not one per point", () => {
    // An exponential decay across 350 pixel columns, 1,000 points (a smoothed loss curve).
    const xs = Array.from({ length: 1000 }, (_, i) => i * 0.35);
    const ys = xs.map((x) => 200 - 180 * Math.exp(-x / 60));
    const ops = trace(xs, ys, 0.25);
    expect(ops.length).toBeLessThan(60);
    for (let i = 0; i < xs.length; i++) expect(passesNear(ops, xs[i]!, ys[i]!, 0.25)).toBe(true);
  });
  it("keeps a one-point spike in a dense series", () => {
    const xs = Array.from({ length: 2000 }, (_, i) => i * 0.2);
    const ys = xs.map((_, i) => (i === 1234 ? 90 : 10));
    const ops = trace(xs, ys, 0.5);
    expect(ops).toContainEqual(["L", xs[1234], 90]);
    expect(ops.length).toBe(5);
  });
  it("an x that goes back is drawn as it comes (wall time after a restart)", () => {
    expect(trace([0, 5, 10, 3, 8], [0, 0, 0, 4, 4], 0.5)).toEqual([
      ["M", 0, 0],
      ["L", 10, 0],
      ["L", 3, 4],
      ["L", 8, 4],
    ]);
  });
  it("draws only the first n points", () => {
    const r = record();
    tracePolyline([0, 1, 2, 3], [0, 1, 2, 3], 2, ident, ident, 0, r);
    expect(r.ops).toEqual([
      ["M", 0, 0],
      ["L", 1, 1],
    ]);
  });
});
