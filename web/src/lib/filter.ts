/**
 * The runs and tags filter box: `/regex/` (flags allowed, case-insensitive by default) searches
 * anywhere in the name; text with `*`, `?` or `[` is a glob over the whole name (`*` stops at
 * nothing, as in the server's run filter); any other text matches as a case-insensitive
 * substring. An invalid regex reports its error and matches everything.
 */
export interface CompiledFilter {
  test: (name: string) => boolean;
  error: string | null;
  empty: boolean;
}

export function globToRegExp(glob: string): RegExp {
  let re = "";
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i]!;
    if (c === "*") re += ".*";
    else if (c === "?") re += ".";
    else if (c === "[") {
      const close = glob.indexOf("]", i + 1);
      if (close < 0) re += "\\[";
      else {
        let body = glob.slice(i + 1, close);
        if (body.startsWith("!")) body = "^" + body.slice(1);
        re += "[" + body.replace(/\\/g, "\\\\") + "]";
        i = close;
      }
    } else re += c.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
  }
  return new RegExp("^" + re + "$", "i");
}

export function compileFilter(text: string): CompiledFilter {
  const t = text.trim();
  if (t === "") return { test: () => true, error: null, empty: true };
  const m = /^\/(.*)\/([a-z]*)$/s.exec(t);
  if (m) {
    try {
      const flags = m[2]!.includes("i") ? m[2]! : m[2]! + "i";
      const re = new RegExp(m[1]!, flags.replace(/[gy]/g, ""));
      return { test: (s) => re.test(s), error: null, empty: false };
    } catch (e) {
      return { test: () => true, error: (e as Error).message, empty: false };
    }
  }
  if (/[*?[]/.test(t)) {
    const re = globToRegExp(t);
    return { test: (s) => re.test(s), error: null, empty: false };
  }
  const needle = t.toLowerCase();
  return { test: (s) => s.toLowerCase().includes(needle), error: null, empty: false };
}

/**
 * Hparam clauses in the runs filter: `hp.lr<0.01 hp.optimizer=adam` keeps runs whose hparams
 * satisfy every clause (=, !=, <, <=, >, >=; numbers compare as numbers, anything else as
 * text). A run without the hparam fails its clause.
 */
export type HparamLookup = (run: string, name: string) => string | number | boolean | null | undefined;

const CLAUSE = /^hp\.([^\s=!<>]+)\s*(<=|>=|!=|=|<|>)\s*(\S+)$/;

export function isHparamFilter(text: string): boolean {
  return /^\s*hp\./.test(text);
}

export function compileHparamFilter(text: string, lookup: HparamLookup): CompiledFilter {
  const clauses: { name: string; op: string; value: string }[] = [];
  for (const part of text.trim().split(/\s+(?=hp\.)/)) {
    const m = CLAUSE.exec(part.trim());
    if (!m) return { test: () => true, error: `Cannot read “${part}”: write hp.NAME=VALUE (or !=, <, <=, >, >=)`, empty: false };
    clauses.push({ name: m[1]!, op: m[2]!, value: m[3]! });
  }
  const test = (run: string): boolean => {
    for (const c of clauses) {
      const v = lookup(run, c.name);
      if (v === null || v === undefined) return false;
      const num = Number(c.value);
      const cmp =
        typeof v === "number" && Number.isFinite(num) ? v - num : typeof v === "boolean" ? String(v).localeCompare(c.value.toLowerCase()) : String(v).localeCompare(c.value);
      const ok =
        c.op === "=" ? cmp === 0 : c.op === "!=" ? cmp !== 0 : c.op === "<" ? cmp < 0 : c.op === "<=" ? cmp <= 0 : c.op === ">" ? cmp > 0 : cmp >= 0;
      if (!ok) return false;
    }
    return true;
  };
  return { test, error: null, empty: false };
}
