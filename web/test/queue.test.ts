import { describe, expect, it } from "vitest";
import { SlotQueue } from "../src/lib/queue";

describe("SlotQueue", () => {
  it("runs at most `concurrency` at once and picks the best priority next", async () => {
    const q = new SlotQueue(1);
    const order: string[] = [];
    const first = await q.acquire(() => 0);
    const prio: Record<string, number> = { far: 100, near: 1, mid: 50 };
    const waits = Object.keys(prio).map((k) =>
      q.acquire(() => prio[k]!).then((release) => {
        order.push(k);
        release();
      }),
    );
    expect(q.pending).toBe(4);
    first();
    await Promise.all(waits);
    expect(order).toEqual(["near", "mid", "far"]);
    expect(q.pending).toBe(0);
  });

  it("drops aborted waiters and ignores a double release", async () => {
    const q = new SlotQueue(1);
    const held = await q.acquire(() => 0);
    const ac = new AbortController();
    const aborted = q.acquire(() => 0, ac.signal);
    ac.abort();
    await expect(aborted).rejects.toThrow();
    held();
    held();
    const a = await q.acquire(() => 0);
    expect(q.pending).toBe(1);
    a();
  });
});
