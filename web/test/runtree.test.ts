import { describe, expect, it } from "vitest";
import { buildTree, compact, flatten } from "../src/lib/runtree";

const runs = [
  "exp1/2024-01-01/a/train",
  "exp1/2024-01-01/a/validation",
  "exp1/2024-01-01/b/train",
  "exp2",
  "exp2/eval",
  "solo",
];

describe("run tree", () => {
  const root = buildTree(runs);

  it("groups by folder and records the run range of each folder", () => {
    expect(root.children.map((c) => c.name)).toEqual(["exp1", "exp2", "solo"]);
    const exp1 = root.children[0]!;
    expect([exp1.first, exp1.last]).toEqual([0, 2]);
    const exp2 = root.children[1]!;
    expect(exp2.run).toBe(3); // a run and a folder at once
    expect(exp2.children[0]!.path).toBe("exp2/eval");
  });

  it("flattens only expanded folders and hides folders with no visible run", () => {
    const all = () => true;
    expect(flatten(root, new Set(), all).map((r) => r.node.path)).toEqual(["exp1", "exp2", "solo"]);
    const open = new Set(["exp1", "exp1/2024-01-01", "exp1/2024-01-01/a"]);
    const rows = flatten(root, open, all);
    expect(rows.map((r) => r.node.path)).toEqual([
      "exp1",
      "exp1/2024-01-01",
      "exp1/2024-01-01/a",
      "exp1/2024-01-01/a/train",
      "exp1/2024-01-01/a/validation",
      "exp1/2024-01-01/b",
      "exp2",
      "solo",
    ]);
    expect(rows.map((r) => r.depth)).toEqual([0, 1, 2, 3, 3, 2, 0, 0]);
    const onlyValidation = (i: number) => runs[i]!.endsWith("validation");
    expect(flatten(root, open, onlyValidation).map((r) => r.node.path)).toEqual([
      "exp1",
      "exp1/2024-01-01",
      "exp1/2024-01-01/a",
      "exp1/2024-01-01/a/validation",
    ]);
    expect(flatten(root, new Set(), (i) => i === 4).map((r) => r.node.path)).toEqual(["exp2"]);
  });

  it("compacts single-child chains", () => {
    const c = compact(root);
    expect(c.children[0]!.name).toBe("exp1/2024-01-01");
    expect(c.children[0]!.path).toBe("exp1/2024-01-01");
  });

  it("builds 100,000 runs quickly", () => {
    const many = Array.from({ length: 100000 }, (_, i) => `e${Math.floor(i / 1000)}/d${Math.floor(i / 100) % 10}/r${i}`).sort();
    const t0 = performance.now();
    const t = buildTree(many);
    const rows = flatten(t, new Set(), () => true);
    expect(t.children).toHaveLength(100);
    expect(rows).toHaveLength(100);
    expect(performance.now() - t0).toBeLessThan(2000);
  });
});
