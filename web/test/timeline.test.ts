import { describe, expect, it } from "vitest";
import { clampWindow, fmtMicros, tickStep, zoomAround } from "../src/lib/timeline";

describe("profile timeline helpers", () => {
  it("formats microseconds in the unit that reads best", () => {
    expect(fmtMicros(12.5)).toBe("12.5 µs");
    expect(fmtMicros(1500)).toBe("1.5 ms");
    expect(fmtMicros(2_500_000)).toBe("2.5 s");
    expect(fmtMicros(Number.NaN)).toBe("–");
  });

  it("picks round tick steps with at most the asked number of ticks", () => {
    for (const span of [3, 17, 999, 16_590, 1e7]) {
      const s = tickStep(span, 8);
      expect(span / s).toBeLessThanOrEqual(8);
      expect(span / s).toBeGreaterThan(1);
      const mantissa = s / Math.pow(10, Math.floor(Math.log10(s)));
      expect([1, 2, 5]).toContain(Math.round(mantissa));
    }
  });

  it("keeps zoom windows inside the trace", () => {
    expect(clampWindow(-50, 50, 0, 1000)).toEqual([0, 100]);
    expect(clampWindow(950, 1100, 0, 1000)).toEqual([850, 1000]);
    expect(clampWindow(-10, 5000, 0, 1000)).toEqual([0, 1000]);
    expect(clampWindow(10, 10, 0, 1000, 1)).toEqual([10, 11]);
  });

  it("zooms around the cursor", () => {
    const [a, b] = zoomAround(0, 100, 25, 0.5);
    expect([a, b]).toEqual([12.5, 62.5]);
    expect((25 - a) / (b - a)).toBeCloseTo(0.25);
  });
});
