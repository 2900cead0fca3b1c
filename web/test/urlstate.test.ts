import { describe, expect, it } from "vitest";
import { DEFAULT_STATE, formatHash, parseHash, type UrlState } from "../src/lib/urlstate";

describe("URL state", () => {
  it("defaults make a short link", () => {
    expect(formatHash({ ...DEFAULT_STATE })).toBe("#scalars");
    expect(parseHash("")).toEqual({ ...DEFAULT_STATE });
    expect(parseHash("#")).toEqual({ ...DEFAULT_STATE });
  });

  it("round-trips every field, with awkward run names", () => {
    const s: UrlState = {
      view: "histograms",
      runFilter: "/lr=0\\.1.*seed=[12]/",
      tagFilter: "train/*",
      hidden: ["a&b=c", "x/y z", "#frag?", "ünï/cødé"],
      only: null,
      smoothing: 0.95,
      xAxis: "wall_time",
      logY: true,
      ignoreOutliers: false,
      card: "eval/accuracy",
      collapsed: ["train", "eval"],
      tree: false,
      points: 1000,
      emb: "run=a%26b%2Fc&tag=words%3A00003&dims=3&q=%2Fw%5B12%5D%2F",
    };
    expect(parseHash(formatHash(s))).toEqual(s);
  });

  it("an explicit selection wins over hidden runs, and may be empty", () => {
    const s: UrlState = { ...DEFAULT_STATE, only: ["r1", "r2"], hidden: [], collapsed: [] };
    expect(parseHash(formatHash(s)).only).toEqual(["r1", "r2"]);
    const none: UrlState = { ...DEFAULT_STATE, only: [], hidden: [], collapsed: [] };
    expect(formatHash(none)).toBe("#scalars?only=");
    expect(parseHash(formatHash(none)).only).toEqual([]);
  });

  it("bounds the points per series", () => {
    expect(parseHash("#scalars?points=5000000").points).toBe(100000);
    expect(parseHash("#scalars?points=-3").points).toBe(0);
    expect(parseHash("#scalars?points=1.5").points).toBe(0);
  });

  it("rejects junk without throwing", () => {
    const s = parseHash("#<script>?smoothing=abc&x=bogus&smoothing=5");
    expect(s.view).toBe("scalars");
    expect(s.smoothing).toBe(0.6);
    expect(s.xAxis).toBe("step");
    expect(parseHash("#scalars?smoothing=5").smoothing).toBe(0.999);
    expect(parseHash("#scalars?smoothing=-1").smoothing).toBe(0);
  });

  it("accepts a leading slash (#/images)", () => {
    expect(parseHash("#/images?x=relative").view).toBe("images");
    expect(parseHash("#/images?x=relative").xAxis).toBe("relative");
  });
});
