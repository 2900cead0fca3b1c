/** A scalars answer's bytes, parsed where they arrive (the fetch worker, or the page without one). */
import { readArrowStream } from "./arrowipc";
import { scalarsFromArrow } from "./arrowscalars";
import { toFloat64, type JsonNumber } from "./columns";

const COLUMNS = ["step", "wall_time", "value", "smoothed", "relative"] as const;

/** An answer's body, parsed: JSON with scalar columns as Float64Arrays, or the Arrow form of it. */
export function parseScalarsBody(bytes: ArrayBuffer, arrow: boolean): unknown {
  if (arrow) return scalarsFromArrow(readArrowStream(bytes));
  const body = JSON.parse(new TextDecoder().decode(bytes)) as { series?: { columns: Record<string, JsonNumber[] | Float64Array> }[] };
  for (const s of body.series ?? []) {
    for (const k of COLUMNS) {
      const col = s.columns[k];
      if (col && !(col instanceof Float64Array)) s.columns[k] = toFloat64(col);
    }
  }
  return body;
}
