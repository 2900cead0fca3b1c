import { describe, expect, it } from "vitest";
import { mergeWindow, type SeriesColumns } from "../src/lib/merge";

function cols(steps: number[], values?: number[], smoothed = false): SeriesColumns {
  const v = values ?? steps.map((s) => s * 10);
  return {
    step: Float64Array.from(steps),
    wallTime: Float64Array.from(steps.map((s) => 1000 + s)),
    value: Float64Array.from(v),
    smoothed: smoothed ? Float64Array.from(v.map((x) => x / 2)) : null,
  };
}

describe("mergeWindow", () => {
  it("replaces the overview inside the window and keeps it outside", () => {
    const overview = cols([0, 10, 20, 30, 40, 50], [0, 1, 99, 3, 4, 5]);
    const detail = cols([20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30]);
    const m = mergeWindow(overview, detail, 20, 30);
    expect(Array.from(m.step)).toEqual([0, 10, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 40, 50]);
    expect(m.value[2]).toBe(200); // from the detail, not the overview's 99
    expect(m.value[1]).toBe(1);
    expect(m.value[13]).toBe(4);
    expect(Array.from(m.wallTime)).toEqual(Array.from(m.step).map((s) => 1000 + s));
  });

  it("drops detail points that fall outside the window", () => {
    const m = mergeWindow(cols([0, 100]), cols([5, 50, 60, 150]), 40, 90);
    expect(Array.from(m.step)).toEqual([0, 50, 60, 100]);
  });

  it("handles a window before, after or around every point", () => {
    expect(Array.from(mergeWindow(cols([10, 20]), cols([1, 2]), 0, 5).step)).toEqual([1, 2, 10, 20]);
    expect(Array.from(mergeWindow(cols([10, 20]), cols([30]), 25, 35).step)).toEqual([10, 20, 30]);
    expect(Array.from(mergeWindow(cols([10, 20]), cols([11, 12]), 0, 100).step)).toEqual([11, 12]);
    expect(Array.from(mergeWindow(cols([]), cols([]), 0, 100).step)).toEqual([]);
  });

  it("keeps a spike seen only at full resolution", () => {
    // The overview's M4 buckets over [0, 1000) missed nothing, but a zoomed fetch carries the
    // exact spike position; the merged series must hold it exactly once.
    const overview = cols([0, 500, 999], [1, 1000, 1]);
    const detail = cols([498, 499, 500, 501], [1, 2, 1000, 2]);
    const m = mergeWindow(overview, detail, 498, 501);
    expect(Array.from(m.value).filter((v) => v === 1000)).toHaveLength(1);
    expect(Array.from(m.step)).toEqual([0, 498, 499, 500, 501, 999]);
  });

  it("carries smoothed values only when both sides have them", () => {
    expect(mergeWindow(cols([0, 10], undefined, true), cols([5], undefined, true), 4, 6).smoothed).not.toBeNull();
    expect(mergeWindow(cols([0, 10], undefined, true), cols([5]), 4, 6).smoothed).toBeNull();
  });

  it("merges repeatedly (zoom in twice) without duplicating points", () => {
    const full = Array.from({ length: 101 }, (_, i) => i);
    let s = cols([0, 25, 50, 75, 100]);
    s = mergeWindow(s, cols(full.filter((i) => i % 5 === 0 && i >= 20 && i <= 80)), 20, 80);
    s = mergeWindow(s, cols(full.filter((i) => i >= 40 && i <= 60)), 40, 60);
    const steps = Array.from(s.step);
    expect(new Set(steps).size).toBe(steps.length);
    expect(steps).toEqual([...steps].sort((a, b) => a - b));
    expect(steps.filter((x) => x >= 40 && x <= 60)).toHaveLength(21);
  });
});

describe("mergeWindow along wall time", () => {
  it("merges by the wall-time column for time axes", () => {
    // Steps restart (a resumed job) but wall time keeps increasing: merge on wall time.
    const overview: SeriesColumns = { step: Float64Array.from([0, 5, 0, 5]), wallTime: Float64Array.from([10, 20, 30, 40]), value: Float64Array.from([1, 2, 3, 4]), smoothed: null };
    const detail: SeriesColumns = { step: Float64Array.from([3, 0, 2]), wallTime: Float64Array.from([25, 30, 35]), value: Float64Array.from([9, 8, 7]), smoothed: null };
    const m = mergeWindow(overview, detail, 21, 39, "wallTime");
    expect(Array.from(m.wallTime)).toEqual([10, 20, 25, 30, 35, 40]);
    expect(Array.from(m.value)).toEqual([1, 2, 9, 8, 7, 4]);
  });
});
