/**
 * Views with one card per (tag, run): histograms, distributions, images, audio, text, tensors.
 * The pairs come from `series?kind=`; selection and the tag filter pick which show; a card
 * renders its body only once it comes near the viewport.
 */
import { isAbort } from "../api";
import { clear, h } from "../dom";
import { compileFilter } from "../lib/filter";
import { emptyState, errorState, groupTags, section, Visibility } from "../cards";
import type { LiveChange, Store } from "../store";
import type { View, ViewContext } from "./view";

export interface CardBody {
  /** Fetch and draw (again); the signal aborts when the card goes away. */
  load(signal: AbortSignal): Promise<void>;
  destroy?(): void;
}

export interface RunTagSpec {
  kind: string;
  title: string;
  emptyDetail: string;
  cardClass: string;
  body(ctx: ViewContext, run: string, tag: string, el: HTMLElement): CardBody;
  /** Extra toolbar controls (e.g. histogram mode). */
  toolbar?(ctx: ViewContext, view: RunTagView): HTMLElement[];
}

class RunTagCard {
  readonly el: HTMLElement;
  private bodyEl: HTMLElement;
  private body: CardBody | null = null;
  private abort: AbortController | null = null;
  private visible = false;
  private stale = true;

  constructor(
    private readonly ctx: ViewContext,
    private readonly spec: RunTagSpec,
    readonly run: string,
    readonly tag: string,
  ) {
    const sw = h("span", { class: "swatch" });
    sw.style.background = ctx.store.colorOf(run);
    this.bodyEl = h("div", { class: "card-body" });
    this.el = h(
      "div",
      { class: `card ${spec.cardClass}`, "data-tag": tag, "data-run": run },
      h("div", { class: "card-head" }, h("div", { class: "card-title", title: tag, text: tag })),
      h("div", { class: "card-run", title: run }, sw, h("span", { text: run })),
      this.bodyEl,
    );
    this.el.dataset.state = "idle";
  }

  setVisible(v: boolean): void {
    this.visible = v;
    if (v && this.stale) void this.load();
  }

  markStale(): void {
    this.stale = true;
    if (this.visible) void this.load();
  }

  async load(): Promise<void> {
    this.stale = false;
    this.abort?.abort();
    const ac = (this.abort = new AbortController());
    if (!this.body) this.body = this.spec.body(this.ctx, this.run, this.tag, this.bodyEl);
    this.el.dataset.state = "loading";
    try {
      await this.body.load(ac.signal);
      if (!ac.signal.aborted) this.el.dataset.state = "ready";
    } catch (e) {
      if (isAbort(e)) return;
      this.stale = true;
      this.el.dataset.state = "error";
      clear(this.bodyEl);
      this.body.destroy?.();
      this.body = null;
      this.bodyEl.appendChild(errorState((e as Error).message, () => void this.load()));
    }
  }

  destroy(): void {
    this.abort?.abort();
    this.body?.destroy?.();
  }
}

export class RunTagView implements View {
  readonly el: HTMLElement;
  private content: HTMLElement;
  private pairs: { run: string; tag: string }[] = [];
  private cards = new Map<string, RunTagCard>();
  private vis = new Visibility(undefined, "400px 0px");
  private unsub: (() => void)[] = [];
  private tagInput: HTMLInputElement;

  constructor(
    readonly ctx: ViewContext,
    private readonly spec: RunTagSpec,
  ) {
    const store = ctx.store;
    this.tagInput = h("input", { type: "search", class: "input tag-filter", id: "tag-filter", placeholder: "Filter tags (text, glob or /regex/)", "aria-label": "Filter tags", value: store.state.tagFilter });
    this.tagInput.addEventListener("input", () => store.update({ tagFilter: this.tagInput.value }, { replace: true }));
    this.content = h("div", { class: "view-content" });
    this.el = h("div", { class: `view ${spec.kind}-view` }, h("div", { class: "toolbar" }, this.tagInput, ...(spec.toolbar?.(ctx, this) ?? [])), this.content);
    this.unsub.push(store.on("selection", () => this.render()));
    this.unsub.push(store.on("theme", () => this.refreshAll()));
    this.unsub.push(store.on("state", (prev) => {
      if ((prev as { tagFilter: string }).tagFilter !== store.state.tagFilter) this.render();
    }));
    void this.loadPairs();
  }

  private async loadPairs(): Promise<void> {
    if (this.pairs.length === 0) this.content.replaceChildren(h("div", { class: "loading-state", text: "Loading…" }));
    try {
      const res = await this.ctx.api.series(this.spec.kind);
      const c = res.columns;
      this.pairs = c.run.map((run, i) => ({ run, tag: c.tag[i]! }));
      this.render();
    } catch (e) {
      this.content.replaceChildren(errorState(`Could not list ${this.spec.title.toLowerCase()}: ${(e as Error).message}`, () => void this.loadPairs()));
    }
  }

  /** Re-render every card body (a toolbar setting changed). */
  refreshAll(): void {
    for (const c of this.cards.values()) c.markStale();
  }

  private render(): void {
    const store: Store = this.ctx.store;
    const f = compileFilter(store.state.tagFilter);
    const pairs = this.pairs.filter((p) => f.test(p.tag) && store.isSelected(p.run));
    const keep = new Set(pairs.map((p) => `${p.tag}\u0000${p.run}`));
    for (const [k, c] of this.cards) {
      if (!keep.has(k)) {
        this.vis.unwatch(c.el);
        c.destroy();
        this.cards.delete(k);
      }
    }
    clear(this.content);
    if (this.pairs.length === 0) {
      this.content.appendChild(emptyState(`No ${this.spec.title.toLowerCase()} yet`, this.spec.emptyDetail));
      return;
    }
    if (pairs.length === 0) {
      this.content.appendChild(emptyState("Nothing matches", "No selected run has a tag that passes the filter."));
      return;
    }
    const byTag = new Map<string, string[]>();
    const runOrder = new Map(store.runs.map((r, i) => [r.name, i]));
    for (const p of pairs) {
      let l = byTag.get(p.tag);
      if (!l) byTag.set(p.tag, (l = []));
      l.push(p.run);
    }
    for (const [group, tags] of groupTags([...byTag.keys()].sort())) {
      const count = tags.reduce((n, t) => n + byTag.get(t)!.length, 0);
      const sec = section(store, group, count);
      for (const tag of tags) {
        const runs = byTag.get(tag)!.sort((a, b) => (runOrder.get(a) ?? 0) - (runOrder.get(b) ?? 0));
        for (const run of runs) {
          const k = `${tag}\u0000${run}`;
          let c = this.cards.get(k);
          if (!c) {
            c = new RunTagCard(this.ctx, this.spec, run, tag);
            this.cards.set(k, c);
            const card = c;
            this.vis.watch(c.el, (v) => card.setVisible(v));
          }
          sec.body.appendChild(c.el);
        }
      }
      this.content.appendChild(sec.el);
    }
  }

  live(change: LiveChange): void {
    if (change.kinds.length > 0 && !change.kinds.includes(this.spec.kind)) return;
    void this.loadPairs();
    const changed = new Set(change.runs);
    for (const c of this.cards.values()) if (changed.size === 0 || changed.has(c.run)) c.markStale();
  }

  destroy(): void {
    this.unsub.forEach((u) => u());
    this.vis.disconnect();
    this.cards.forEach((c) => c.destroy());
  }
}

/** A step slider with the step shown beside it. */
export function stepSlider(steps: ArrayLike<number>, initial: number, onChange: (i: number) => void): { el: HTMLElement; set(i: number): void } {
  const input = h("input", { type: "range", class: "range step-range", min: 0, max: Math.max(0, steps.length - 1), step: 1, value: initial, "aria-label": "Step" });
  const label = h("span", { class: "step-label" });
  const show = (i: number) => {
    label.textContent = `step ${steps[i] ?? ""}`;
  };
  show(initial);
  input.addEventListener("input", () => {
    const i = Number(input.value);
    show(i);
    onChange(i);
  });
  const el = h("div", { class: "step-slider" }, input, label);
  if (steps.length <= 1) el.classList.add("single");
  return {
    el,
    set(i: number) {
      input.value = String(i);
      show(i);
    },
  };
}
