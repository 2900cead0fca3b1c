/**
 * Scalars: one card per tag, grouped by prefix, every selected run in each chart. Cards fetch
 * and draw only when near the viewport. The server downsamples each series to about one point
 * per pixel column keeping extremes (M4); zooming fetches the window again at full resolution,
 * so a spike logged once stays visible at every zoom level.
 */
import { isAbort, type Api, type ScalarSeries, type ScalarsQuery } from "../api";
import { emaSmoothInto, perPointWeight } from "../lib/smoothing";
import { mergeWindow, type SeriesColumns } from "../lib/merge";
import { compileFilter } from "../lib/filter";
import type { UrlState, XAxis } from "../lib/urlstate";
import { LineChart, type LineSeries } from "../chart/linechart";
import { SlotQueue } from "../lib/queue";
import { button, clear, downloadBlob, fileSafe, h } from "../dom";
import { emptyState, errorState, groupTags, section, Visibility } from "../cards";
import type { LiveChange, Store } from "../store";
import type { View, ViewContext } from "./view";

/** Past this many runs in the logdir a card asks for the selected runs only. */
const FETCH_ALL_RUNS_UP_TO = 500;

interface RunData {
  cols: SeriesColumns;
  total: number;
  color: string;
  /** The smoothing weight the server applied to `cols.smoothed`, if any. */
  serverSmoothing: number | null;
}

function toColumns(s: ScalarSeries): SeriesColumns {
  return { step: s.columns.step, wallTime: s.columns.wall_time, value: s.columns.value, smoothed: s.columns.smoothed ?? null };
}

function xOf(cols: SeriesColumns, axis: XAxis): Float64Array {
  if (axis === "step") return cols.step;
  if (axis === "wall_time") return cols.wallTime;
  const out = new Float64Array(cols.wallTime.length);
  const w0 = cols.wallTime[0] ?? 0;
  for (let i = 0; i < out.length; i++) out[i] = cols.wallTime[i]! - w0;
  return out;
}

class ScalarCard {
  readonly el: HTMLElement;
  private body: HTMLElement;
  private foot: HTMLElement;
  private chart: LineChart | null = null;
  private overview: Map<string, RunData> | null = null;
  private display: Map<string, RunData> | null = null;
  private fetchedAll = false;
  private abort: AbortController | null = null;
  private xWindow: [number, number] | null = null;
  private visible = false;
  private stale = true;
  private drawnOnce = false;
  private xCache = new WeakMap<SeriesColumns, { axis: XAxis; x: Float64Array }>();
  private smoothCache = new WeakMap<SeriesColumns, { w: number; ys: Float64Array }>();

  constructor(
    readonly tag: string,
    private readonly view: ScalarsView,
  ) {
    const title = h("div", { class: "card-title", title: tag, text: tag });
    const tools = h(
      "div",
      { class: "card-tools" },
      button("", { icon: "reset", title: "Reset zoom (double-click the chart)", onClick: () => this.chart?.resetZoom() }),
      button("", { icon: "download", title: "Download the data as CSV (every point)", onClick: () => void this.downloadCsv() }),
      button("", { icon: "image", title: "Download the chart as PNG", onClick: () => void this.downloadPng() }),
      button("", { icon: "expand", title: "Enlarge (Esc to restore)", onClick: () => view.toggleEnlarged(this.tag) }),
    );
    this.body = h("div", { class: "card-body" });
    this.foot = h("div", { class: "card-foot" });
    this.el = h("div", { class: "card scalar-card", "data-tag": tag }, h("div", { class: "card-head" }, title, tools), this.body, this.foot);
    this.el.dataset.state = "idle";
  }

  /** Fetch order: on-screen cards top to bottom, then those below, then those above. */
  priority(): number {
    const r = this.el.getBoundingClientRect();
    return r.bottom < 0 ? 1e7 - r.bottom : r.top;
  }

  onScreen(): boolean {
    const r = this.el.getBoundingClientRect();
    return r.bottom > 0 && r.top < window.innerHeight;
  }

  setVisible(v: boolean): void {
    this.visible = v;
    if (v) this.ensure();
  }

  markStale(): void {
    this.stale = true;
    if (this.visible) this.ensure();
  }

  private ensure(): void {
    if (this.stale) void this.load();
    else if (!this.drawnOnce && this.display) this.view.requestDraw(this);
  }

  private runsToFetch(store: Store): string[] | null {
    if (store.runs.length <= FETCH_ALL_RUNS_UP_TO) return null;
    return store.selectedRuns().map((r) => r.name);
  }

  private points(): number {
    if (this.view.store.state.points > 0) return this.view.store.state.points;
    const w = this.chart ? this.chart.plotWidth() : Math.max(200, this.body.clientWidth - 60);
    return Math.max(200, Math.min(4000, Math.round(w * 2)));
  }

  private query(extra: Partial<ScalarsQuery> = {}): ScalarsQuery {
    const st = this.view.store.state;
    return { tag: this.tag, runs: this.runsToFetch(this.view.store), points: this.points(), x: st.xAxis, smoothing: st.smoothing, ...extra };
  }

  /**
   * Fetch the overview (and the zoom window's detail). Without `smooth` the server sends raw
   * points only, which is what the first paint needs (smoothing every logged point costs the
   * server more than the downsampling); the smoothed line is previewed here and then refined
   * with the server's smoothing of the full series, after every card on screen has drawn.
   */
  async load(smooth = false): Promise<void> {
    this.stale = false;
    this.abort?.abort();
    const ac = (this.abort = new AbortController());
    let release: (() => void) | null = null;
    await this.view.store.runsLoaded;
    if (ac.signal.aborted) return;
    if (this.view.store.selectedRuns().length === 0) {
      // Nothing to draw: no request (a selection change fetches).
      this.overview = this.display = new Map();
      this.fetchedAll = false;
      this.el.dataset.state = "ready";
      this.view.requestDraw(this);
      return;
    }
    try {
      await this.view.scrollIdle(ac.signal);
      // Loading from here: a card that a fling passes by waits without the animated bar.
      if (!smooth) this.el.dataset.state = "loading";
      release = await this.view.queue.acquire(() => this.priority() + (smooth ? 1e8 : 0), ac.signal);
      const w = this.view.store.state.smoothing;
      const q = this.query({ smoothing: smooth ? this.serverWeight(w) : 0 });
      const t0 = performance.now();
      const res = await this.view.api.scalars(q, ac.signal);
      performance.measure("tbscope:scalars-fetch", { start: t0, end: performance.now() });
      const map = new Map<string, RunData>();
      for (const s of res.series) {
        const cols = toColumns(s);
        map.set(s.run, { cols, total: s.total_points, color: s.color, serverSmoothing: cols.smoothed ? w : null });
      }
      this.overview = map;
      this.fetchedAll = q.runs === null;
      this.display = map;
      if (this.xWindow) await this.loadDetail(this.xWindow, ac, smooth);
      if (ac.signal.aborted) return;
      this.el.dataset.state = "ready";
      this.view.requestDraw(this);
      release();
      release = null;
      if (!smooth && this.wantsServerSmoothing(w)) void this.load(true);
    } catch (e) {
      if (isAbort(e)) return;
      this.el.dataset.state = "error";
      this.stale = true;
      clear(this.foot);
      this.foot.appendChild(errorState((e as Error).message, () => void this.load()));
    } finally {
      release?.();
    }
  }

  /** The smoothing weight changed and the slider rests: the server's smoothing, if needed. */
  refineSmoothing(): void {
    if (!this.wantsServerSmoothing(this.view.store.state.smoothing)) return;
    if (this.visible) void this.load(true);
    else this.stale = true;
  }

  /** The longest series on the card, in logged points: the slider's weight is TensorBoard's
   * for a 1,000-point view of it, applied per logged point (see perPointWeight). */
  private longest(): number {
    const o = this.overview;
    if (!o) return 0;
    // Asked once per series on every draw: computed once per overview.
    if (this.longestOf?.map === o) return this.longestOf.n;
    let n = 0;
    for (const d of o.values()) n = Math.max(n, d.total);
    this.longestOf = { map: o, n };
    return n;
  }

  private longestOf: { map: Map<string, RunData>; n: number } | null = null;

  private serverWeight(w: number): number {
    return perPointWeight(w, this.longest());
  }

  /** Only a downsampled series needs the server's pass over every point (the API takes any
   * per-point weight below 1, so long runs are smoothed exactly too). */
  private wantsServerSmoothing(w: number): boolean {
    return w > 0 && this.isDownsampled() && this.serverWeight(w) < 1;
  }

  private async loadDetail(win: [number, number], ac: AbortController, smooth = true): Promise<void> {
    if (!this.overview) return;
    const downsampled = [...this.overview.values()].some((d) => d.cols.step.length < d.total);
    if (!downsampled) return;
    const q = this.query({ xMin: win[0], xMax: win[1], ...(smooth ? {} : { smoothing: 0 }) });
    const res = await this.view.api.scalars(q, ac.signal);
    const merged = new Map(this.overview);
    for (const s of res.series) {
      const base = this.overview.get(s.run);
      if (!base) continue;
      const detail = toColumns(s);
      // Merge along the axis the window is in: steps, or wall time for both time axes
      // (relative time is wall time minus the series' first point, which the server keeps).
      const key = q.x === "step" ? "step" : "wallTime";
      const shift = q.x === "relative" ? (base.cols.wallTime[0] ?? 0) : 0;
      const cols = mergeWindow(base.cols, detail, win[0] + shift, win[1] + shift, key);
      merged.set(s.run, { ...base, cols, serverSmoothing: detail.smoothed && base.cols.smoothed ? base.serverSmoothing : null });
    }
    this.display = merged;
  }

  /** Selection changed: redraw from what we have, or refetch when we fetched a subset. */
  selectionChanged(): void {
    if (!this.fetchedAll) this.markStale();
    else this.redraw();
  }

  settingsChanged(prev: UrlState, now: UrlState): void {
    if (!this.chart) return;
    if (prev.xAxis !== now.xAxis) {
      // The server buckets along the axis: a new axis is a new overview.
      this.xWindow = null;
      this.chart.setOptions({ xAxis: now.xAxis });
      if (this.visible) this.view.requestDraw(this);
      this.markStale();
      return;
    }
    if (prev.xAxis !== now.xAxis || prev.logY !== now.logY || prev.ignoreOutliers !== now.ignoreOutliers) {
      this.chart.setOptions({ xAxis: now.xAxis, logY: now.logY, ignoreOutliers: now.ignoreOutliers });
    }
    this.redraw();
  }

  /** Draw in the next frames if near the screen (on-screen cards first), else when visible. */
  redraw(): void {
    if (this.visible) this.view.requestDraw(this);
    else this.drawnOnce = false;
  }

  themeChanged(): void {
    if (this.chart && this.display) this.chart.rebuild();
  }

  /** True when some series on this card is downsampled (server smoothing then matters). */
  isDownsampled(): boolean {
    if (!this.display) return false;
    for (const d of this.display.values()) if (d.cols.step.length < d.total) return true;
    return false;
  }

  /** Draws the chart from the data at hand; false when there is none yet. */
  draw(): boolean {
    if (!this.display) return false;
    const store = this.view.store;
    const st = store.state;
    if (!this.chart) {
      this.chart = new LineChart(this.body, {
        xAxis: st.xAxis,
        logY: st.logY,
        ignoreOutliers: st.ignoreOutliers,
        onZoom: (win) => void this.onZoom(win),
        onDraw: () => this.view.onCardDrawn(this),
      });
    }
    const series: LineSeries[] = [];
    let shown = 0;
    let total = 0;
    for (const run of store.runs) {
      const d = this.display.get(run.name);
      if (!d || !store.isSelected(run.name)) continue;
      shown += d.cols.step.length;
      total += d.total;
      series.push({
        key: run.name,
        color: store.colorOf(run.name),
        x: this.x(d.cols, st.xAxis),
        step: d.cols.step,
        wallTime: d.cols.wallTime,
        value: d.cols.value,
        smoothed: this.smoothed(d, st.smoothing),
      });
    }
    this.chart.setData(series);
    this.drawnOnce = true;
    this.foot.textContent =
      series.length === 0
        ? ""
        : `${series.length} run${series.length === 1 ? "" : "s"} · ${shown < total ? `${shown.toLocaleString()} of ${total.toLocaleString()} points (extremes kept)` : `${total.toLocaleString()} points`}${this.xWindow ? " · zoomed" : ""}`;
    return true;
  }

  private x(cols: SeriesColumns, axis: XAxis): Float64Array {
    if (axis === "step") return cols.step;
    const c = this.xCache.get(cols);
    if (c && c.axis === axis) return c.x;
    const x = xOf(cols, axis);
    this.xCache.set(cols, { axis, x });
    return x;
  }

  private smoothed(d: RunData, w: number): Float64Array | null {
    if (w <= 0) return null;
    if (d.serverSmoothing === w && d.cols.smoothed) return d.cols.smoothed;
    const c = this.smoothCache.get(d.cols);
    if (c && c.w === w) return c.ys;
    // The server smooths every logged point with the per-point weight. Until its answer
    // arrives (or where it is not needed), smooth what is on screen with the weight that spans
    // as many logged points: each shown point of a downsampled series stands for total/shown.
    const shown = d.cols.value.length;
    const wp = this.serverWeight(w);
    // The series' buffer from the last weight is reused: no garbage per slider step.
    const ys = emaSmoothInto(d.cols.value, shown < d.total && shown > 0 ? Math.pow(wp, d.total / shown) : wp, c?.ys ?? new Float64Array(shown));
    this.smoothCache.set(d.cols, { w, ys });
    return ys;
  }

  private async onZoom(win: [number, number] | null): Promise<void> {
    if (!win || !this.overview) {
      this.xWindow = null;
      this.display = this.overview;
      this.draw();
      return;
    }
    this.xWindow = win;
    this.abort?.abort();
    const ac = (this.abort = new AbortController());
    this.el.dataset.state = "loading";
    let release: (() => void) | null = null;
    try {
      release = await this.view.queue.acquire(() => -1, ac.signal); // the user is looking at it
      const smooth = [...(this.overview?.values() ?? [])].some((d) => d.serverSmoothing !== null);
      await this.loadDetail(win, ac, smooth);
      if (ac.signal.aborted) return;
      this.el.dataset.state = "ready";
      this.draw();
    } catch (e) {
      if (!isAbort(e)) this.el.dataset.state = "error";
    } finally {
      release?.();
    }
  }

  private selectedNames(): string[] {
    const names: string[] = [];
    for (const r of this.view.store.selectedRuns()) if (!this.display || this.display.has(r.name)) names.push(r.name);
    return names;
  }

  /** Every point (not the downsampled ones) of the selected runs, from the server. */
  private async downloadCsv(): Promise<void> {
    const names = this.selectedNames();
    const all = this.display !== null && names.length === this.display.size;
    const api = this.view.api;
    let blob: Blob;
    if (all) {
      blob = await api.blob("download", { kind: "scalars", tag: this.tag, format: "csv" });
    } else {
      // The download endpoint takes one run (or all): fetch each and keep one header.
      const parts: string[] = [];
      for (let i = 0; i < names.length; i += 4) {
        const texts = await Promise.all(names.slice(i, i + 4).map((run) => api.blob("download", { kind: "scalars", tag: this.tag, run, format: "csv" }).then((b) => b.text())));
        for (const t of texts) parts.push(parts.length === 0 ? t : t.slice(t.indexOf("\n") + 1));
      }
      blob = new Blob(parts, { type: "text/csv" });
    }
    downloadBlob(blob, `${fileSafe(this.tag)}.csv`);
  }

  private async downloadPng(): Promise<void> {
    if (!this.chart) return;
    downloadBlob(await this.chart.toPNG(this.tag), `${fileSafe(this.tag)}.png`);
  }

  /** The chart's series as drawn (tests and the benchmark read it). */
  drawnRuns(): number {
    return this.display ? [...this.display.keys()].filter((r) => this.view.store.isSelected(r)).length : 0;
  }

  destroy(): void {
    this.abort?.abort();
    this.chart?.destroy();
    this.chart = null;
    this.display = this.overview = null;
  }
}

export class ScalarsView implements View {
  readonly el: HTMLElement;
  readonly api: Api;
  readonly store: Store;
  private content: HTMLElement;
  private cards = new Map<string, ScalarCard>();
  private vis: Visibility;
  private unsub: (() => void)[] = [];
  private tags: string[] = [];
  private smoothTimer = 0;
  private tagInput: HTMLInputElement;
  private smoothRange: HTMLInputElement;
  private smoothNum: HTMLInputElement;
  private firstDraw = false;
  // One request at a time until the first chart is up (the server answers it sooner alone),
  // then two.
  readonly queue = new SlotQueue(1);
  private dirty = new Set<ScalarCard>();
  private drawRaf = 0;
  private lastScroll = -1e9;
  private onScroll = (): void => {
    this.lastScroll = performance.now();
  };

  constructor(ctx: ViewContext) {
    this.api = ctx.api;
    this.store = ctx.store;
    const st = this.store.state;
    this.tagInput = h("input", { type: "search", class: "input tag-filter", placeholder: "Filter tags (text, glob or /regex/)", "aria-label": "Filter tags", value: st.tagFilter, id: "tag-filter" });
    this.tagInput.addEventListener("input", () => {
      this.store.update({ tagFilter: this.tagInput.value }, { replace: true });
    });
    this.smoothRange = h("input", { type: "range", min: 0, max: 0.99, step: 0.01, value: st.smoothing, "aria-label": "Smoothing", id: "smoothing", class: "range" });
    this.smoothNum = h("input", { type: "number", min: 0, max: 0.999, step: 0.001, value: st.smoothing, "aria-label": "Smoothing value", class: "input num-input" });
    this.smoothRange.addEventListener("input", () => this.setSmoothing(Number(this.smoothRange.value)));
    this.smoothNum.addEventListener("change", () => this.setSmoothing(Number(this.smoothNum.value)));
    const xSel = h(
      "div",
      { class: "segmented", role: "radiogroup", "aria-label": "Horizontal axis" },
      (["step", "relative", "wall_time"] as const).map((x) => {
        const b = h("button", { type: "button", role: "radio", "data-x": x, "aria-checked": String(st.xAxis === x), text: x === "step" ? "Step" : x === "relative" ? "Relative" : "Wall" });
        b.addEventListener("click", () => this.store.update({ xAxis: x }));
        return b;
      }),
    );
    const logBox = checkbox("Log y", st.logY, (v) => this.store.update({ logY: v }), "log-y");
    const outlierBox = checkbox("Ignore outliers", st.ignoreOutliers, (v) => this.store.update({ ignoreOutliers: v }), "ignore-outliers");
    const toolbar = h(
      "div",
      { class: "toolbar" },
      this.tagInput,
      h("label", { class: "tool", for: "smoothing" }, h("span", { class: "tool-label", text: "Smoothing" }), this.smoothRange, this.smoothNum),
      xSel,
      logBox,
      outlierBox,
    );
    this.content = h("div", { class: "view-content" });
    this.el = h("div", { class: "view scalars-view" }, toolbar, this.content);
    this.vis = new Visibility();
    document.getElementById("main")?.addEventListener("scroll", this.onScroll, { passive: true });
    this.unsub.push(this.store.on("state", (prev) => this.onState(prev as UrlState)));
    this.unsub.push(this.store.on("selection", () => this.cards.forEach((c) => c.selectionChanged())));
    this.unsub.push(this.store.on("runs", () => this.cards.forEach((c) => c.selectionChanged())));
    this.unsub.push(this.store.on("theme", () => this.rebuildCharts()));
    void this.loadTags();
  }

  private setSmoothing(v: number): void {
    if (!Number.isFinite(v)) return;
    v = Math.min(0.999, Math.max(0, v));
    this.store.update({ smoothing: v }, { replace: true });
  }

  private onState(prev: UrlState): void {
    const st = this.store.state;
    if (prev.tagFilter !== st.tagFilter) {
      if (this.tagInput.value !== st.tagFilter) this.tagInput.value = st.tagFilter;
      this.render();
    }
    if (prev.card !== st.card) this.applyEnlarged();
    if (prev.smoothing !== st.smoothing) {
      if (Number(this.smoothRange.value) !== st.smoothing) this.smoothRange.value = String(st.smoothing);
      this.smoothNum.value = String(st.smoothing);
      // Preview at once from the points on screen; where a series is downsampled, fetch the
      // server's smoothing of the full series once the slider rests.
      window.clearTimeout(this.smoothTimer);
      this.smoothTimer = window.setTimeout(() => {
        for (const c of this.cards.values()) c.refineSmoothing();
      }, 600);
    }
    for (const b of this.el.querySelectorAll<HTMLElement>(".segmented [data-x]")) b.setAttribute("aria-checked", String(b.dataset.x === st.xAxis));
    (this.el.querySelector("#log-y") as HTMLInputElement).checked = st.logY;
    (this.el.querySelector("#ignore-outliers") as HTMLInputElement).checked = st.ignoreOutliers;
    for (const c of this.cards.values()) c.settingsChanged(prev, st);
  }

  private async loadTags(): Promise<void> {
    if (this.tags.length === 0) {
      clear(this.content);
      this.content.appendChild(h("div", { class: "loading-state", text: "Loading tags…" }));
    }
    try {
      const res = await this.api.tags("scalars");
      performance.mark("tbscope:tags");
      this.tags = res.columns.tag;
      this.render();
    } catch (e) {
      clear(this.content);
      this.content.appendChild(errorState(`Could not load the scalar tags: ${(e as Error).message}`, () => void this.loadTags()));
    }
  }

  private render(): void {
    const f = compileFilter(this.store.state.tagFilter);
    const tags = this.tags.filter((t) => f.test(t));
    this.tagInput.classList.toggle("invalid", f.error !== null);
    this.tagInput.title = f.error ?? "";
    // Keep cards (and their data and zoom) that survive the filter.
    const keep = new Set(tags);
    for (const [t, c] of this.cards) {
      if (!keep.has(t)) {
        this.vis.unwatch(c.el);
        c.destroy();
        this.cards.delete(t);
      }
    }
    clear(this.content);
    if (this.tags.length === 0) {
      this.content.appendChild(emptyState("No scalars yet", "Runs that log scalars (add_scalar, tf.summary.scalar) show up here as they are written."));
      return;
    }
    if (tags.length === 0) {
      this.content.appendChild(emptyState("No tag matches the filter", `${this.tags.length} scalar tags; none matches “${this.store.state.tagFilter}”.`));
      return;
    }
    for (const [group, list] of groupTags(tags)) {
      const sec = section(this.store, group, list.length);
      for (const t of list) {
        let c = this.cards.get(t);
        if (!c) {
          c = new ScalarCard(t, this);
          this.cards.set(t, c);
          const card = c;
          this.vis.watch(c.el, (v) => card.setVisible(v));
        }
        sec.body.appendChild(c.el);
      }
      this.content.appendChild(sec.el);
    }
    this.applyEnlarged();
    this.startOnScreen();
  }

  /** The cards on screen start loading now rather than when the IntersectionObserver first
   * reports them, a rendered frame later: the first chart's request follows the tags' answer. */
  private startOnScreen(): void {
    const main = document.getElementById("main");
    if (!main) return;
    const limit = main.getBoundingClientRect().bottom + 300; // the observer's margin
    for (const el of this.content.querySelectorAll<HTMLElement>(".scalar-card")) {
      const r = el.getBoundingClientRect();
      if (r.top > limit) break;
      if (r.height === 0 || r.bottom < 0) continue; // in a collapsed section, or above
      this.cards.get(el.dataset.tag ?? "")?.setVisible(true);
    }
  }

  /** Resolves once the page has not scrolled for a moment: cards passing by during a fling
   * neither fetch nor draw (the server's work and the parsing would take the frames' time). A
   * whole animation frame must also pass without a scroll: on a busy machine frames come further
   * apart than the pause, and a scroll that goes on every frame would look paused between two. */
  scrollIdle(signal: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      const check = () => {
        if (signal.aborted) return reject(new DOMException("aborted", "AbortError"));
        const seen = this.lastScroll;
        const since = performance.now() - seen;
        // Long still (or never scrolled, as at the first load): no frame to wait for.
        if (since > 1000) return resolve();
        const wait = 120 - since;
        if (wait > 0) {
          setTimeout(check, wait + 5);
          return;
        }
        requestAnimationFrame(() =>
          setTimeout(() => {
            if (signal.aborted) reject(new DOMException("aborted", "AbortError"));
            else if (this.lastScroll === seen) resolve();
            else check();
          }, 0),
        );
      };
      check();
    });
  }

  /**
   * Chart draws wait for the next animation frame, which draws as many as fit in a frame's
   * budget, on-screen cards first (top to bottom), and leaves the rest to the frames after: a
   * slider move or a scroll never holds a frame for every chart near the screen.
   */
  requestDraw(card: ScalarCard): void {
    this.dirty.add(card);
    if (!this.drawRaf) this.drawRaf = requestAnimationFrame(() => this.drawFrame());
  }

  private drawFrame(): void {
    this.drawRaf = 0;
    const t0 = performance.now();
    // While the page is scrolling, charts wait (their cards keep their size and a placeholder)
    // and draw when it pauses: a fling through fifty charts stays at the display's frame rate.
    const sinceScroll = t0 - this.lastScroll;
    if (sinceScroll < 120) {
      this.drawRaf = window.setTimeout(() => {
        this.drawRaf = requestAnimationFrame(() => this.drawFrame());
      }, 120 - sinceScroll) as unknown as number;
      return;
    }
    const cards = [...this.dirty].sort((a, b) => a.priority() - b.priority());
    for (const c of cards) {
      if (performance.now() - t0 > 8 && c !== cards[0]) break;
      this.dirty.delete(c);
      const t = performance.now();
      if (c.draw()) performance.measure("tbscope:chart-draw", { start: t, end: performance.now() });
    }
    if (this.dirty.size > 0) this.drawRaf = requestAnimationFrame(() => this.drawFrame());
  }

  toggleEnlarged(tag: string): void {
    this.store.update({ card: this.store.state.card === tag ? null : tag });
  }

  private applyEnlarged(): void {
    const card = this.store.state.card;
    for (const [t, c] of this.cards) c.el.classList.toggle("enlarged", t === card);
    if (card) this.cards.get(card)?.el.scrollIntoView({ block: "nearest" });
  }

  private rebuildCharts(): void {
    for (const c of this.cards.values()) c.themeChanged();
  }

  onCardDrawn(_card: ScalarCard): void {
    if (!this.firstDraw) {
      this.firstDraw = true;
      performance.mark("tbscope:first-chart");
      this.queue.setConcurrency(2);
      window.dispatchEvent(new Event("tbscope:first-chart"));
      // The frame after the draw has been painted (the benchmark reads this one).
      requestAnimationFrame(() => setTimeout(() => performance.mark("tbscope:first-chart-painted"), 0));
    }
    document.documentElement.dataset.chartsDrawn = String(Number(document.documentElement.dataset.chartsDrawn ?? 0) + 1);
  }

  live(change: LiveChange): void {
    if (change.kinds.length > 0 && !change.kinds.includes("scalars")) return;
    void this.loadTags();
    for (const c of this.cards.values()) c.markStale();
  }

  destroy(): void {
    window.clearTimeout(this.smoothTimer);
    cancelAnimationFrame(this.drawRaf);
    window.clearTimeout(this.drawRaf);
    document.getElementById("main")?.removeEventListener("scroll", this.onScroll);
    this.unsub.forEach((u) => u());
    this.vis.disconnect();
    this.cards.forEach((c) => c.destroy());
    this.cards.clear();
  }
}

export function checkbox(label: string, checked: boolean, onChange: (v: boolean) => void, id: string): HTMLElement {
  const input = h("input", { type: "checkbox", id, checked });
  input.addEventListener("change", () => onChange(input.checked));
  return h("label", { class: "check", for: id }, input, h("span", { text: label }));
}

export function createScalarsView(ctx: ViewContext): View {
  return new ScalarsView(ctx);
}
