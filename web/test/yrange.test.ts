import { describe, expect, it } from "vitest";
import { quantileSorted, yRange } from "../src/lib/yrange";

const slice = (values: number[]) => ({ values, start: 0, end: values.length });

describe("y range", () => {
  it("ignores a spike with outliers ignored, and shows it otherwise", () => {
    const ys = Array.from({ length: 100 }, (_, i) => 1 + (i % 10) / 10);
    ys[3] = 1000;
    const [lo, hi] = yRange([slice(ys)], { ignoreOutliers: true, log: false })!;
    expect(hi).toBeLessThan(3);
    expect(lo).toBeGreaterThan(0.5);
    const [, hiAll] = yRange([slice(ys)], { ignoreOutliers: false, log: false })!;
    expect(hiAll).toBeGreaterThan(1000);
  });
  it("uses min..max for two points or fewer", () => {
    const [lo, hi] = yRange([slice([0, 10])], { ignoreOutliers: true, log: false })!;
    expect(lo).toBeLessThan(0);
    expect(hi).toBeGreaterThan(10);
  });
  it("skips NaN and infinities, and non-positive values on a log axis", () => {
    expect(yRange([slice([NaN, Infinity])], { ignoreOutliers: true, log: false })).toBeNull();
    const [lo] = yRange([slice([-5, 0, 0.01, 1, 100])], { ignoreOutliers: false, log: true })!;
    expect(lo).toBeGreaterThan(0);
    expect(lo).toBeLessThan(0.01);
  });
  it("gives a flat line a band", () => {
    const [lo, hi] = yRange([slice([2, 2, 2, 2])], { ignoreOutliers: true, log: false })!;
    expect(lo).toBeLessThan(2);
    expect(hi).toBeGreaterThan(2);
  });
  it("interpolates quantiles like d3", () => {
    expect(quantileSorted([1, 2, 3, 4], 0.5)).toBe(2.5);
    expect(quantileSorted([0, 10], 0.05)).toBeCloseTo(0.5);
  });
  it("spans several series and respects slice bounds", () => {
    const r = yRange([{ values: [100, 1, 2, 100], start: 1, end: 3 }, slice([3])], { ignoreOutliers: false, log: false })!;
    expect(r[1]).toBeLessThan(4);
  });
});

import { quantileSelect } from "../src/lib/yrange";

describe("quantileSelect", () => {
  it("equals the sorted quantile on random, sorted, reversed and duplicate-heavy data", () => {
    let seed = 7;
    const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    const inputs = [
      Array.from({ length: 1001 }, rnd),
      Array.from({ length: 500 }, (_, i) => i),
      Array.from({ length: 500 }, (_, i) => 500 - i),
      Array.from({ length: 333 }, () => Math.floor(rnd() * 4)),
      [3, 1],
      [5],
    ];
    for (const xs of inputs) {
      const sorted = Float64Array.from(xs).sort();
      for (const q of [0, 0.05, 0.5, 0.95, 1]) {
        expect(quantileSelect(Float64Array.from(xs), q)).toBeCloseTo(quantileSorted(sorted, q), 12);
      }
    }
  });
});
