/**
 * Parses scalar responses off the main thread: a 200-run response is megabytes of JSON, and
 * parsing it on the main thread would stall scrolling and the slider. The page fetches the bytes
 * (so the worker needs no network access, whatever policy its script is served with) and
 * transfers them here; the columns go back as Float64Arrays, transferred, not copied.
 */
import { toFloat64, type JsonNumber } from "./lib/columns";

export interface ParseRequest {
  id: number;
  bytes: ArrayBuffer;
}

export type ParseReply = { id: number; ok: true; body: unknown } | { id: number; ok: false; message: string };

const COLUMNS = ["step", "wall_time", "value", "smoothed", "relative"] as const;

self.onmessage = (e: MessageEvent<ParseRequest>) => {
  const { id, bytes } = e.data;
  const post = (reply: ParseReply, transfer: Transferable[] = []) => (self as unknown as Worker).postMessage(reply, transfer);
  try {
    const body = JSON.parse(new TextDecoder().decode(bytes)) as { series?: { columns: Record<string, JsonNumber[] | Float64Array> }[] };
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
    post({ id, ok: true, body }, transfer);
  } catch (err) {
    post({ id, ok: false, message: String(err) });
  }
};
