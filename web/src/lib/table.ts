/**
 * Column filters and sorting for the hparams table. A numeric column's filter reads `>0.1`,
 * `<=5`, `=3`, `!=3` or a range `0.1..0.5` (either end may be empty); a text column's filter
 * is a case-insensitive substring, `=text` for an exact match or `!=text` to exclude.
 */
export type Cell = string | number | boolean | null;

export function parseColumnFilter(text: string, numeric: boolean): ((v: Cell) => boolean) | null {
  const t = text.trim();
  if (!t) return null;
  if (numeric) {
    const range = /^(-?[\d.e+-]*)\s*\.\.\s*(-?[\d.e+-]*)$/i.exec(t);
    if (range) {
      const lo = range[1] ? Number(range[1]) : -Infinity;
      const hi = range[2] ? Number(range[2]) : Infinity;
      if (Number.isNaN(lo) || Number.isNaN(hi)) return () => true;
      return (v) => typeof v === "number" && v >= lo && v <= hi;
    }
    const cmp = /^(<=|>=|!=|=|<|>)\s*(.+)$/.exec(t);
    if (cmp) {
      const x = Number(cmp[2]);
      if (Number.isNaN(x)) return () => true;
      const op = cmp[1];
      return (v) => {
        if (typeof v !== "number") return false;
        switch (op) {
          case "<": return v < x;
          case "<=": return v <= x;
          case ">": return v > x;
          case ">=": return v >= x;
          case "!=": return v !== x;
          default: return v === x;
        }
      };
    }
    const x = Number(t);
    if (!Number.isNaN(x)) return (v) => v === x;
  }
  if (t.startsWith("!=")) {
    const s = t.slice(2).toLowerCase();
    return (v) => String(v ?? "").toLowerCase() !== s;
  }
  if (t.startsWith("=")) {
    const s = t.slice(1).toLowerCase();
    return (v) => String(v ?? "").toLowerCase() === s;
  }
  const s = t.toLowerCase();
  return (v) => String(v ?? "").toLowerCase().includes(s);
}

/** Sort row indices by a column: numbers numerically, text naturally, missing values last. */
export function sortRows(rows: number[], column: readonly Cell[], dir: 1 | -1): number[] {
  const coll = new Intl.Collator(undefined, { numeric: true, sensitivity: "base" });
  return [...rows].sort((a, b) => {
    const x = column[a] ?? null;
    const y = column[b] ?? null;
    const xm = x === null || (typeof x === "number" && Number.isNaN(x));
    const ym = y === null || (typeof y === "number" && Number.isNaN(y));
    if (xm || ym) return xm === ym ? a - b : xm ? 1 : -1;
    let c: number;
    if (typeof x === "number" && typeof y === "number") c = x - y;
    else c = coll.compare(String(x), String(y));
    return c === 0 ? a - b : c * dir;
  });
}
