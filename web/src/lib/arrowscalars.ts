/**
 * The scalars endpoint's Arrow answer (docs/server.md) in the shape of its JSON answer: one entry
 * per series of the schema's `tbscope.series`, with that run's rows as Float64Array columns.
 */
import type { ArrowTable, DictionaryColumn } from "./arrowipc";

export interface ScalarsBody {
  tag: string;
  x: string;
  loading: boolean;
  series: { run: string; color: string; total_points: number; columns: Record<string, Float64Array> }[];
}

export function scalarsFromArrow(t: ArrowTable): ScalarsBody {
  const meta = JSON.parse(t.metadata.get("tbscope.series") ?? "[]") as { run: string; color: string; total_points: number }[];
  const r = t.names.indexOf("run");
  const run = t.columns[r];
  if (r < 0 || !run || !("indices" in run)) throw new Error("Arrow scalars: no dictionary column `run`");
  // Each run's rows are one contiguous range; find it through the dictionary (in any order).
  const ranges = rowRanges(run);
  const numeric = t.names.flatMap((name, j) => (t.columns[j] instanceof Float64Array ? [{ name, col: t.columns[j] as Float64Array }] : []));
  const series = meta.map((m) => {
    const [a, b] = ranges.get(m.run) ?? [0, 0];
    const columns: Record<string, Float64Array> = {};
    // A copy per series: each owns its buffer, transferable and independent of the others.
    for (const { name, col } of numeric) columns[name] = col.slice(a, b);
    return { run: m.run, color: m.color, total_points: m.total_points, columns };
  });
  return { tag: t.metadata.get("tbscope.tag") ?? "", x: t.metadata.get("tbscope.x") ?? "step", loading: t.metadata.get("tbscope.loading") === "true", series };
}

function rowRanges(run: DictionaryColumn): Map<string, [number, number]> {
  const out = new Map<string, [number, number]>();
  const ix = run.indices;
  let start = 0;
  for (let i = 1; i <= ix.length; i++) {
    if (i === ix.length || ix[i] !== ix[start]) {
      const name = run.dictionary[ix[start]!];
      if (name !== undefined) {
        if (out.has(name)) throw new Error(`Arrow scalars: the rows of run ${JSON.stringify(name)} are not contiguous`);
        out.set(name, [start, i]);
      }
      start = i;
    }
  }
  return out;
}
