/**
 * Embeddings: the projector's embeddings as a 2-D or 3-D scatter. The server projects (PCA, or
 * t-SNE/UMAP when installed there) and sends columns; this view colours the points by a
 * metadata column, searches one, rotates (3-D) or pans (2-D) on drag, zooms on the wheel, and
 * shows a point's metadata and thumbnail on hover or click.
 */
import { h } from "../dom";
import { emptyState, errorState } from "../cards";
import { fmtNum } from "../chart/format";
import { rampColor } from "../runs";
import { HOME, backToFront, colorBy, nearest, search, toScreen, type Camera, type Cell, type Coloring } from "../lib/projection";
import type { LiveChange } from "../store";
import type { View, ViewContext, ViewFactory } from "./view";

interface ListResponse {
  columns: {
    run: string[];
    tag: string[];
    points: (number | null)[];
    dimensions: (number | null)[];
    metadata_columns: string[][];
    sprite: boolean[];
    error: (string | null)[];
  };
}

interface MetaColumn {
  name: string;
  type: "number" | "string";
  column: string;
}

interface ProjectionResponse {
  run: string;
  tag: string;
  method: string;
  dims: number;
  total_points: number;
  dimensions: number;
  explained_variance: number[] | null;
  metadata: MetaColumn[];
  sprite: { width: number; height: number } | null;
  columns: Record<string, (number | string | null)[]>;
}

const toNum = (v: number | string | null | undefined): number => (typeof v === "number" ? v : v === "NaN" || v == null ? NaN : v === "Infinity" ? Infinity : v === "-Infinity" ? -Infinity : Number(v));

class EmbeddingsView implements View {
  readonly el: HTMLElement;
  private select = h("select", { class: "input select", id: "emb-select", "aria-label": "Embedding" });
  private method = h("select", { class: "input select", id: "emb-method", "aria-label": "Projection method" }, ["pca", "tsne", "umap"].map((m) => h("option", { value: m, text: m === "pca" ? "PCA" : m === "tsne" ? "t-SNE" : "UMAP" })));
  private dimsGroup = h("div", { class: "segmented", role: "radiogroup", "aria-label": "Dimensions" });
  private colorSel = h("select", { class: "input select", id: "emb-color", "aria-label": "Colour by" });
  private searchBy = h("select", { class: "input select", id: "emb-search-by", "aria-label": "Search in column" });
  private searchBox = h("input", { class: "input", id: "emb-search", type: "search", placeholder: "Search points (text, glob, /regex/)", "aria-label": "Search points" });
  private info = h("div", { class: "emb-info", id: "emb-info", role: "status" });
  private canvas = h("canvas", { class: "emb-canvas", id: "emb-canvas", tabindex: 0, "aria-label": "Embedding scatter plot" });
  private tip = h("div", { class: "emb-tip", role: "tooltip" });
  private legend = h("div", { class: "emb-legend", id: "emb-legend" });
  private matchesEl = h("ol", { class: "emb-matches", id: "emb-matches" });
  private details = h("div", { class: "emb-details", id: "emb-details" });
  private body = h("div", { class: "emb-body" });
  private layout: HTMLElement[] = [];

  private list: ListResponse["columns"] | null = null;
  private data: ProjectionResponse | null = null;
  private coloring: Coloring = { colors: [], kind: "none", legend: [] };
  private matches: Set<number> | null = null;
  private selected = -1;
  private hover = -1;
  private cam: Camera = { ...HOME };
  private dims = 2;
  private screen: { sx: Float32Array; sy: Float32Array; depth: Float32Array } | null = null;
  private sprite: ImageBitmap | null = null;
  private abort: AbortController | null = null;
  private resize = new ResizeObserver(() => this.draw());
  private drawQueued = false;
  /** What the URL asked for, applied once the listing and the projection are in. */
  private wanted: URLSearchParams | null;
  private unsubscribe: () => void;

  constructor(private readonly ctx: ViewContext) {
    this.wanted = new URLSearchParams(ctx.store.state.emb);
    if (this.wanted.get("dims") === "3") this.dims = 3;
    const m = this.wanted.get("method");
    if (m && ["pca", "tsne", "umap"].includes(m)) this.method.value = m;
    for (const d of [2, 3]) {
      const b = h("button", { type: "button", role: "radio", "data-dims": d, "aria-checked": String(d === this.dims), text: `${d}-D` });
      b.addEventListener("click", () => {
        this.dims = d;
        this.cam = { ...HOME };
        for (const x of this.dimsGroup.querySelectorAll("button")) x.setAttribute("aria-checked", String(x === b));
        void this.project();
      });
      this.dimsGroup.appendChild(b);
    }
    const tool = (label: string, ...els: HTMLElement[]) => h("label", { class: "tool" }, h("span", { class: "tool-label", text: label }), ...els);
    const toolbar = h("div", { class: "toolbar" }, tool("Embedding", this.select), tool("Projection", this.method), this.dimsGroup, tool("Colour by", this.colorSel), tool("Search", this.searchBy, this.searchBox));
    const plot = h("div", { class: "emb-plot" }, this.canvas, this.tip, this.legend);
    const side = h("aside", { class: "emb-side" }, this.details, h("div", { class: "emb-side-title", text: "Matches" }), this.matchesEl);
    this.layout = [h("div", { class: "emb-main" }, this.info, plot), side];
    this.body.replaceChildren(...this.layout);
    this.el = h("div", { class: "view embeddings-view" }, toolbar, this.body);
    this.select.addEventListener("change", () => {
      this.cam = { ...HOME };
      this.selected = -1;
      void this.project();
    });
    this.method.addEventListener("change", () => void this.project());
    this.colorSel.addEventListener("change", () => {
      this.recolor();
      this.save();
    });
    this.searchBy.addEventListener("change", () => {
      this.research();
      this.save();
    });
    this.searchBox.addEventListener("input", () => {
      this.research();
      this.save();
    });
    // Like every view, only the runs selected in the runs panel.
    this.unsubscribe = ctx.store.on("selection", () => void this.load());
    this.wireCanvas();
    this.resize.observe(this.canvas);
    void this.load();
  }

  // ------------------------------------------------------------------------------ data

  private async load(): Promise<void> {
    try {
      const res = await this.ctx.api.get<ListResponse>("embeddings");
      const before = this.select.value;
      this.list = res.columns;
      const c = res.columns;
      if (c.run.length === 0) {
        this.body.replaceChildren(emptyState("No embeddings", "Embeddings written with add_embedding (projector_config.pbtxt in a run's folder) appear here."));
        return;
      }
      const store = this.ctx.store;
      const shown = c.run.map((_, i) => i).filter((i) => !store.runsByName.has(c.run[i]!) || store.isSelected(c.run[i]!));
      if (shown.length === 0) {
        this.select.replaceChildren();
        this.data = null;
        this.body.replaceChildren(emptyState("No embeddings in the selected runs", `${c.run.length} embedding${c.run.length === 1 ? "" : "s"} in runs that the runs panel leaves out.`));
        return;
      }
      if (this.body.firstChild !== this.layout[0]) this.body.replaceChildren(...this.layout);
      this.select.replaceChildren(
        ...shown.map((i) => {
          const run = c.run[i]!;
          const bad = c.error[i] !== null;
          const label = `${run} · ${c.tag[i] || "(config)"}${bad ? " (unreadable)" : ` · ${c.points[i]}×${c.dimensions[i]}`}`;
          return h("option", { value: String(i), text: label, disabled: bad && c.points[i] === null, title: c.error[i] ?? "" });
        }),
      );
      const w = this.wanted;
      const asked = w?.has("run") ? [...this.select.options].find((o) => c.run[Number(o.value)] === w.get("run") && c.tag[Number(o.value)] === w.get("tag") && !o.disabled) : undefined;
      const keep = [...this.select.options].find((o) => o.value === before && !o.disabled);
      const first = [...this.select.options].find((o) => !o.disabled);
      this.select.value = (asked ?? keep ?? first)?.value ?? "";
      if (!keep || !this.data) await this.project();
    } catch (e) {
      this.body.replaceChildren(errorState(`Could not list the embeddings: ${(e as Error).message}`, () => void this.load()));
    }
  }

  private async project(): Promise<void> {
    const i = Number(this.select.value);
    const c = this.list;
    if (!c || this.select.value === "" || c.run[i] === undefined) return;
    this.abort?.abort();
    const abort = (this.abort = new AbortController());
    this.info.textContent = "Projecting…";
    this.canvas.dataset.state = "loading";
    try {
      const res = await this.ctx.api.get<ProjectionResponse>("embeddings/projection", { run: c.run[i]!, tag: c.tag[i]!, dims: this.dims, method: this.method.value }, abort.signal);
      if (abort.signal.aborted) return;
      this.data = res;
      this.sprite = null;
      if (res.sprite) void this.loadSprite(res.run, res.tag, abort.signal);
      this.fillColumns(res.metadata);
      this.recolor(false);
      this.research(false);
      this.describe();
      this.canvas.dataset.state = "ready";
      this.save();
      this.draw();
    } catch (e) {
      if ((e as Error).name === "AbortError") return;
      this.data = null;
      this.canvas.dataset.state = "error";
      this.info.replaceChildren(h("span", { class: "emb-error", role: "alert", text: `Could not project: ${(e as Error).message}` }));
      this.draw();
    }
  }

  private async loadSprite(run: string, tag: string, signal: AbortSignal): Promise<void> {
    try {
      const blob = await this.ctx.api.blob("embeddings/sprite", { run, tag }, signal);
      this.sprite = await createImageBitmap(blob);
      if (this.selected >= 0) this.showDetails(this.selected);
    } catch {
      this.sprite = null; // thumbnails are a nicety: the points stand without them
    }
  }

  private fillColumns(meta: MetaColumn[]): void {
    const keepColor = this.colorSel.value;
    const keepSearch = this.searchBy.value;
    this.colorSel.replaceChildren(h("option", { value: "", text: "(none)" }), ...meta.map((m) => h("option", { value: m.column, text: m.name })));
    this.searchBy.replaceChildren(...meta.map((m) => h("option", { value: m.column, text: m.name })));
    const has = (v: string) => meta.some((m) => m.column === v);
    // Colour by the first categorical column with few values by default: what a label is for.
    const guess = meta.find((m) => m.type === "string" && new Set(this.data?.columns[m.column] ?? []).size <= 20) ?? meta[0];
    this.colorSel.value = has(keepColor) ? keepColor : (guess?.column ?? "");
    this.searchBy.value = has(keepSearch) ? keepSearch : (meta[0]?.column ?? "");
    const w = this.wanted;
    if (w) {
      const color = w.get("color");
      if (color !== null && (color === "" || has(color))) this.colorSel.value = color;
      const by = w.get("by");
      if (by !== null && has(by)) this.searchBy.value = by;
      this.searchBox.value = w.get("q") ?? "";
      this.wanted = null;
    }
    this.searchBy.disabled = this.searchBox.disabled = meta.length === 0;
  }

  private column(key: string): Cell[] | null {
    const col = this.data?.columns[key];
    if (!col) return null;
    const m = this.data!.metadata.find((x) => x.column === key);
    return m?.type === "number" ? col.map((v) => (v === null ? null : toNum(v))) : (col as Cell[]);
  }

  private recolor(redraw = true): void {
    const key = this.colorSel.value;
    const m = this.data?.metadata.find((x) => x.column === key);
    this.coloring = colorBy(key ? this.column(key) : null, m?.type ?? "string", rampColor);
    this.renderLegend();
    if (redraw) this.draw();
  }

  private research(redraw = true): void {
    const col = this.column(this.searchBy.value);
    const { matches, error } = col ? search(col, this.searchBox.value) : { matches: null, error: null };
    this.searchBox.classList.toggle("invalid", error !== null);
    this.searchBox.title = error ?? "";
    this.matches = matches === null ? null : new Set(matches);
    this.canvas.dataset.matches = matches === null ? "" : String(matches.length);
    const shown = (matches ?? []).slice(0, 200);
    this.matchesEl.replaceChildren(
      ...shown.map((i) => {
        const li = h("li", { "data-index": i }, h("button", { type: "button", class: "emb-match", text: String(col?.[i] ?? "") }));
        li.addEventListener("click", () => this.choose(i));
        return li;
      }),
    );
    if (matches && matches.length > shown.length) this.matchesEl.appendChild(h("li", { class: "emb-more", text: `and ${matches.length - shown.length} more` }));
    if (matches && matches.length === 0) this.matchesEl.appendChild(h("li", { class: "emb-more", text: "No point matches" }));
    if (matches?.length === 1) this.choose(matches[0]!, false);
    this.describe();
    if (redraw) this.draw();
  }

  /** The view's settings into the URL (replacing the history entry), so a link reproduces it. */
  private save(): void {
    const d = this.data;
    if (!d) return;
    const p = new URLSearchParams({ run: d.run, tag: d.tag });
    if (this.dims !== 2) p.set("dims", String(this.dims));
    if (this.method.value !== "pca") p.set("method", this.method.value);
    p.set("color", this.colorSel.value);
    if (this.searchBox.value) {
      p.set("by", this.searchBy.value);
      p.set("q", this.searchBox.value);
    }
    this.ctx.store.update({ emb: p.toString() }, { replace: true });
  }

  private describe(): void {
    const d = this.data;
    if (!d) return;
    const n = d.columns.x?.length ?? 0;
    const parts = [`${n.toLocaleString()} points${n < d.total_points ? ` of ${d.total_points.toLocaleString()} (a fixed sample)` : ""}`, `${d.dimensions} dimensions`];
    if (d.explained_variance) parts.push(`variance explained ${d.explained_variance.map((v) => `${fmtNum(v * 100, 3)}%`).join(" · ")}`);
    if (this.matches) parts.push(`${this.matches.size} match${this.matches.size === 1 ? "" : "es"}`);
    this.info.textContent = parts.join(" · ");
    this.canvas.dataset.points = String(n);
    this.canvas.dataset.dims = String(d.dims);
  }

  private renderLegend(): void {
    const c = this.coloring;
    if (c.kind === "category") {
      this.legend.replaceChildren(...c.legend.map((e) => h("div", { class: "emb-legend-row", title: `${e.count} points` }, h("span", { class: "swatch" }), h("span", { class: "emb-legend-label", text: e.label }))));
      c.legend.forEach((e, i) => ((this.legend.children[i] as HTMLElement).querySelector<HTMLElement>(".swatch")!.style.background = e.color));
    } else if (c.kind === "gradient" && c.min !== undefined && c.max !== undefined) {
      const bar = h("span", { class: "emb-ramp" });
      bar.style.background = `linear-gradient(to right, ${[0, 0.25, 0.5, 0.75, 1].map(rampColor).join(", ")})`;
      this.legend.replaceChildren(h("div", { class: "emb-legend-row" }, h("span", { text: fmtNum(c.min, 4) }), bar, h("span", { text: fmtNum(c.max, 4) })));
    } else this.legend.replaceChildren();
    this.legend.hidden = this.legend.childElementCount === 0;
  }

  // ------------------------------------------------------------------------------ drawing

  private draw(): void {
    if (this.drawQueued) return;
    this.drawQueued = true;
    requestAnimationFrame(() => {
      this.drawQueued = false;
      this.paint();
    });
  }

  private paint(): void {
    const cv = this.canvas;
    const dpr = window.devicePixelRatio || 1;
    const w = cv.clientWidth;
    const hgt = cv.clientHeight;
    if (w === 0 || hgt === 0) return;
    if (cv.width !== Math.round(w * dpr) || cv.height !== Math.round(hgt * dpr)) {
      cv.width = Math.round(w * dpr);
      cv.height = Math.round(hgt * dpr);
    }
    const g = cv.getContext("2d")!;
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, w, hgt);
    const d = this.data;
    if (!d || !d.columns.x) {
      this.screen = null;
      return;
    }
    const xs = d.columns.x.map(toNum);
    const ys = d.columns.y!.map(toNum);
    const zs = d.dims === 3 && d.columns.z ? d.columns.z.map(toNum) : null;
    const s = (this.screen = toScreen(xs, ys, zs, this.cam, w, hgt));
    const n = xs.length;
    const dark = document.documentElement.dataset.theme === "dark";
    if (zs) this.axes(g, w, hgt, dark);
    const order = zs ? backToFront(s.depth) : null;
    const base = n > 20000 ? 1.5 : n > 3000 ? 2.2 : 3;
    const fallback = dark ? "#6c9cf2" : "#2f6fde";
    for (let k = 0; k < n; k++) {
      const i = order ? order[k]! : k;
      if (!Number.isFinite(s.sx[i]!) || !Number.isFinite(s.sy[i]!)) continue;
      const dim = this.matches !== null && !this.matches.has(i);
      g.globalAlpha = dim ? 0.12 : zs ? 0.45 + 0.55 * s.depth[i]! : 0.85;
      g.fillStyle = this.coloring.colors[i] ?? fallback;
      const r = base * (zs ? 0.7 + 0.6 * s.depth[i]! : 1);
      g.beginPath();
      g.arc(s.sx[i]!, s.sy[i]!, r, 0, 2 * Math.PI);
      g.fill();
    }
    g.globalAlpha = 1;
    for (const i of [this.hover, this.selected]) {
      if (i < 0 || i >= n) continue;
      g.strokeStyle = dark ? "#ffffff" : "#111111";
      g.lineWidth = 2;
      g.beginPath();
      g.arc(s.sx[i]!, s.sy[i]!, base + 4, 0, 2 * Math.PI);
      g.stroke();
    }
    cv.dataset.yaw = this.cam.yaw.toFixed(3);
    cv.dataset.zoom = this.cam.zoom.toFixed(3);
    if (this.selected >= 0 && this.selected < n) {
      cv.dataset.selectedX = s.sx[this.selected]!.toFixed(1);
      cv.dataset.selectedY = s.sy[this.selected]!.toFixed(1);
    }
  }

  /** The three axes from the centre, so a rotation reads as one. */
  private axes(g: CanvasRenderingContext2D, w: number, hgt: number, dark: boolean): void {
    const len = Math.min(w, hgt) * 0.08;
    const { yaw, pitch } = this.cam;
    const axes: [string, number, number, number][] = [
      ["x", 1, 0, 0],
      ["y", 0, 1, 0],
      ["z", 0, 0, 1],
    ];
    const ox = 28 + len;
    const oy = hgt - 28 - len;
    g.font = "11px system-ui, sans-serif";
    for (const [name, x, y, z] of axes) {
      const x1 = Math.cos(yaw) * x + Math.sin(yaw) * z;
      const z1 = -Math.sin(yaw) * x + Math.cos(yaw) * z;
      const y1 = Math.cos(pitch) * y - Math.sin(pitch) * z1;
      g.strokeStyle = g.fillStyle = dark ? "#9199a7" : "#626d7d";
      g.beginPath();
      g.moveTo(ox, oy);
      g.lineTo(ox + x1 * len, oy - y1 * len);
      g.stroke();
      g.fillText(name, ox + x1 * (len + 8) - 3, oy - y1 * (len + 8) + 4);
    }
  }

  // ------------------------------------------------------------------------------ interaction

  private wireCanvas(): void {
    const cv = this.canvas;
    let drag: { x: number; y: number; cam: Camera; moved: boolean } | null = null;
    cv.addEventListener("pointerdown", (e) => {
      drag = { x: e.clientX, y: e.clientY, cam: { ...this.cam }, moved: false };
      cv.setPointerCapture(e.pointerId);
    });
    cv.addEventListener("pointermove", (e) => {
      if (drag) {
        const dx = e.clientX - drag.x;
        const dy = e.clientY - drag.y;
        if (Math.abs(dx) + Math.abs(dy) > 3) drag.moved = true;
        if (!drag.moved) return;
        if (this.dims === 3) {
          this.cam.yaw = drag.cam.yaw + dx * 0.01;
          this.cam.pitch = Math.max(-1.5, Math.min(1.5, drag.cam.pitch + dy * 0.01));
        } else {
          const unit = Math.min(cv.clientWidth, cv.clientHeight) / 2;
          this.cam.panX = drag.cam.panX + dx / unit / this.cam.zoom;
          this.cam.panY = drag.cam.panY + dy / unit / this.cam.zoom;
        }
        this.hideTip();
        this.draw();
        return;
      }
      this.hoverAt(e.offsetX, e.offsetY);
    });
    cv.addEventListener("pointerup", (e) => {
      const wasDrag = drag?.moved ?? false;
      drag = null;
      if (!wasDrag) {
        const i = this.pick(e.offsetX, e.offsetY);
        if (i >= 0) this.choose(i);
      }
    });
    cv.addEventListener("pointerleave", () => {
      if (!drag) {
        this.hover = -1;
        this.hideTip();
        this.draw();
      }
    });
    cv.addEventListener(
      "wheel",
      (e) => {
        e.preventDefault();
        this.cam.zoom = Math.max(0.2, Math.min(50, this.cam.zoom * Math.exp(-e.deltaY * 0.0015)));
        this.draw();
      },
      { passive: false },
    );
    cv.addEventListener("dblclick", () => {
      this.cam = { ...HOME };
      this.draw();
    });
  }

  private pick(x: number, y: number): number {
    const s = this.screen;
    if (!s) return -1;
    const m = this.matches;
    return nearest(s.sx, s.sy, s.depth, x, y, 8, m ? (i) => m.has(i) : undefined);
  }

  private hoverAt(x: number, y: number): void {
    const i = this.pick(x, y);
    if (i === this.hover) return;
    this.hover = i;
    if (i < 0) this.hideTip();
    else {
      this.tip.replaceChildren(...this.rows(i, 4));
      this.tip.style.left = `${Math.min(x + 14, this.canvas.clientWidth - 220)}px`;
      this.tip.style.top = `${y + 14}px`;
      this.tip.classList.add("show");
    }
    this.draw();
  }

  private hideTip(): void {
    this.tip.classList.remove("show");
  }

  private rows(i: number, max = Infinity): HTMLElement[] {
    const d = this.data!;
    const out = [h("div", { class: "emb-row" }, h("span", { class: "k", text: "point" }), h("span", { class: "v", text: String(d.columns.index?.[i] ?? i) }))];
    for (const m of d.metadata.slice(0, max)) {
      const v = d.columns[m.column]?.[i];
      out.push(h("div", { class: "emb-row" }, h("span", { class: "k", text: m.name }), h("span", { class: "v", text: v === null || v === undefined ? "" : typeof v === "number" ? fmtNum(v, 6) : String(v) })));
    }
    return out;
  }

  private choose(i: number, redraw = true): void {
    this.selected = i;
    this.showDetails(i);
    for (const li of this.matchesEl.querySelectorAll("li[data-index]")) li.classList.toggle("active", Number((li as HTMLElement).dataset.index) === i);
    if (redraw) this.draw();
  }

  private showDetails(i: number): void {
    const d = this.data;
    if (!d) return;
    const parts: HTMLElement[] = [h("div", { class: "emb-side-title", text: "Selected point" })];
    if (this.sprite && d.sprite) {
      const { width, height } = d.sprite;
      const perRow = Math.floor(this.sprite.width / width);
      const k = Number(d.columns.index?.[i] ?? i);
      if (perRow > 0) {
        const thumb = h("canvas", { class: "emb-thumb", width, height, "aria-label": "Thumbnail" });
        thumb.getContext("2d")!.drawImage(this.sprite, (k % perRow) * width, Math.floor(k / perRow) * height, width, height, 0, 0, width, height);
        parts.push(thumb);
      }
    }
    this.details.replaceChildren(...parts, ...this.rows(i));
  }

  live(_change: LiveChange): void {
    void this.load();
  }

  destroy(): void {
    this.unsubscribe();
    this.abort?.abort();
    this.resize.disconnect();
  }
}

const view: ViewFactory = (ctx: ViewContext) => new EmbeddingsView(ctx);
export default view;
