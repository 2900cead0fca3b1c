/**
 * HParams: a sortable, filterable table (one row per experiment, a column per hparam and
 * metric, no cap on either; rows are virtual so thousands stay fast) and a parallel-coordinates
 * plot. Row checkboxes are the runs panel's selection; "Show only these" selects exactly the
 * filtered rows, so the charts follow the table. Brushing an axis filters its column.
 */
import { h, clear, button } from "../dom";
import { toNumber, type JsonNumber } from "../lib/columns";
import { parseColumnFilter, sortRows, type Cell } from "../lib/table";
import { fmtNum } from "../chart/format";
import { currentTheme, themeColors } from "../theme";
import { rampColor } from "../runs";
import { emptyState, errorState } from "../cards";
import type { LiveChange } from "../store";
import type { View, ViewContext, ViewFactory } from "./view";

interface HparamsResponse {
  hparams: { name: string; type: string; values?: unknown[] }[];
  metrics: { tag: string; run_suffix?: string; column?: string }[];
  columns: Record<string, (JsonNumber | boolean | null)[]>;
}

interface Column {
  key: string;
  label: string;
  group: "hp" | "metric";
  numeric: boolean;
  values: Cell[];
}

const ROW = 26;

class HparamsView implements View {
  readonly el: HTMLElement;
  private content = h("div", { class: "view-content hparams-content" });
  private runs: string[] = [];
  private cols: Column[] = [];
  private filters = new Map<string, string>();
  private sortKey: string | null = null;
  private sortDir: 1 | -1 = 1;
  private order: number[] = [];
  private scroller: HTMLElement | null = null;
  private tbody: HTMLTableSectionElement | null = null;
  private countEl = h("span", { class: "run-count" });
  private pc: HTMLCanvasElement | null = null;
  private unsub: (() => void)[] = [];
  private raf = 0;
  private brush: { col: number; y0: number; y1: number } | null = null;
  private hoverRow = -1;

  constructor(private readonly ctx: ViewContext) {
    this.el = h("div", { class: "view hparams-view" }, this.content);
    this.unsub.push(ctx.store.on("selection", () => this.paintRows()));
    this.unsub.push(ctx.store.on("theme", () => this.drawParcoords()));
    void this.load();
  }

  private async load(): Promise<void> {
    if (this.runs.length === 0) this.content.replaceChildren(h("div", { class: "loading-state", text: "Loading hparams…" }));
    try {
      const res = await this.ctx.api.get<HparamsResponse>("hparams");
      this.runs = (res.columns.run ?? []) as string[];
      const cols: Column[] = [];
      for (const hp of res.hparams) {
        const raw = res.columns[`hp:${hp.name}`] ?? [];
        const numeric = hp.type === "float" || hp.type === "int";
        cols.push({ key: `hp:${hp.name}`, label: hp.name, group: "hp", numeric, values: raw.map((v) => (v === null || v === undefined ? null : numeric ? toNumber(v as JsonNumber) : (v as Cell))) });
      }
      for (const m of res.metrics) {
        const key = m.column ?? `metric:${m.tag}`;
        const raw = res.columns[key] ?? [];
        cols.push({ key, label: m.run_suffix ? `${m.tag} (${m.run_suffix})` : m.tag, group: "metric", numeric: true, values: raw.map((v) => (v === null || v === undefined ? null : toNumber(v as JsonNumber))) });
      }
      this.cols = cols;
      this.render();
    } catch (e) {
      this.content.replaceChildren(errorState(`Could not load hparams: ${(e as Error).message}`, () => void this.load()));
    }
  }

  private computeOrder(): void {
    let rows = this.runs.map((_, i) => i);
    for (const [key, text] of this.filters) {
      const c = key === "run" ? null : this.cols.find((x) => x.key === key);
      const f = parseColumnFilter(text, c ? c.numeric : false);
      if (!f) continue;
      const vals: Cell[] = c ? c.values : this.runs;
      rows = rows.filter((i) => f(vals[i] ?? null));
    }
    if (this.sortKey) {
      const c = this.sortKey === "run" ? this.runs : this.cols.find((x) => x.key === this.sortKey)?.values;
      if (c) rows = sortRows(rows, c, this.sortDir);
    }
    this.order = rows;
    this.countEl.textContent = `${rows.length} of ${this.runs.length} experiments`;
  }

  private render(): void {
    clear(this.content);
    if (this.runs.length === 0) {
      this.content.appendChild(emptyState("No hparams yet", "Experiments logged with add_hparams (torch, tensorboardX) or the hparams plugin appear here, one row each, joined with their final metrics."));
      return;
    }
    this.computeOrder();
    const only = button("Show only these", { cls: "btn small", title: "Select exactly the experiments that pass the filters; charts follow", onClick: () => this.ctx.store.selectOnly(this.order.map((i) => this.runs[i]!)) });
    only.id = "hparams-select-filtered";
    const clearBtn = button("Clear filters", { cls: "btn small", onClick: () => {
      this.filters.clear();
      this.brush = null;
      this.render();
    } });
    const head = h("div", { class: "hparams-head" }, h("span", { class: "panel-title", text: "Experiments" }), this.countEl, h("div", { class: "spacer" }), clearBtn, only);
    this.pc = h("canvas", { class: "parcoords", "aria-label": "Parallel coordinates" });
    const pcWrap = h("div", { class: "parcoords-wrap" }, this.pc);
    this.bindParcoords(this.pc);
    const table = h("table", { class: "data hparams-table" });
    const thead = h("thead");
    const all: { key: string; label: string; numeric: boolean; group: string }[] = [{ key: "run", label: "Run", numeric: false, group: "" }, ...this.cols];
    const trHead = h("tr", null, h("th", { class: "sel" }));
    const trFilter = h("tr", { class: "filters" }, h("th", { class: "sel" }));
    for (const c of all) {
      const th = h("th", { class: `sortable ${c.numeric ? "num" : ""} ${c.group}`, "data-key": c.key, title: `${c.group === "metric" ? "Metric" : c.group === "hp" ? "Hparam" : ""} ${c.label}: click to sort`, text: c.label });
      if (this.sortKey === c.key) th.classList.add(this.sortDir === 1 ? "sorted-asc" : "sorted-desc");
      th.addEventListener("click", () => {
        if (this.sortKey === c.key) this.sortDir = this.sortDir === 1 ? -1 : 1;
        else {
          this.sortKey = c.key;
          this.sortDir = c.group === "metric" ? -1 : 1;
        }
        this.render();
      });
      trHead.appendChild(th);
      const input = h("input", { class: "input col-filter", "data-key": c.key, placeholder: c.numeric ? ">0.1, 1..5" : "filter", "aria-label": `Filter ${c.label}`, value: this.filters.get(c.key) ?? "" });
      input.addEventListener("input", () => {
        if (input.value.trim()) this.filters.set(c.key, input.value);
        else this.filters.delete(c.key);
        this.refreshRows();
      });
      trFilter.appendChild(h("th", null, input));
    }
    thead.append(trHead, trFilter);
    this.tbody = h("tbody");
    table.append(thead, this.tbody);
    this.scroller = h("div", { class: "table-wrap hparams-scroll" }, table);
    this.scroller.addEventListener("scroll", () => this.schedule(), { passive: true });
    this.tbody.addEventListener("click", (e) => {
      const tr = (e.target as HTMLElement).closest<HTMLElement>("tr[data-row]");
      if (!tr) return;
      const run = this.runs[Number(tr.dataset.row)]!;
      if ((e as MouseEvent).altKey) this.ctx.store.selectOnly([run]);
      else this.ctx.store.setChecked([run], !this.ctx.store.isChecked(run));
    });
    this.tbody.addEventListener("mouseover", (e) => {
      const tr = (e.target as HTMLElement).closest<HTMLElement>("tr[data-row]");
      const r = tr ? Number(tr.dataset.row) : -1;
      if (r !== this.hoverRow) {
        this.hoverRow = r;
        this.drawParcoords();
      }
    });
    this.content.append(head, pcWrap, this.scroller);
    this.paintRows();
    requestAnimationFrame(() => this.drawParcoords());
  }

  private refreshRows(): void {
    this.computeOrder();
    this.paintRows();
    this.drawParcoords();
  }

  private schedule(): void {
    if (this.raf) return;
    this.raf = requestAnimationFrame(() => {
      this.raf = 0;
      this.paintRows();
    });
  }

  private paintRows(): void {
    if (!this.tbody || !this.scroller) return;
    const store = this.ctx.store;
    const top = Math.max(0, this.scroller.scrollTop - 60);
    const height = this.scroller.clientHeight || 600;
    const first = Math.max(0, Math.floor(top / ROW) - 10);
    const last = Math.min(this.order.length, Math.ceil((top + height) / ROW) + 10);
    const ncols = this.cols.length + 2;
    const rows: HTMLElement[] = [];
    const pad = (px: number) => {
      const td = h("td", { colspan: ncols, class: "pad" });
      td.style.height = `${px}px`;
      td.style.padding = "0";
      return h("tr", { class: "pad-row" }, td);
    };
    if (first > 0) rows.push(pad(first * ROW));
    for (let k = first; k < last; k++) {
      const i = this.order[k]!;
      const run = this.runs[i]!;
      const checked = store.isChecked(run);
      const sw = h("span", { class: "swatch" });
      sw.style.background = store.colorOf(run);
      const tr = h("tr", { "data-row": i, class: checked ? "checked" : "unchecked" }, h("td", { class: "sel" }, h("span", { class: "cb", "data-state": checked ? "on" : "off" })), h("td", { class: "run", title: run }, sw, " ", run));
      for (const c of this.cols) {
        const v = c.values[i];
        tr.appendChild(h("td", { class: c.numeric ? "num" : "", text: v === null || v === undefined ? "" : typeof v === "number" ? fmtNum(v, 5) : String(v) }));
      }
      rows.push(tr);
    }
    if (last < this.order.length) rows.push(pad((this.order.length - last) * ROW));
    this.tbody.replaceChildren(...rows);
  }

  // Parallel coordinates ------------------------------------------------------------------

  private axes(): { col: Column; pos: (v: Cell) => number; ticks: [number, string][]; inv: (y: number) => number | null; cats: string[] | null }[] {
    const H = this.pc ? this.pc.clientHeight - 40 : 200;
    return this.cols.map((col) => {
      if (col.numeric) {
        const nums = col.values.filter((v): v is number => typeof v === "number" && Number.isFinite(v));
        let lo = Math.min(...nums);
        let hi = Math.max(...nums);
        if (!(lo <= hi)) [lo, hi] = [0, 1];
        const log = lo > 0 && hi / lo > 50;
        const f = (v: number) => (log ? Math.log10(v) : v);
        const a = f(lo);
        const b = f(hi) === a ? a + 1 : f(hi);
        const pos = (v: Cell) => (typeof v === "number" && Number.isFinite(v) ? 20 + H - ((f(v) - a) / (b - a)) * H : NaN);
        const inv = (y: number) => {
          const t = (20 + H - y) / H;
          const x = a + t * (b - a);
          return log ? Math.pow(10, x) : x;
        };
        return { col, pos, ticks: [[pos(lo), fmtNum(lo, 3)], [pos(hi), fmtNum(hi, 3)]], inv, cats: null };
      }
      const cats = [...new Set(col.values.filter((v) => v !== null).map(String))].sort();
      const pos = (v: Cell) => (v === null ? NaN : 20 + (cats.length === 1 ? H / 2 : (cats.indexOf(String(v)) / (cats.length - 1)) * H));
      return { col, pos, ticks: cats.slice(0, 12).map((c) => [pos(c), c] as [number, string]), inv: () => null, cats };
    });
  }

  private drawParcoords(): void {
    const c = this.pc;
    if (!c || this.cols.length === 0) return;
    const spacing = 120;
    const W = Math.max(c.parentElement!.clientWidth, this.cols.length * spacing + 40);
    const Hpx = 260;
    const dpr = devicePixelRatio;
    c.style.width = `${W}px`;
    c.style.height = `${Hpx}px`;
    c.width = W * dpr;
    c.height = Hpx * dpr;
    const ctx = c.getContext("2d")!;
    ctx.scale(dpr, dpr);
    const t = themeColors();
    const axes = this.axes();
    // Room on the right for the last axis's tick labels, which sit right of their axis.
    const xOf = (k: number) => 40 + (k * (W - 130)) / Math.max(1, axes.length - 1);
    const visible = new Set(this.order);
    const metric = axes.find((a) => a.col.group === "metric" && a.col.numeric);
    const colorOf = (i: number): string => {
      if (!metric) return this.ctx.store.colorOf(this.runs[i]!);
      const v = metric.col.values[i];
      if (typeof v !== "number" || !Number.isFinite(v)) return "#999999";
      const y = metric.pos(v);
      const t01 = 1 - (y - 20) / (Hpx - 40);
      // The ramp's pale yellow end vanishes on a light background: stop short of it there.
      return rampColor(currentTheme() === "dark" ? t01 : 0.85 * t01);
    };
    const drawLine = (i: number, alpha: number, width: number, color: string) => {
      ctx.globalAlpha = alpha;
      ctx.strokeStyle = color;
      ctx.lineWidth = width;
      ctx.beginPath();
      let pen = false;
      axes.forEach((a, k) => {
        const y = a.pos(a.col.values[i] ?? null);
        if (!Number.isFinite(y)) {
          pen = false;
          return;
        }
        if (pen) ctx.lineTo(xOf(k), y);
        else ctx.moveTo(xOf(k), y);
        pen = true;
      });
      ctx.stroke();
    };
    for (let i = 0; i < this.runs.length; i++) if (!visible.has(i)) drawLine(i, 0.12, 1, t.axis);
    for (const i of this.order) drawLine(i, 0.75, 1.2, colorOf(i));
    if (this.hoverRow >= 0) drawLine(this.hoverRow, 1, 2.5, t.fg);
    ctx.globalAlpha = 1;
    ctx.font = `11px ${t.font}`;
    axes.forEach((a, k) => {
      const x = xOf(k);
      ctx.strokeStyle = t.axis;
      ctx.lineWidth = 1;
      ctx.beginPath();
      ctx.moveTo(x + 0.5, 20);
      ctx.lineTo(x + 0.5, Hpx - 20);
      ctx.stroke();
      ctx.fillStyle = a.col.group === "metric" ? t.accent : t.fg;
      ctx.textAlign = "center";
      ctx.fillText(a.col.label.length > 18 ? a.col.label.slice(0, 17) + "…" : a.col.label, x, 12);
      ctx.fillStyle = t.axis;
      ctx.textAlign = "left";
      for (const [y, label] of a.ticks) ctx.fillText(label.length > 14 ? label.slice(0, 13) + "…" : label, x + 4, Math.min(Hpx - 6, Math.max(26, y + 4)));
      if (this.brush && this.brush.col === k) {
        ctx.fillStyle = t.accent;
        ctx.globalAlpha = 0.25;
        ctx.fillRect(x - 6, Math.min(this.brush.y0, this.brush.y1), 12, Math.abs(this.brush.y1 - this.brush.y0));
        ctx.globalAlpha = 1;
      }
    });
  }

  private bindParcoords(c: HTMLCanvasElement): void {
    let dragging = false;
    const axisAt = (x: number): number => {
      const W = c.clientWidth;
      const n = this.cols.length;
      for (let k = 0; k < n; k++) {
        const ax = 40 + (k * (W - 130)) / Math.max(1, n - 1);
        if (Math.abs(ax - x) < 16) return k;
      }
      return -1;
    };
    c.addEventListener("pointerdown", (e) => {
      const r = c.getBoundingClientRect();
      const k = axisAt(e.clientX - r.left);
      if (k < 0) return;
      dragging = true;
      c.setPointerCapture(e.pointerId);
      this.brush = { col: k, y0: e.clientY - r.top, y1: e.clientY - r.top };
    });
    c.addEventListener("pointermove", (e) => {
      if (!dragging || !this.brush) return;
      this.brush.y1 = e.clientY - c.getBoundingClientRect().top;
      this.drawParcoords();
    });
    c.addEventListener("pointerup", () => {
      if (!dragging || !this.brush) return;
      dragging = false;
      const a = this.axes()[this.brush.col]!;
      const input = this.content.querySelector<HTMLInputElement>(`input.col-filter[data-key="${CSS.escape(a.col.key)}"]`);
      if (Math.abs(this.brush.y1 - this.brush.y0) < 3) {
        this.filters.delete(a.col.key);
        this.brush = null;
        if (input) input.value = "";
      } else if (a.col.numeric) {
        const v0 = a.inv(Math.max(this.brush.y0, this.brush.y1))!;
        const v1 = a.inv(Math.min(this.brush.y0, this.brush.y1))!;
        const text = `${+v0.toPrecision(4)}..${+v1.toPrecision(4)}`;
        this.filters.set(a.col.key, text);
        if (input) input.value = text;
      } else if (a.cats) {
        const lo = Math.min(this.brush.y0, this.brush.y1);
        const hi = Math.max(this.brush.y0, this.brush.y1);
        const inside = a.cats.filter((cat) => {
          const y = a.pos(cat);
          return y >= lo && y <= hi;
        });
        if (inside.length === 1) {
          this.filters.set(a.col.key, `=${inside[0]}`);
          if (input) input.value = `=${inside[0]}`;
        }
      }
      this.refreshRows();
    });
  }

  live(change: LiveChange): void {
    if (change.kinds.length === 0 || change.kinds.includes("hparams") || change.kinds.includes("scalars")) void this.load();
  }

  destroy(): void {
    this.unsub.forEach((u) => u());
  }
}

const view: ViewFactory = (ctx) => new HparamsView(ctx);
export default view;
