/**
 * Fetches and parses scalar responses off the main thread: a 200-run response is megabytes of
 * JSON, and parsing it on the main thread would stall scrolling and the slider. Columns come
 * back as Float64Arrays, transferred (not copied).
 */
import { toFloat64, type JsonNumber } from "./lib/columns";

export interface FetchRequest {
  id: number;
  url: string;
  method: "GET" | "POST";
  body?: string;
  headers: Record<string, string>;
}

export type FetchReply =
  | { id: number; ok: true; body: unknown }
  | { id: number; ok: false; status: number; code: string; message: string };

const controllers = new Map<number, AbortController>();
const COLUMNS = ["step", "wall_time", "value", "smoothed", "relative"] as const;

self.onmessage = async (e: MessageEvent<FetchRequest | { abort: number }>) => {
  const msg = e.data;
  if ("abort" in msg) {
    controllers.get(msg.abort)?.abort();
    controllers.delete(msg.abort);
    return;
  }
  const ac = new AbortController();
  controllers.set(msg.id, ac);
  const post = (reply: FetchReply, transfer: Transferable[] = []) => (self as unknown as Worker).postMessage(reply, transfer);
  try {
    const init: RequestInit = { method: msg.method, headers: msg.headers, signal: ac.signal, credentials: "same-origin" };
    if (msg.body !== undefined) init.body = msg.body;
    const res = await fetch(msg.url, init);
    if (!res.ok) {
      let code = "http";
      let message = `${res.status} ${res.statusText}`;
      try {
        const b = (await res.json()) as { error?: { code?: string; message?: string } };
        if (b.error) {
          code = b.error.code ?? code;
          message = b.error.message ?? message;
        }
      } catch {
        // Not our error shape: keep the status line.
      }
      post({ id: msg.id, ok: false, status: res.status, code, message });
      return;
    }
    const body = (await res.json()) as { series?: { columns: Record<string, JsonNumber[] | Float64Array> }[] };
    const transfer: Transferable[] = [];
    for (const s of body.series ?? []) {
      for (const k of COLUMNS) {
        const col = s.columns[k];
        if (col && !(col instanceof Float64Array)) {
          const a = toFloat64(col);
          s.columns[k] = a;
          transfer.push(a.buffer);
        }
      }
    }
    post({ id: msg.id, ok: true, body }, transfer);
  } catch (err) {
    const aborted = err instanceof DOMException && err.name === "AbortError";
    post({ id: msg.id, ok: false, status: aborted ? -1 : 0, code: aborted ? "aborted" : "network", message: String(err) });
  } finally {
    controllers.delete(msg.id);
  }
};
