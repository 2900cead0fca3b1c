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
