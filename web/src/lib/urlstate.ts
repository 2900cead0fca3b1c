/**
 * The dashboard's state lives in the URL fragment, so a link reproduces the view: which tab,
 * which runs, filters, smoothing, axes and the enlarged card. Only values that differ from the
 * defaults are written, so links stay short. The fragment never reaches the server.
 */
export type XAxis = "step" | "relative" | "wall_time";

export interface UrlState {
  view: string;
  runFilter: string;
  tagFilter: string;
  /** Runs explicitly deselected (when `only` is null). */
  hidden: string[];
  /** When set, exactly these runs are selected (e.g. from the hparams table). */
  only: string[] | null;
  smoothing: number;
  xAxis: XAxis;
  logY: boolean;
  ignoreOutliers: boolean;
  card: string | null;
  collapsed: string[];
  tree: boolean;
  /** Points per series asked of the server; 0 = about two per pixel column of the chart. */
  points: number;
  /** The embeddings view's own state (embedding, projection, colour, search), as a query string. */
  emb: string;
}

export const DEFAULT_STATE: Readonly<UrlState> = Object.freeze({
  view: "scalars",
  runFilter: "",
  tagFilter: "",
  hidden: [],
  only: null,
  smoothing: 0.6,
  xAxis: "step",
  logY: false,
  ignoreOutliers: true,
  card: null,
  collapsed: [],
  tree: true,
  points: 0,
  emb: "",
});

const X_AXES: readonly XAxis[] = ["step", "relative", "wall_time"];

export function parseHash(hash: string): UrlState {
  const s: UrlState = { ...DEFAULT_STATE, hidden: [], collapsed: [] };
  let h = hash.startsWith("#") ? hash.slice(1) : hash;
  if (h.startsWith("/")) h = h.slice(1);
  const q = h.indexOf("?");
  const view = q < 0 ? h : h.slice(0, q);
  if (/^[a-z_]+$/.test(view)) s.view = view;
  const p = new URLSearchParams(q < 0 ? "" : h.slice(q + 1));
  s.runFilter = p.get("runs") ?? "";
  s.tagFilter = p.get("tags") ?? "";
  s.hidden = p.getAll("hide");
  const only = p.getAll("only");
  s.only = p.has("only") ? only.filter((r) => r !== "") : null;
  const sm = p.get("smoothing");
  if (sm !== null) {
    const v = Number(sm);
    if (Number.isFinite(v)) s.smoothing = Math.min(0.999, Math.max(0, v));
  }
  const x = p.get("x");
  if (x !== null && (X_AXES as readonly string[]).includes(x)) s.xAxis = x as XAxis;
  s.logY = p.get("log") === "1";
  s.ignoreOutliers = p.get("outliers") !== "1";
  s.card = p.get("card");
  s.collapsed = p.getAll("collapsed");
  s.tree = p.get("flat") !== "1";
  const pts = Number(p.get("points"));
  if (Number.isInteger(pts) && pts > 0) s.points = Math.min(100000, pts);
  s.emb = p.get("emb") ?? "";
  return s;
}

export function formatHash(s: UrlState): string {
  const p = new URLSearchParams();
  if (s.runFilter) p.set("runs", s.runFilter);
  if (s.tagFilter) p.set("tags", s.tagFilter);
  if (s.only !== null) {
    if (s.only.length === 0) p.append("only", "");
    for (const r of s.only) p.append("only", r);
  } else {
    for (const r of s.hidden) p.append("hide", r);
  }
  if (s.smoothing !== DEFAULT_STATE.smoothing) p.set("smoothing", String(s.smoothing));
  if (s.xAxis !== DEFAULT_STATE.xAxis) p.set("x", s.xAxis);
  if (s.logY) p.set("log", "1");
  if (!s.ignoreOutliers) p.set("outliers", "1");
  if (s.card) p.set("card", s.card);
  for (const c of s.collapsed) p.append("collapsed", c);
  if (!s.tree) p.set("flat", "1");
  if (s.points) p.set("points", String(s.points));
  if (s.emb) p.set("emb", s.emb);
  const qs = p.toString();
  return "#" + s.view + (qs ? "?" + qs : "");
}
