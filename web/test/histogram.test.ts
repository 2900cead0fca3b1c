import { describe, expect, it } from "vitest";
import { extent, rebin } from "../src/lib/histogram";

const sum = (a: ArrayLike<number>) => Array.from(a).reduce((x, y) => x + y, 0);

describe("histogram re-binning", () => {
  it("conserves counts over uneven buckets", () => {
    const step = { left: [-3, -1, 0, 0.5], right: [-1, 0, 0.5, 4], count: [10, 20, 30, 40] };
    const [lo, hi] = extent([step])!;
    expect([lo, hi]).toEqual([-3, 4]);
    const out = rebin(step, lo, hi, 7);
    expect(sum(out)).toBeCloseTo(100, 9);
    expect(out[0]).toBeCloseTo(5, 9); // half of [-3, -1] falls in [-3, -2]
  });
  it("puts zero-width buckets in the bin holding them", () => {
    const out = rebin({ left: [2, 2], right: [2, 2], count: [5, 0] }, 0, 4, 4);
    expect(Array.from(out)).toEqual([0, 0, 5, 0]);
  });
  it("ignores empty buckets for the extent and handles reversed edges", () => {
    const step = { left: [-100, 1, 3], right: [-50, 2, 2], count: [0, 4, 6] };
    expect(extent([step])).toEqual([1, 3]);
    expect(sum(rebin(step, 1, 3, 10))).toBeCloseTo(10, 9);
  });
  it("gives a single value a unit range", () => {
    expect(extent([{ left: [7], right: [7], count: [3] }])).toEqual([6.5, 7.5]);
  });
});
