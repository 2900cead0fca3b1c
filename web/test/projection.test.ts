import { describe, expect, it } from "vitest";
import { CATEGORY_COLORS, MISSING, OTHER, backToFront, bounds, colorBy, nearest, search, toScreen, HOME } from "../src/lib/projection";

const ramp = (t: number): string => `ramp(${t.toFixed(2)})`;

describe("colour by a metadata column", () => {
  it("categories: the most frequent first, ties by label, missing cells grey", () => {
    const c = colorBy(["b", "a", "c", "a", null, "b", "a"], "string", ramp);
    expect(c.kind).toBe("category");
    expect(c.legend.map((e) => [e.label, e.count])).toEqual([["a", 3], ["b", 2], ["c", 1]]);
    expect(c.colors).toEqual([CATEGORY_COLORS[1], CATEGORY_COLORS[0], CATEGORY_COLORS[2], CATEGORY_COLORS[0], MISSING, CATEGORY_COLORS[1], CATEGORY_COLORS[0]]);
  });
  it("past twenty categories the rest share one colour and one legend row", () => {
    const values = Array.from({ length: 25 }, (_, i) => `k${String(i).padStart(2, "0")}`);
    const c = colorBy(values, "string", ramp);
    expect(c.legend).toHaveLength(21);
    expect(c.legend[20]).toEqual({ label: "5 others", color: OTHER, count: 5 });
    expect(c.colors.slice(20)).toEqual(Array(5).fill(OTHER));
  });
  it("numbers: a gradient over the finite range", () => {
    const c = colorBy([0, 5, 10, null, NaN], "number", ramp);
    expect(c.kind).toBe("gradient");
    expect([c.min, c.max]).toEqual([0, 10]);
    expect(c.colors).toEqual(["ramp(0.00)", "ramp(0.50)", "ramp(1.00)", MISSING, MISSING]);
    expect(colorBy([3, 3], "number", ramp).colors).toEqual(["ramp(0.50)", "ramp(0.50)"]);
  });
  it("no column: no colours", () => {
    expect(colorBy(null, "string", ramp)).toEqual({ colors: [], kind: "none", legend: [] });
  });
});

describe("search", () => {
  const words = ["cat", "Catalog", "dog", null, "hotdog"];
  it("uses the runs filter's syntax", () => {
    expect(search(words, "").matches).toBeNull();
    expect(search(words, "cat").matches).toEqual([0, 1]);
    expect(search(words, "*dog").matches).toEqual([2, 4]);
    expect(search(words, "/^d|^h/").matches).toEqual([2, 4]);
    expect(search([1.5, 2, 15], "1*").matches).toEqual([0, 2]);
  });
  it("an invalid regex matches nothing and says why", () => {
    const r = search(words, "/([/");
    expect(r.matches).toEqual([]);
    expect(r.error).toBeTruthy();
  });
});

describe("screen positions", () => {
  it("2-D: fits the points inside the padding, y up, centred", () => {
    const s = toScreen([0, 10, 5], [0, 4, 2], null, HOME, 200, 100, 10);
    // half-extent 5 along x fills min(200,100)/2 - 10 = 40 pixels
    expect([...s.sx]).toEqual([60, 140, 100]);
    expect([...s.sy]).toEqual([66, 34, 50]);
    expect([...s.depth]).toEqual([0.5, 0.5, 0.5]);
  });
  it("2-D: zoom scales about the centre and pan moves in fitted units", () => {
    const s = toScreen([0, 10], [0, 0], null, { ...HOME, zoom: 2, panX: 0.5 }, 200, 100, 10);
    expect([...s.sx]).toEqual([100 + 0.5 * 16 - 80, 100 + 0.5 * 16 + 80]);
  });
  it("3-D: yaw turns +x away from the viewer and -x towards it", () => {
    const s = toScreen([1, -1, 0, 0], [0, 0, 1, -1], [0, 0, 0, 0], { ...HOME, yaw: Math.PI / 2, pitch: 0 }, 100, 100, 0);
    expect(s.depth[0]).toBeCloseTo(0, 6);
    expect(s.depth[1]).toBeCloseTo(1, 6);
    expect(s.sx[0]).toBeCloseTo(50, 4);
    expect(s.sy[2]).toBeLessThan(50); // +y is up
  });
  it("3-D: the bounding sphere keeps every rotation inside the canvas", () => {
    const xs = [1, -1, 1, -1, 1, -1, 1, -1];
    const ys = [1, 1, -1, -1, 1, 1, -1, -1];
    const zs = [1, 1, 1, 1, -1, -1, -1, -1];
    expect(bounds(xs, ys, zs).r).toBeCloseTo(Math.sqrt(3));
    for (const yaw of [0, 0.4, 1.3, 2.9]) {
      const s = toScreen(xs, ys, zs, { ...HOME, yaw, pitch: 0.7 }, 300, 300, 20);
      for (let i = 0; i < 8; i++) {
        expect(s.sx[i]).toBeGreaterThanOrEqual(0);
        expect(s.sx[i]).toBeLessThanOrEqual(300);
      }
    }
  });
});

describe("picking", () => {
  const sx = new Float32Array([10, 50, 52]);
  const sy = new Float32Array([10, 50, 50]);
  const depth = new Float32Array([0.5, 0.2, 0.9]);
  it("finds the nearest point within the radius", () => {
    expect(nearest(sx, sy, depth, 12, 11)).toBe(0);
    expect(nearest(sx, sy, depth, 49, 50)).toBe(1);
    expect(nearest(sx, sy, depth, 100, 100)).toBe(-1);
  });
  it("prefers the front point at equal distance, and skips hidden ones", () => {
    expect(nearest(sx, sy, depth, 51, 50)).toBe(2);
    expect(nearest(sx, sy, depth, 51, 50, 8, (i) => i !== 2)).toBe(1);
  });
  it("draws far points first", () => {
    expect([...backToFront(depth)]).toEqual([1, 0, 2]);
  });
});
