import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { readArrowStream, type DictionaryColumn } from "../src/lib/arrowipc";
import { scalarsFromArrow } from "../src/lib/arrowscalars";

// Written by pyarrow: web/test/fixtures/make_arrow.py (the values below are the ones it wrote).
const fixture = (name: string) => new Uint8Array(readFileSync(new URL(`./fixtures/${name}`, import.meta.url)));

describe("readArrowStream on pyarrow's streams", () => {
  it("reads every column type, nulls and several record batches", () => {
    const t = readArrowStream(fixture("types.arrow"));
    expect(t.names).toEqual(["i64", "i32", "f32", "f64", "text"]);
    expect(t.numRows).toBe(5);
    expect(t.metadata.get("k")).toBe("v");
    const [i64, i32, f32, f64, text] = t.columns;
    expect([...(i64 as Float64Array)]).toEqual([-(2 ** 40) - 3, 0, NaN, 2 ** 53, -1]);
    expect([...(i32 as Float64Array)]).toEqual([-7, 2 ** 31 - 1, 5, NaN, -(2 ** 31)]);
    expect([...(f32 as Float64Array)]).toEqual([1.5, NaN, -0.25, Infinity, 3]);
    expect([...(f64 as Float64Array)]).toEqual([NaN, -Infinity, 1e300, -0, 2.5]);
    expect(Object.is((f64 as Float64Array)[3], -0)).toBe(true);
    expect(text).toEqual(["ünï", "", "", "<script>", "x".repeat(20)]);
  });

  it("reads a dictionary column as indices into its values", () => {
    const t = readArrowStream(fixture("scalars.arrow"));
    const run = t.columns[0] as DictionaryColumn;
    expect(run.dictionary).toEqual(["c/empty-dict-order", "a/<img src=x>", "b/train"]);
    expect([...run.indices]).toEqual([2, 2, 2, 1, 1]);
  });

  it("reads from a view that does not start at its buffer's start", () => {
    const bytes = fixture("types.arrow");
    const shifted = new Uint8Array(bytes.length + 3);
    shifted.set(bytes, 3);
    const t = readArrowStream(shifted.subarray(3));
    expect([...(t.columns[0] as Float64Array)]).toEqual([-(2 ** 40) - 3, 0, NaN, 2 ** 53, -1]);
    expect([...(t.columns[3] as Float64Array)]).toEqual([NaN, -Infinity, 1e300, -0, 2.5]);
  });

  it("refuses what it cannot read, with a reason", () => {
    expect(() => readArrowStream(fixture("types-lz4.arrow"))).toThrow(/compressed/);
    const bytes = fixture("types.arrow");
    expect(() => readArrowStream(bytes.subarray(0, bytes.length - 100))).toThrow(/past the end/);
    expect(() => readArrowStream(new Uint8Array(0))).toThrow(/no schema/);
  });
});

describe("scalarsFromArrow", () => {
  it("gives the JSON answer's shape: each series' rows, in the series' order", () => {
    const body = scalarsFromArrow(readArrowStream(fixture("scalars.arrow")));
    expect(body.tag).toBe("loss/<b>");
    expect(body.x).toBe("step");
    expect(body.loading).toBe(false);
    expect(body.series.map((s) => [s.run, s.color, s.total_points])).toEqual([
      ["b/train", "#1f77b4", 300],
      ["a/<img src=x>", "#ff7f0e", 200],
      ["c/empty-dict-order", "#2ca02c", 0],
    ]);
    const [b, a, c] = body.series;
    expect([...b!.columns.step!]).toEqual([0, 10, 20]);
    expect([...b!.columns.value!]).toEqual([0.25, NaN, Infinity]);
    expect([...b!.columns.wall_time!]).toEqual([1700000000.5, 1700000001.5, 1700000002.5]);
    expect([...a!.columns.step!]).toEqual([2 ** 40, 2 ** 40 + 10]);
    expect([...a!.columns.value!]).toEqual([-0, -1.5]);
    expect([...a!.columns.smoothed!]).toEqual([0, 0.1]);
    expect(c!.columns.step!.length).toBe(0);
    expect(Object.keys(b!.columns).sort()).toEqual(["smoothed", "step", "value", "wall_time"]);
    // Each series owns its buffer (they are transferred from the worker one by one).
    expect(a!.columns.step!.buffer).not.toBe(b!.columns.step!.buffer);
  });
});
