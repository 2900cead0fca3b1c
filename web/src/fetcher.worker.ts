/**
 * Parses scalar responses off the main thread: a 200-run response is megabytes of JSON, and
 * parsing it on the main thread would stall scrolling and the slider. The page fetches the bytes
 * (so the worker needs no network access, whatever policy its script is served with) and
 * transfers them here; the columns go back as Float64Arrays, transferred, not copied.
 */
import { parseScalarsBody } from "./lib/scalarbody";

export interface ParseRequest {
  id: number;
  bytes: ArrayBuffer;
  /** The bytes are the scalars endpoint's Arrow IPC stream, not JSON. */
  arrow: boolean;
}

export type ParseReply = { id: number; ok: true; body: unknown } | { id: number; ok: false; message: string };

self.onmessage = (e: MessageEvent<ParseRequest>) => {
  const { id, bytes, arrow } = e.data;
  const post = (reply: ParseReply, transfer: Transferable[] = []) => (self as unknown as Worker).postMessage(reply, transfer);
  try {
    const body = parseScalarsBody(bytes, arrow) as { series?: { columns: Record<string, unknown> }[] };
    const transfer: Transferable[] = [];
    for (const s of body.series ?? []) for (const c of Object.values(s.columns)) if (c instanceof Float64Array) transfer.push(c.buffer);
    post({ id, ok: true, body }, transfer);
  } catch (err) {
    post({ id, ok: false, message: String(err) });
  }
};
