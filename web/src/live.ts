/**
 * Live refresh. Server-sent events carry a change notice after each reload that found
 * something; when the page authenticates with a header token (EventSource cannot send one) or
 * the stream keeps failing, the dashboard polls `changes?since=` instead. The connection state
 * is shown in the header.
 */
import type { Api } from "./api";
import type { LiveChange, Store } from "./store";

export class Live {
  private es: EventSource | null = null;
  private pollTimer = 0;
  private generation = 0;
  private failures = 0;
  private stopped = false;

  constructor(
    private readonly api: Api,
    private readonly store: Store,
    private readonly onChange: (c: LiveChange) => void,
  ) {}

  start(generation: number): void {
    this.generation = generation;
    if (this.api.hasToken || typeof EventSource === "undefined") this.poll();
    else this.connect();
  }

  private setState(s: Store["connection"]): void {
    if (this.store.connection === s) return;
    this.store.connection = s;
    this.store.emit("connection");
  }

  private connect(): void {
    const es = new EventSource(this.api.eventsUrl());
    this.es = es;
    es.addEventListener("open", () => {
      this.failures = 0;
      this.setState("live");
      // Whatever happened while disconnected: catch up once.
      void this.catchUp();
    });
    es.addEventListener("change", (ev) => {
      try {
        const c = JSON.parse((ev as MessageEvent<string>).data) as LiveChange;
        if (c.generation > this.generation) this.generation = c.generation;
        this.onChange(c);
      } catch {
        // A malformed notice changes nothing; the next one or the catch-up repairs it.
      }
    });
    es.addEventListener("error", () => {
      this.failures++;
      this.setState("reconnecting");
      if (es.readyState === EventSource.CLOSED || this.failures > 5) {
        es.close();
        this.es = null;
        this.poll();
      }
    });
  }

  private async catchUp(): Promise<boolean> {
    try {
      const c = await this.api.get<LiveChange>("changes", { since: this.generation });
      if (c.generation > this.generation) {
        this.generation = c.generation;
        if (c.runs.length > 0 || c.kinds.length > 0) this.onChange(c);
      }
      return true;
    } catch {
      return false;
    }
  }

  private poll(): void {
    if (this.stopped) return;
    window.clearTimeout(this.pollTimer);
    void this.catchUp().then((ok) => {
      this.setState(ok ? "polling" : "reconnecting");
      this.pollTimer = window.setTimeout(() => this.poll(), ok ? 5000 : 2000);
    });
  }

  stop(): void {
    this.stopped = true;
    this.es?.close();
    window.clearTimeout(this.pollTimer);
  }
}
