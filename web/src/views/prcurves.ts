/**
 * PR curves: one chart per tag with every selected run's precision/recall curve at a chosen
 * step (each run shows its latest step at or before the slider's), plus the thresholds and
 * counts at the cursor.
 */
import uPlot from "uplot";
import { h, clear } from "../dom";
import { toFloat64, nearestIndex, type JsonNumber } from "../lib/columns";
import { fmtNum } from "../chart/format";
import { themeColors } from "../theme";
import { compileFilter } from "../lib/filter";
import { emptyState, errorState, groupTags, section, Visibility } from "../cards";
import { isAbort } from "../api";
import type { LiveChange } from "../store";
import type { View, ViewContext, ViewFactory } from "./view";

interface PrColumns {
  step: number[];
  wall_time: number[];
  thresholds: JsonNumber[][];
  precision: JsonNumber[][];
  recall: JsonNumber[][];
  tp: JsonNumber[][];
  fp: JsonNumber[][];
  tn: JsonNumber[][];
  fn: JsonNumber[][];
}

class PrCard {
  readonly el: HTMLElement;
  private body: HTMLElement;
  private data = new Map<string, PrColumns>();
  private u: uPlot | null = null;
  private abort: AbortController | null = null;
  private stepIdx = -1;
  private allSteps: number[] = [];
  private tip = h("div", { class: "chart-tooltip" });
  private ro: ResizeObserver | null = null;
  stale = true;

  constructor(
    private readonly ctx: ViewContext,
    readonly tag: string,
    public runs: string[],
  ) {
    this.body = h("div", { class: "card-body" });
    this.el = h("div", { class: "card pr-card", "data-tag": tag }, h("div", { class: "card-head" }, h("div", { class: "card-title", text: tag, title: tag })), this.body);
  }

  async load(): Promise<void> {
    this.stale = false;
    this.abort?.abort();
    const ac = (this.abort = new AbortController());
    this.el.dataset.state = "loading";
    try {
      const results = await Promise.all(this.runs.map((run) => this.ctx.api.get<{ columns: PrColumns }>("pr_curves", { tag: this.tag, run }, ac.signal).then((r) => [run, r.columns] as const)));
      this.data = new Map(results);
      this.allSteps = [...new Set(results.flatMap(([, c]) => c.step))].sort((a, b) => a - b);
      this.el.dataset.state = "ready";
      this.render();
    } catch (e) {
      if (isAbort(e)) return;
      this.stale = true;
      this.el.dataset.state = "error";
      this.body.replaceChildren(errorState((e as Error).message, () => void this.load()));
    }
  }

  private render(): void {
    const steps = this.allSteps;
    if (steps.length === 0) {
      this.body.replaceChildren(h("div", { class: "chart-empty show", text: "No PR curves" }));
      return;
    }
    if (this.stepIdx < 0 || this.stepIdx >= steps.length) this.stepIdx = steps.length - 1;
    const chartBox = h("div", { class: "pr-chart" });
    const slider = h("input", { type: "range", class: "range step-range", min: 0, max: steps.length - 1, value: this.stepIdx, step: 1, "aria-label": "Step" });
    const label = h("span", { class: "step-label", text: `step ${steps[this.stepIdx]}` });
    slider.addEventListener("input", () => {
      this.stepIdx = Number(slider.value);
      label.textContent = `step ${steps[this.stepIdx]}`;
      this.draw(chartBox);
    });
    this.body.replaceChildren(chartBox, h("div", { class: "media-controls" }, h("div", { class: `step-slider${steps.length <= 1 ? " single" : ""}` }, slider, label)), this.tip);
    this.draw(chartBox);
    if (!this.ro) {
      this.ro = new ResizeObserver(() => {
        const r = chartBox.getBoundingClientRect();
        if (this.u && r.width > 50) this.u.setSize({ width: r.width, height: r.height });
      });
      this.ro.observe(this.body);
    }
  }

  private curves(): { run: string; rec: Float64Array; prec: Float64Array; cols: PrColumns; i: number }[] {
    const step = this.allSteps[this.stepIdx]!;
    const out = [];
    for (const [run, c] of this.data) {
      let i = -1;
      for (let k = 0; k < c.step.length; k++) if (c.step[k]! <= step) i = k;
      if (i < 0) continue;
      // Recall falls as the threshold rises; uPlot's paths want x ascending.
      const rec = toFloat64(c.recall[i]).reverse();
      const prec = toFloat64(c.precision[i]).reverse();
      out.push({ run, rec, prec, cols: c, i });
    }
    return out;
  }

  private draw(box: HTMLElement): void {
    this.u?.destroy();
    const t = themeColors();
    const curves = this.curves();
    const rect = box.getBoundingClientRect();
    const axis = (label: string): uPlot.Axis => ({ label, labelSize: 16, labelFont: `11px ${t.font}`, stroke: t.axis, grid: { stroke: t.grid, width: 1 }, ticks: { stroke: t.grid, width: 1, size: 4 }, font: `11px ${t.font}`, values: (_u, v) => v.map((x) => fmtNum(x, 2)) });
    this.u = new uPlot(
      {
        mode: 2,
        width: Math.max(200, rect.width),
        height: Math.max(150, rect.height),
        legend: { show: false },
        cursor: { drag: { x: false, y: false }, points: { show: false }, dataIdx: () => null } as uPlot.Cursor,
        scales: { x: { time: false, auto: false, range: () => [0, 1] }, y: { auto: false, range: () => [0, 1.02] } },
        axes: [axis("Recall"), { ...axis("Precision"), size: 44 }],
        series: [{}, ...curves.map((c) => ({ label: c.run, stroke: this.ctx.store.colorOf(c.run), width: 1.5, points: { show: false }, facets: [{ scale: "x", auto: false }, { scale: "y", auto: false }] }) as uPlot.Series)],
        hooks: { setCursor: [(u) => this.cursor(u, curves)] },
      },
      [null, ...curves.map((c) => [c.rec, c.prec])] as unknown as uPlot.AlignedData,
      box,
    );
  }

  private cursor(u: uPlot, curves: ReturnType<PrCard["curves"]>): void {
    const left = u.cursor.left ?? -1;
    if (left < 0 || curves.length === 0) {
      this.tip.classList.remove("show");
      return;
    }
    const r = u.posToVal(left, "x");
    const rows = curves.map((c) => {
      const j = nearestIndex(c.rec, r);
      const k = c.rec.length - 1 - j; // back to the server's threshold order
      const col = (m: JsonNumber[][]) => fmtNum(toFloat64(m[c.i])[k] ?? NaN, 4);
      const sw = h("span", { class: "swatch" });
      sw.style.background = this.ctx.store.colorOf(c.run);
      return h("tr", null, h("td", null, sw), h("td", { class: "run", text: c.run }), h("td", { class: "num", text: col(c.cols.thresholds) }), h("td", { class: "num", text: fmtNum(c.prec[j]!, 4) }), h("td", { class: "num", text: fmtNum(c.rec[j]!, 4) }), h("td", { class: "num", text: `${col(c.cols.tp)}/${col(c.cols.fp)}/${col(c.cols.tn)}/${col(c.cols.fn)}` }));
    });
    this.tip.replaceChildren(h("table", null, h("tr", null, ["", "Run", "Threshold", "Precision", "Recall", "TP/FP/TN/FN"].map((x) => h("th", { text: x }))), rows));
    this.tip.classList.add("show");
    this.tip.style.left = `${Math.min(left + 60, Math.max(0, u.over.clientWidth - this.tip.offsetWidth))}px`;
    this.tip.style.top = `${(u.cursor.top ?? 0) + 20}px`;
  }

  destroy(): void {
    this.abort?.abort();
    this.ro?.disconnect();
    this.u?.destroy();
  }
}

class PrView implements View {
  readonly el: HTMLElement;
  private content = h("div", { class: "view-content" });
  private pairs: { run: string; tag: string }[] = [];
  private cards = new Map<string, PrCard>();
  private vis = new Visibility();
  private unsub: (() => void)[] = [];

  constructor(private readonly ctx: ViewContext) {
    this.el = h("div", { class: "view pr-view" }, this.content);
    this.unsub.push(ctx.store.on("selection", () => this.render()));
    this.unsub.push(
      ctx.store.on("theme", () => {
        for (const c of this.cards.values()) c.stale = true;
        this.render();
      }),
    );
    void this.loadPairs();
  }

  private async loadPairs(): Promise<void> {
    try {
      const res = await this.ctx.api.series("pr_curves");
      this.pairs = res.columns.run.map((run, i) => ({ run, tag: res.columns.tag[i]! }));
      this.render();
    } catch (e) {
      this.content.replaceChildren(errorState(`Could not list PR curves: ${(e as Error).message}`, () => void this.loadPairs()));
    }
  }

  private render(): void {
    const store = this.ctx.store;
    const f = compileFilter(store.state.tagFilter);
    const byTag = new Map<string, string[]>();
    for (const p of this.pairs) {
      if (!store.isSelected(p.run) || !f.test(p.tag)) continue;
      let l = byTag.get(p.tag);
      if (!l) byTag.set(p.tag, (l = []));
      l.push(p.run);
    }
    clear(this.content);
    if (this.pairs.length === 0) {
      this.content.appendChild(emptyState("No PR curves yet", "Curves logged with add_pr_curve or the pr_curve summary appear here."));
      return;
    }
    for (const [tag, c] of this.cards) {
      const runs = byTag.get(tag);
      if (!runs) {
        this.vis.unwatch(c.el);
        c.destroy();
        this.cards.delete(tag);
      } else if (runs.join("\n") !== c.runs.join("\n")) {
        c.runs = runs;
        c.stale = true;
      }
    }
    for (const [group, tags] of groupTags([...byTag.keys()].sort())) {
      const sec = section(store, group, tags.length);
      for (const tag of tags) {
        let c = this.cards.get(tag);
        if (!c) {
          c = new PrCard(this.ctx, tag, byTag.get(tag)!);
          this.cards.set(tag, c);
          const card = c;
          this.vis.watch(c.el, (v) => v && card.stale && void card.load());
        } else if (c.stale) void c.load();
        sec.body.appendChild(c.el);
      }
      this.content.appendChild(sec.el);
    }
  }

  live(change: LiveChange): void {
    if (change.kinds.length > 0 && !change.kinds.includes("pr_curves")) return;
    for (const c of this.cards.values()) c.stale = true;
    void this.loadPairs();
  }

  destroy(): void {
    this.unsub.forEach((u) => u());
    this.vis.disconnect();
    this.cards.forEach((c) => c.destroy());
  }
}

const view: ViewFactory = (ctx) => new PrView(ctx);
export default view;
