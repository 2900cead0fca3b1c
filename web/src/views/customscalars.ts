/**
 * Custom scalars: the layout a run declares (add_custom_scalars, the custom_scalar plugin):
 * categories of charts, each a multiline chart of every tag matching its regexes, or a margin
 * chart (a value with lower and upper bounds). The server merges the runs' layouts.
 */
import { h, clear } from "../dom";
import { emaSmooth } from "../lib/smoothing";
import { LineChart, type LineSeries } from "../chart/linechart";
import { emptyState, errorState, section, Visibility } from "../cards";
import { isAbort, type ScalarsResponse } from "../api";
import type { LiveChange } from "../store";
import type { View, ViewContext, ViewFactory } from "./view";

interface ChartSpec {
  title: string;
  multiline?: { tag: string[] };
  margin?: { series: { value: string; lower: string; upper: string }[] };
}
interface Category {
  title: string;
  closed?: boolean;
  chart?: ChartSpec[];
  charts?: ChartSpec[];
}
interface Layout {
  category?: Category[];
  categories?: Category[];
}

const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];

function safeRegex(src: string): RegExp | null {
  try {
    // Python's re and JavaScript agree on the patterns layouts use; (?P<name>...) does not.
    return new RegExp(src.replace(/\(\?P</g, "(?<"));
  } catch {
    return null;
  }
}

class CustomChart {
  readonly el: HTMLElement;
  private body = h("div", { class: "card-body" });
  private foot = h("div", { class: "card-foot" });
  private chart: LineChart | null = null;
  private abort: AbortController | null = null;
  stale = true;

  constructor(
    private readonly ctx: ViewContext,
    private readonly spec: ChartSpec,
    private readonly allTags: string[],
  ) {
    this.el = h("div", { class: "card scalar-card" }, h("div", { class: "card-head" }, h("div", { class: "card-title", text: spec.title, title: spec.title })), this.body, this.foot);
  }

  private async fetchTag(tag: string, signal: AbortSignal): Promise<ScalarsResponse> {
    return this.ctx.api.scalars({ tag, runs: null, points: 1000 }, signal);
  }

  async load(): Promise<void> {
    this.stale = false;
    this.abort?.abort();
    const ac = (this.abort = new AbortController());
    this.el.dataset.state = "loading";
    const store = this.ctx.store;
    const w = store.state.smoothing;
    try {
      const series: LineSeries[] = [];
      const mk = (key: string, color: string, s: ScalarsResponse["series"][number], smooth: boolean): LineSeries => {
        const step = s.columns.step;
        const value = s.columns.value;
        return { key, color, x: step, step, wallTime: s.columns.wall_time, value, smoothed: smooth && w > 0 ? emaSmooth(value, w) : null };
      };
      if (this.spec.multiline) {
        const res = this.spec.multiline.tag.map(safeRegex);
        const tags = this.allTags.filter((t) => res.some((r) => r?.test(t)));
        const data = await Promise.all(tags.map((t) => this.fetchTag(t, ac.signal)));
        let k = 0;
        data.forEach((d, ti) => {
          for (const s of d.series) {
            if (!store.isSelected(s.run)) continue;
            const color = tags.length === 1 ? store.colorOf(s.run) : PALETTE[k++ % PALETTE.length]!;
            series.push(mk(`${s.run} · ${tags[ti]}`, color, s, true));
          }
        });
        this.foot.textContent = `${tags.length} tag${tags.length === 1 ? "" : "s"} match ${this.spec.multiline.tag.join(", ")}`;
      } else if (this.spec.margin) {
        for (const m of this.spec.margin.series) {
          const [v, lo, hi] = await Promise.all([m.value, m.lower, m.upper].map((t) => this.fetchTag(t, ac.signal)));
          for (const s of v!.series) {
            if (!store.isSelected(s.run)) continue;
            const color = store.colorOf(s.run);
            series.push(mk(`${s.run} · ${m.value}`, color, s, false));
            const l = lo!.series.find((x) => x.run === s.run);
            const u = hi!.series.find((x) => x.run === s.run);
            if (l) series.push(mk(`${s.run} · ${m.lower} (lower)`, color + "66", l, false));
            if (u) series.push(mk(`${s.run} · ${m.upper} (upper)`, color + "66", u, false));
          }
        }
      }
      if (ac.signal.aborted) return;
      if (!this.chart) this.chart = new LineChart(this.body, { xAxis: "step", logY: store.state.logY, ignoreOutliers: store.state.ignoreOutliers, onZoom: () => undefined });
      this.chart.setData(series);
      this.el.dataset.state = "ready";
    } catch (e) {
      if (isAbort(e)) return;
      this.stale = true;
      this.el.dataset.state = "error";
      this.foot.replaceChildren(errorState((e as Error).message, () => void this.load()));
    }
  }

  /** Colours are fixed when a chart is built: drop it so the next load builds it anew. */
  resetChart(): void {
    this.chart?.destroy();
    this.chart = null;
    this.stale = true;
  }

  destroy(): void {
    this.abort?.abort();
    this.chart?.destroy();
  }
}

class CustomScalarsView implements View {
  readonly el: HTMLElement;
  private content = h("div", { class: "view-content" });
  private charts: CustomChart[] = [];
  private vis = new Visibility();
  private unsub: (() => void)[] = [];

  constructor(private readonly ctx: ViewContext) {
    this.el = h("div", { class: "view custom-scalars-view" }, this.content);
    this.unsub.push(ctx.store.on("selection", () => this.restale()));
    this.unsub.push(ctx.store.on("state", () => this.restale()));
    this.unsub.push(
      ctx.store.on("theme", () => {
        this.charts.forEach((c) => c.resetChart());
        this.restale();
      }),
    );
    void this.load();
  }

  private restale(): void {
    for (const c of this.charts) c.stale = true;
    this.vis.disconnect();
    this.vis = new Visibility();
    for (const c of this.charts) this.vis.watch(c.el, (v) => v && c.stale && void c.load());
  }

  private async load(): Promise<void> {
    this.content.replaceChildren(h("div", { class: "loading-state", text: "Loading layouts…" }));
    try {
      const [res, tags] = await Promise.all([this.ctx.api.get<{ layouts: Record<string, Layout>; merged?: Layout }>("custom_scalars"), this.ctx.api.tags("scalars")]);
      this.render(res.merged ?? res.layouts.merged ?? Object.values(res.layouts)[0], tags.columns.tag);
    } catch (e) {
      this.content.replaceChildren(errorState(`Could not load custom scalar layouts: ${(e as Error).message}`, () => void this.load()));
    }
  }

  private render(layout: Layout | undefined, tags: string[]): void {
    this.charts.forEach((c) => c.destroy());
    this.charts = [];
    clear(this.content);
    const cats = layout ? (layout.category ?? layout.categories ?? []) : [];
    if (cats.length === 0) {
      this.content.appendChild(emptyState("No custom scalar layout", "A run declares one with add_custom_scalars (multiline and margin charts by tag regex)."));
      return;
    }
    for (const cat of cats) {
      const specs = cat.chart ?? cat.charts ?? [];
      const sec = section(this.ctx.store, `custom:${cat.title}`, specs.length);
      (sec.el.querySelector(".section-name") as HTMLElement).textContent = cat.title;
      for (const spec of specs) {
        const c = new CustomChart(this.ctx, spec, tags);
        this.charts.push(c);
        sec.body.appendChild(c.el);
        this.vis.watch(c.el, (v) => v && c.stale && void c.load());
      }
      this.content.appendChild(sec.el);
    }
  }

  live(change: LiveChange): void {
    if (change.kinds.length > 0 && !change.kinds.includes("scalars") && !change.kinds.includes("custom_scalars")) return;
    if (change.kinds.includes("custom_scalars")) void this.load();
    else this.restale();
  }

  destroy(): void {
    this.unsub.forEach((u) => u());
    this.vis.disconnect();
    this.charts.forEach((c) => c.destroy());
  }
}

const view: ViewFactory = (ctx) => new CustomScalarsView(ctx);
export default view;
