/**
 * A small priority queue of request slots. Cards ask for a slot before fetching; at most
 * `concurrency` requests run at once and the waiting card with the best priority (nearest the
 * top of the screen) goes next, so the first chart is not starved by the twenty below it.
 */
export class SlotQueue {
  private active = 0;
  private waiting: { priority: () => number; grant: (release: () => void) => void; signal: AbortSignal | undefined }[] = [];

  constructor(private concurrency: number) {}

  /** Allow more (or fewer) requests at once from now on. */
  setConcurrency(n: number): void {
    this.concurrency = n;
    this.pump();
  }

  acquire(priority: () => number, signal?: AbortSignal): Promise<() => void> {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(new DOMException("aborted", "AbortError"));
      const entry = { priority, grant: resolve, signal };
      this.waiting.push(entry);
      signal?.addEventListener(
        "abort",
        () => {
          const i = this.waiting.indexOf(entry);
          if (i >= 0) {
            this.waiting.splice(i, 1);
            reject(new DOMException("aborted", "AbortError"));
          }
        },
        { once: true },
      );
      this.pump();
    });
  }

  private pump(): void {
    while (this.active < this.concurrency && this.waiting.length > 0) {
      let best = 0;
      let bestP = Infinity;
      for (let i = 0; i < this.waiting.length; i++) {
        const p = this.waiting[i]!.priority();
        if (p < bestP || i === 0) {
          bestP = p;
          best = i;
        }
      }
      const entry = this.waiting.splice(best, 1)[0]!;
      this.active++;
      let released = false;
      entry.grant(() => {
        if (released) return;
        released = true;
        this.active--;
        this.pump();
      });
    }
  }

  get pending(): number {
    return this.waiting.length + this.active;
  }
}
