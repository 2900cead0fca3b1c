import { describe, expect, it } from "vitest";
import { emaSmooth, emaSmoothInto } from "../src/lib/smoothing";
import { loadTensorBoardSmoother } from "./tbreference";

const tb = loadTensorBoardSmoother();

function reference(ys: number[], w: number, xs?: number[]): number[] {
  const points = ys.map((y, i) => ({ x: xs ? xs[i]! : i, y }));
  return tb([{ id: "a", points }], w)[0]!.points.map((p) => p.y);
}

function same(a: ArrayLike<number>, b: ArrayLike<number>): void {
  expect(a.length).toBe(b.length);
  for (let i = 0; i < a.length; i++) {
    if (Number.isNaN(b[i])) expect(a[i]).toBeNaN();
    else expect(a[i]).toBe(b[i]); // bit-identical: same operations in the same order
  }
}

describe("emaSmooth matches TensorBoard's own code", () => {
  const cases: [string, number[]][] = [
    ["empty", []],
    ["one point", [3.5]],
    ["two points", [1, 2]],
    ["ramp", [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]],
    ["constant", [0.25, 0.25, 0.25, 0.25]],
    ["constant zero", [0, 0, 0]],
    ["NaN first", [NaN, 1, 2, 3]],
    ["NaN inside", [1, NaN, 3, NaN, 5]],
    ["all NaN", [NaN, NaN]],
    ["infinities", [1, Infinity, 2, -Infinity, 3]],
    ["constant but one NaN", [2, 2, NaN, 2]],
    ["constant infinity", [Infinity, Infinity]],
    ["negative and tiny", [-1e-300, 5e-324, -3, 1e308, 1e308]],
    ["noisy", Array.from({ length: 500 }, (_, i) => Math.sin(i / 7) + ((i * 7919) % 13) / 13)],
    // Long enough for w^count to fall below 2^-54 (where the debiasing stops) at every weight
    // below 0.99, with gaps before and after that point.
    ["long with gaps", Array.from({ length: 5000 }, (_, i) => (i % 97 === 5 ? NaN : i % 1201 === 7 ? Infinity : Math.cos(i / 13) * 3 + (i % 5)))],
  ];
  const weights = [0, 0.1, 0.6, 0.95, 0.999, 1, -0.5, 1.5, NaN, Infinity];
  for (const [name, ys] of cases) {
    for (const w of weights) {
      it(`${name}, weight ${w}`, () => same(emaSmooth(ys, w), reference(ys, w)));
    }
  }

  it("ignores x spacing: non-uniform steps smooth like uniform ones", () => {
    const ys = [5, 1, 4, 2, 8, 3];
    const xs = [0, 1, 2, 100, 101, 10000];
    same(emaSmooth(ys, 0.6), reference(ys, 0.6, xs));
    same(emaSmooth(ys, 0.6), reference(ys, 0.6));
  });
});

describe("emaSmoothInto (the slider's reused buffers)", () => {
  const ys = [4, NaN, 1, 7, -Infinity, 2, 9, 3];
  it("writes into the buffer it is given and returns it", () => {
    const buf = new Float64Array(ys.length);
    const out = emaSmoothInto(ys, 0.6, buf);
    expect(out).toBe(buf);
    same(out, reference(ys, 0.6));
  });
  it("overwrites what a previous weight left, in the same buffer", () => {
    const buf = emaSmoothInto(ys, 0.95, new Float64Array(ys.length));
    same(emaSmoothInto(ys, 0.3, buf), reference(ys, 0.3));
    same(emaSmoothInto(ys, 0, buf), ys);
  });
  it("leaves the rest of a longer buffer alone", () => {
    const buf = new Float64Array(ys.length + 2).fill(-1);
    emaSmoothInto(ys, 0.6, buf);
    same(buf.subarray(0, ys.length), reference(ys, 0.6));
    expect(Array.from(buf.subarray(ys.length))).toEqual([-1, -1]);
  });
  it("refuses a buffer too short", () => {
    expect(() => emaSmoothInto(ys, 0.6, new Float64Array(3))).toThrow(RangeError);
  });
  it("the first point of a constant or unsmoothed series is copied as is", () => {
    const buf = new Float64Array(3);
    expect(Array.from(emaSmoothInto([0.1, 0.1, 0.1], 0.6, buf))).toEqual([0.1, 0.1, 0.1]);
    expect(Array.from(emaSmoothInto([5, 6, 7], 0, buf))).toEqual([5, 6, 7]);
  });
});

describe("emaSmooth by hand", () => {
  it("the first finite point equals its raw value (debiased)", () => {
    expect(emaSmooth([7, 0], 0.9)[0]).toBe(7);
    expect(emaSmooth([NaN, 7, 0], 0.9)[1]).toBe(7);
  });
  it("weight 0.5 over 1, 2, 3", () => {
    const s = emaSmooth([1, 2, 3], 0.5);
    expect(s[1]).toBeCloseTo(1.25 / 0.75, 14);
    expect(s[2]).toBeCloseTo(2.125 / 0.875, 14);
  });
  it("a constant series is returned unchanged, without float noise", () => {
    expect(Array.from(emaSmooth([0.1, 0.1, 0.1], 0.6))).toEqual([0.1, 0.1, 0.1]);
  });
  it("weight 1 gives zeros (TensorBoard's edge case)", () => {
    expect(Array.from(emaSmooth([1, 2, 3], 1))).toEqual([0, 0, 0]);
  });
});

import { perPointWeight, TENSORBOARD_VIEW_POINTS } from "../src/lib/smoothing";

describe("perPointWeight", () => {
  it("is the weight itself up to TensorBoard's 1,000 points", () => {
    expect(perPointWeight(0.6, 10)).toBe(0.6);
    expect(perPointWeight(0.6, TENSORBOARD_VIEW_POINTS)).toBe(0.6);
    expect(perPointWeight(0, 1e6)).toBe(0);
  });
  it("keeps the decay per step of TensorBoard's 1,000-point view", () => {
    for (const n of [2000, 10_000, 1_000_000]) {
      for (const w of [0.3, 0.6, 0.9, 0.99]) {
        const wp = perPointWeight(w, n);
        // After n/1000 logged points the average has decayed as much as after one shown point.
        expect(Math.pow(wp, n / TENSORBOARD_VIEW_POINTS)).toBeCloseTo(w, 12);
      }
    }
  });
  it("smooths a long noisy series about as much as TensorBoard smooths its sample", () => {
    const n = 20_000;
    const ys = Array.from({ length: n }, (_, i) => Math.sin(i / 3000) + ((i * 7919) % 101) / 101 - 0.5);
    const full = emaSmooth(ys, perPointWeight(0.9, n));
    const sample = ys.filter((_, i) => i % (n / 1000) === 0);
    const tb = emaSmooth(sample, 0.9);
    let err = 0;
    for (let k = 100; k < 1000; k++) err = Math.max(err, Math.abs(full[k * (n / 1000)]! - tb[k]!));
    expect(err).toBeLessThan(0.1); // noise amplitude is 0.5: both are smooth, and close
  });
});
