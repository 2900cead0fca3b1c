import { describe, expect, it } from "vitest";
import { compileFilter } from "../src/lib/filter";

const runs = ["exp1/2024-01-01/lr=0.1/train", "exp1/2024-01-01/lr=0.1/validation", "exp2/lr=0.01/train", "Baseline"];
const pick = (f: string): string[] => runs.filter(compileFilter(f).test);

describe("run filter", () => {
  it("empty matches everything", () => {
    expect(pick("")).toEqual(runs);
    expect(compileFilter("  ").empty).toBe(true);
  });
  it("plain text is a case-insensitive substring", () => {
    expect(pick("TRAIN")).toEqual([runs[0], runs[2]]);
    expect(pick("lr=0.1")).toEqual([runs[0], runs[1]]); // the dot is literal
  });
  it("a glob matches the whole name", () => {
    expect(pick("*/train")).toEqual([runs[0], runs[2]]);
    expect(pick("exp?/lr=*")).toEqual([runs[2]]);
    expect(pick("exp[!1]*")).toEqual([runs[2]]);
    expect(pick("train*")).toEqual([]);
  });
  it("/regex/ searches anywhere", () => {
    expect(pick("/valid|^base/")).toEqual([runs[1], runs[3]]);
    expect(pick("/lr=0\\.1\\//")).toEqual([runs[0], runs[1]]);
  });
  it("an invalid regex reports its error and hides nothing", () => {
    const f = compileFilter("/([/");
    expect(f.error).toBeTruthy();
    expect(runs.filter(f.test)).toEqual(runs);
  });
});

import { compileHparamFilter, isHparamFilter } from "../src/lib/filter";

describe("hparam filter", () => {
  const hp: Record<string, Record<string, string | number | boolean>> = {
    a: { lr: 0.1, opt: "adam", bn: true },
    b: { lr: 0.01, opt: "sgd", bn: false },
    c: { opt: "adam" },
  };
  const lookup = (run: string, name: string) => hp[run]?.[name];
  const pick = (f: string) => Object.keys(hp).filter(compileHparamFilter(f, lookup).test);
  it("is recognised by its prefix", () => {
    expect(isHparamFilter(" hp.lr<1")).toBe(true);
    expect(isHparamFilter("lr=0.1")).toBe(false);
  });
  it("compares numbers as numbers and text as text", () => {
    expect(pick("hp.lr<0.05")).toEqual(["b"]);
    expect(pick("hp.lr>=0.01")).toEqual(["a", "b"]);
    expect(pick("hp.opt=adam")).toEqual(["a", "c"]);
    expect(pick("hp.opt!=adam")).toEqual(["b"]);
    expect(pick("hp.bn=true")).toEqual(["a"]);
  });
  it("ANDs clauses and drops runs without the hparam", () => {
    expect(pick("hp.opt=adam hp.lr>0")).toEqual(["a"]);
  });
  it("reports what it cannot read", () => {
    expect(compileHparamFilter("hp.lr~3", lookup).error).toMatch(/hp\.NAME=VALUE/);
  });
});
