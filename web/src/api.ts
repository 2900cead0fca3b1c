/**
 * The REST client. Every URL is relative to the page (`api/v1/...` against document.baseURI),
 * so the dashboard works under any --path_prefix. A 401 asks the user for the token once and
 * retries with `Authorization: Bearer`.
 */
import { parseScalarsBody } from "./lib/scalarbody";
import type { JsonNumber } from "./lib/columns";
import type { ParseReply, ParseRequest } from "./fetcher.worker";

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export interface Status {
  version: string;
  generation: number;
  loading: { done: boolean; files_done: number; files_total: number; bytes_done: number; bytes_total: number };
  logdirs: { name: string; path: string; exists: boolean }[];
  token_required: boolean;
  kinds: Record<string, number | boolean>;
}

export interface RunsResponse {
  total: number;
  offset: number;
  columns: {
    run: string[];
    color: string[];
    start_time: JsonNumber[];
    last_wall_time: JsonNumber[];
    max_step: (number | null)[];
    files: number[];
    bytes: number[];
    problems: number[];
  };
}

export interface TagsResponse {
  kind: string;
  columns: { tag: string[]; runs: number[]; points: number[] };
}

export interface SeriesResponse {
  columns: { run: string[]; tag: string[]; kind: string[]; points: number[]; min_step: number[]; max_step: number[] };
}

/** Scalar columns arrive parsed into Float64Arrays (by the fetch worker). */
export interface ScalarSeries {
  run: string;
  color: string;
  total_points: number;
  columns: { step: Float64Array; wall_time: Float64Array; value: Float64Array; smoothed?: Float64Array };
}

export interface ScalarsResponse {
  tag: string;
  x: string;
  series: ScalarSeries[];
}

export interface ScalarsQuery {
  tag: string;
  runs: string[] | null;
  points: number;
  /** The axis the server buckets along; xMin/xMax are in its units. */
  x?: "step" | "relative" | "wall_time";
  smoothing?: number;
  xMin?: number;
  xMax?: number;
}

type Params = Record<string, string | number | boolean | null | undefined | readonly (string | number)[]>;

export type TokenPrompt = (wrong: boolean) => Promise<string>;

export class Api {
  readonly base: URL;
  private token: string | null;
  private prompting: Promise<string> | null = null;
  askToken: TokenPrompt | null = null;

  constructor(base = new URL("api/v1/", document.baseURI)) {
    this.base = base;
    this.token = sessionStorage.getItem("tbscope_token");
  }

  get hasToken(): boolean {
    return this.token !== null;
  }

  url(path: string, params?: Params): URL {
    const u = new URL(path, this.base);
    if (params) {
      for (const [k, v] of Object.entries(params)) {
        if (v === null || v === undefined) continue;
        if (Array.isArray(v)) for (const x of v) u.searchParams.append(k, String(x));
        else u.searchParams.set(k, String(v));
      }
    }
    return u;
  }

  private headers(extra?: Record<string, string>): Headers {
    const hd = new Headers(extra);
    if (this.token) hd.set("Authorization", `Bearer ${this.token}`);
    return hd;
  }

  /** fetch with the token; on 401 prompt for it (once for concurrent requests) and retry. */
  async fetch(url: URL, init: RequestInit = {}, accept = "application/json"): Promise<Response> {
    for (let attempt = 0; ; attempt++) {
      const used = this.token;
      const res = await fetch(url, { ...init, headers: this.headers({ Accept: accept, ...(init.headers as Record<string, string> | undefined) }) });
      if (res.status !== 401 || !this.askToken || attempt > 5) {
        if (!res.ok) throw await toError(res);
        return res;
      }
      // A 401 for a token that has been replaced while this request was out (another request's
      // prompt got a new one) says nothing about the new token: retry with it, do not ask again.
      if (this.token !== used) continue;
      await this.promptToken(attempt > 0 || this.token !== null);
    }
  }

  private async promptToken(wrong: boolean): Promise<void> {
    if (!this.prompting) {
      this.prompting = this.askToken!(wrong).finally(() => {
        this.prompting = null;
      });
    }
    const t = await this.prompting;
    this.token = t;
    sessionStorage.setItem("tbscope_token", t);
  }

  async get<T>(path: string, params?: Params, signal?: AbortSignal): Promise<T> {
    const res = await this.fetch(this.url(path, params), signal ? { signal } : {});
    return (await res.json()) as T;
  }

  async post<T>(path: string, body: unknown, signal?: AbortSignal): Promise<T> {
    const init: RequestInit = { method: "POST", body: JSON.stringify(body), headers: { "Content-Type": "application/json" } };
    if (signal) init.signal = signal;
    const res = await this.fetch(this.url(path), init);
    return (await res.json()) as T;
  }

  async blob(path: string, params?: Params, signal?: AbortSignal): Promise<Blob> {
    const res = await this.fetch(this.url(path, params), signal ? { signal } : {}, "*/*");
    return res.blob();
  }

  status(signal?: AbortSignal): Promise<Status> {
    return this.get("status", undefined, signal);
  }

  runs(signal?: AbortSignal): Promise<RunsResponse> {
    return this.get("runs", { offset: 0, limit: 100000 }, signal);
  }

  tags(kind: string, signal?: AbortSignal): Promise<TagsResponse> {
    return this.get("tags", { kind }, signal);
  }

  series(kind: string, signal?: AbortSignal): Promise<SeriesResponse> {
    return this.get("series", { kind }, signal);
  }

  private worker: Worker | null | undefined;
  private pending = new Map<number, (r: ParseReply) => void>();
  private nextId = 1;

  /** Start the parse worker ahead of its first answer (its script loads and compiles meanwhile). */
  startWorker(): void {
    this.getWorker();
  }

  private getWorker(): Worker | null {
    if (this.worker === undefined) {
      try {
        this.worker = new Worker(new URL("./fetcher.worker.ts", import.meta.url), { type: "module" });
        this.worker.onmessage = (e: MessageEvent<ParseReply>) => {
          const cb = this.pending.get(e.data.id);
          this.pending.delete(e.data.id);
          cb?.(e.data);
        };
        // A worker that cannot start (an old browser, a proxy's policy): parse on this thread.
        this.worker.onerror = () => this.dropWorker();
      } catch {
        this.worker = null;
      }
    }
    return this.worker;
  }

  /** Stop using the worker; answers it had not parsed yet are parsed on this thread. */
  private dropWorker(): void {
    this.worker?.terminate();
    this.worker = null;
    const pending = [...this.pending.values()];
    this.pending.clear();
    for (const cb of pending) cb({ id: 0, ok: false, message: "worker stopped" });
  }

  /** A JSON request whose body is parsed in the worker (scalar columns become Float64Arrays). */
  private async viaWorker<T>(url: URL, method: "GET" | "POST", body: unknown, signal?: AbortSignal): Promise<T> {
    const init: RequestInit = method === "POST" ? { method, body: JSON.stringify(body), headers: { "Content-Type": "application/json" } } : {};
    if (signal) init.signal = signal;
    // Arrow first: its columns are the bytes of Float64Arrays, where JSON of the same answer is
    // half as large again and its parse is most of the worker's time; JSON stays acceptable.
    const res = await this.fetch(url, init, `${ARROW_STREAM}, application/json;q=0.9`);
    const arrow = isArrow(res);
    const bytes = await res.arrayBuffer();
    const w = this.getWorker();
    if (w) {
      const id = this.nextId++;
      const reply = await new Promise<ParseReply>((resolve) => {
        this.pending.set(id, resolve);
        const req: ParseRequest = { id, bytes, arrow };
        w.postMessage(req, [bytes]);
      });
      if (signal?.aborted) throw new DOMException("aborted", "AbortError");
      if (reply.ok) return reply.body as T;
      // The bytes went to a worker that failed (or an Arrow stream it could not read): fetch
      // again as JSON and parse here.
      return parseScalarsBody(await (await this.fetch(url, init)).arrayBuffer(), false) as T;
    }
    return parseScalarsBody(bytes, arrow) as T;
  }

  scalars(q: ScalarsQuery, signal?: AbortSignal): Promise<ScalarsResponse> {
    const params: Record<string, string | number | string[]> = { tag: q.tag, points: q.points };
    if (q.x && q.x !== "step") params.x = q.x;
    if (q.smoothing !== undefined && q.smoothing > 0) params.smoothing = q.smoothing;
    if (q.xMin !== undefined) params.x_min = q.xMin;
    if (q.xMax !== undefined) params.x_max = q.xMax;
    if (q.runs !== null && q.runs.length > 40) {
      // Long run lists go in a body: a URL of hundreds of run names outgrows proxies' limits.
      return this.viaWorker(this.url("scalars"), "POST", { ...params, runs: q.runs }, signal);
    }
    if (q.runs !== null) params.run = q.runs;
    return this.viaWorker(this.url("scalars", params), "GET", undefined, signal);
  }

  /** Live changes: server-sent events when the browser can send our credentials, else polling. */
  eventsUrl(): URL {
    return this.url("events");
  }
}

const ARROW_STREAM = "application/vnd.apache.arrow.stream";

function isArrow(res: Response): boolean {
  return (res.headers.get("Content-Type") ?? "").split(";")[0]!.trim() === ARROW_STREAM;
}

async function toError(res: Response): Promise<ApiError> {
  try {
    const body = (await res.json()) as { error?: { code?: string; message?: string } };
    if (body.error) return new ApiError(res.status, body.error.code ?? "error", body.error.message ?? res.statusText);
  } catch {
    // Not our JSON error shape (a proxy's page, say): fall through to the status line.
  }
  return new ApiError(res.status, "http", `${res.status} ${res.statusText}`);
}

export function isAbort(e: unknown): boolean {
  return e instanceof DOMException && e.name === "AbortError";
}
