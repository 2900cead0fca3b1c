import { describe, expect, it } from "vitest";
import { parseColumnFilter, sortRows, type Cell } from "../src/lib/table";

describe("hparams table filters", () => {
  const nums: Cell[] = [0.001, 0.01, 0.1, 1, null, NaN];
  const pick = (f: string, col: Cell[], numeric: boolean) => col.map((v, i) => [v, i] as const).filter(([v]) => parseColumnFilter(f, numeric)!(v)).map(([, i]) => i);
  it("reads comparisons and ranges on numbers", () => {
    expect(pick(">0.01", nums, true)).toEqual([2, 3]);
    expect(pick("<=0.01", nums, true)).toEqual([0, 1]);
    expect(pick("0.005..0.5", nums, true)).toEqual([1, 2]);
    expect(pick("..0.01", nums, true)).toEqual([0, 1]);
    expect(pick("0.1", nums, true)).toEqual([2]);
    expect(pick("!=1", nums, true)).toEqual([0, 1, 2, 5]);
  });
  it("matches text by substring, exactly, or excludes", () => {
    const col: Cell[] = ["adam", "AdamW", "sgd", null];
    expect(pick("adam", col, false)).toEqual([0, 1]);
    expect(pick("=adam", col, false)).toEqual([0]);
    expect(pick("!=adam", col, false)).toEqual([1, 2, 3]);
  });
  it("empty text means no filter", () => {
    expect(parseColumnFilter("  ", true)).toBeNull();
  });
});

describe("hparams table sorting", () => {
  it("sorts numbers numerically with missing values last either way", () => {
    const col: Cell[] = [10, null, 2, NaN, 33];
    expect(sortRows([0, 1, 2, 3, 4], col, 1)).toEqual([2, 0, 4, 1, 3]);
    expect(sortRows([0, 1, 2, 3, 4], col, -1)).toEqual([4, 0, 2, 1, 3]);
  });
  it("sorts text naturally (run10 after run9)", () => {
    const col: Cell[] = ["run10", "run9", "Run1"];
    expect(sortRows([0, 1, 2], col, 1)).toEqual([2, 1, 0]);
  });
});
