/**
 * Profile: a Chrome trace of the logdir (torch.profiler, TensorBoard's profile plugin) as a
 * zoomable timeline, one lane per process and thread, and the operations that took the most
 * time. The server sends the longest events of the window on screen, so a zoom fetches the
 * events that become visible at that scale.
 */
import { h } from "../dom";
import { emptyState, errorState } from "../cards";
import { fmtBytes, fmtNum } from "../chart/format";
import { toNumber, type JsonNumber } from "../lib/columns";
import { clampWindow, fmtMicros, tickStep, zoomAround } from "../lib/timeline";
import type { LiveChange } from "../store";
import type { View, ViewContext, ViewFactory } from "./view";

interface ProfilesResponse {
  columns: { run: string[]; session: string[]; host: string[]; time: JsonNumber[]; size: number[]; format: string[]; source: string[]; file: string[] };
}

interface Lane {
  process: string;
  thread: string;
  pid: string;
  tid: string;
}

interface EventsResponse {
  start_min: JsonNumber;
  end_max: JsonNumber;
  total: number;
  truncated: boolean;
  lanes: Lane[];
  columns: { name: string[]; category: string[]; start: JsonNumber[]; duration: JsonNumber[]; self_duration: JsonNumber[]; lane: number[] };
}

interface OperationsResponse {
  columns: { name: string[]; category: string[]; calls: number[]; self_total: JsonNumber[]; total: JsonNumber[]; mean: JsonNumber[]; max: JsonNumber[]; self_share: JsonNumber[] };
}

const LANE_H = 20;
const AXIS_H = 22;
const LABEL_W = 180;

/** A stable colour per operation name. */
function colorOf(name: string): string {
  let x = 0;
  for (let i = 0; i < name.length; i++) x = (x * 31 + name.charCodeAt(i)) | 0;
  return `hsl(${Math.abs(x) % 360}, 55%, 62%)`;
}

class ProfileView implements View {
  readonly el: HTMLElement;
  private content = h("div", { class: "view-content profile-view" });
  private picker = h("select", { class: "select profile-select", "aria-label": "Profile" });
  private info = h("span", { class: "profile-info" });
  private canvas = h("canvas", { class: "profile-canvas" });
  private timeline = h("div", { class: "profile-timeline", "data-state": "loading" }, this.canvas);
  private tip = h("div", { class: "profile-tip" });
  private ops = h("div", { class: "table-wrap profile-ops" });
  private files: { run: string; file: string; label: string }[] = [];
  private data: EventsResponse | null = null;
  private full: [number, number] = [0, 1];
  private win: [number, number] = [0, 1];
  private fetchSeq = 0;
  private fetchTimer = 0;
  private abort: AbortController | null = null;
  private drag: { x0: number; moved: boolean } | null = null;
  private resize = new ResizeObserver(() => this.draw());

  constructor(private readonly ctx: ViewContext) {
    this.el = h("div", { class: "view" }, this.content);
    this.picker.addEventListener("change", () => void this.open());
    this.canvas.addEventListener("wheel", (e) => this.onWheel(e), { passive: false });
    this.canvas.addEventListener("mousedown", (e) => (this.drag = { x0: e.offsetX, moved: false }));
    this.canvas.addEventListener("mousemove", (e) => this.onMove(e));
    this.canvas.addEventListener("mouseup", (e) => this.onUp(e));
    this.canvas.addEventListener("mouseleave", () => ((this.drag = null), (this.tip.style.display = "none"), this.draw()));
    this.canvas.addEventListener("dblclick", () => this.setWindow(this.full[0], this.full[1]));
    this.resize.observe(this.timeline);
    void this.load();
  }

  private async load(): Promise<void> {
    try {
      const res = await this.ctx.api.get<ProfilesResponse>("profiles");
      const c = res.columns;
      this.files = [];
      for (let i = 0; i < c.file.length; i++) {
        if (c.format[i] !== "chrome_trace") continue;
        const when = new Date(toNumber(c.time[i]!) * 1000).toISOString().replace("T", " ").slice(0, 19);
        this.files.push({ run: c.run[i]!, file: c.file[i]!, label: `${c.run[i]} · ${c.host[i]} · ${when} · ${fmtBytes(c.size[i]!)}` });
      }
      if (!this.files.length) {
        this.content.replaceChildren(emptyState("No profiles", "Chrome traces from torch.profiler (tensorboard_trace_handler: *.pt.trace.json) and TensorBoard's profile plugin (plugins/profile/<session>/<host>.trace.json.gz) appear here."));
        return;
      }
      const keep = this.picker.value;
      this.picker.replaceChildren(...this.files.map((f, i) => h("option", { value: String(i), text: f.label })));
      const again = this.files.findIndex((_, i) => String(i) === keep);
      this.picker.value = String(again >= 0 ? again : this.files.length - 1);
      const hint = h("span", { class: "profile-hint", text: "wheel: zoom · drag: select a span · double-click: whole trace" });
      this.content.replaceChildren(h("div", { class: "toolbar profile-toolbar" }, this.picker, this.info, hint), this.timeline, this.tip, h("h3", { class: "profile-heading", text: "Top operations (by self time)" }), this.ops);
      if (again < 0) await this.open();
    } catch (e) {
      this.content.replaceChildren(errorState(`Could not list the profiles: ${(e as Error).message}`, () => void this.load()));
    }
  }

  private current(): { run: string; file: string } | undefined {
    return this.files[Number(this.picker.value)];
  }

  private async open(): Promise<void> {
    const f = this.current();
    if (!f) return;
    this.data = null;
    this.timeline.dataset.state = "loading";
    try {
      const [ev, ops] = await Promise.all([
        this.ctx.api.get<EventsResponse>("profile/events", { run: f.run, file: f.file }),
        this.ctx.api.get<OperationsResponse>("profile/operations", { run: f.run, file: f.file, limit: 50 }),
      ]);
      this.full = [toNumber(ev.start_min), Math.max(toNumber(ev.end_max), toNumber(ev.start_min) + 1)];
      this.win = [...this.full];
      this.data = ev;
      this.renderOps(ops);
      this.draw();
    } catch (e) {
      this.ops.replaceChildren(errorState(`Could not open ${f.file}: ${(e as Error).message}`, () => void this.open()));
    }
  }

  private renderOps(res: OperationsResponse): void {
    const c = res.columns;
    const head = ["Operation", "Category", "Calls", "Self total", "Total", "Mean", "Max", "Self %"];
    const rows = c.name.map((name, i) =>
      h(
        "tr",
        null,
        h("td", { class: "op-name", text: name, title: name }),
        h("td", { text: c.category[i] ?? "" }),
        h("td", { class: "num", text: String(c.calls[i]) }),
        [c.self_total, c.total, c.mean, c.max].map((col) => h("td", { class: "num", text: fmtMicros(toNumber(col[i]!)) })),
        h("td", { class: "num", text: `${fmtNum(100 * toNumber(c.self_share[i]!), 3)}%` }),
      ),
    );
    this.ops.replaceChildren(h("table", { class: "data profile-ops-table" }, h("thead", null, h("tr", null, head.map((x, k) => h("th", { class: k >= 2 ? "num" : "", text: x })))), h("tbody", null, rows)));
  }

  private xOf(t: number, width: number): number {
    const [a, b] = this.win;
    return LABEL_W + ((t - a) / (b - a)) * (width - LABEL_W);
  }

  private tOf(x: number, width: number): number {
    const [a, b] = this.win;
    return a + ((x - LABEL_W) / Math.max(1, width - LABEL_W)) * (b - a);
  }

  private draw(highlight?: { x0: number; x1: number }): void {
    const d = this.data;
    if (!d) return;
    const width = Math.max(300, this.timeline.clientWidth);
    const height = AXIS_H + Math.max(1, d.lanes.length) * LANE_H + 4;
    const dpr = window.devicePixelRatio || 1;
    this.canvas.width = Math.round(width * dpr);
    this.canvas.height = Math.round(height * dpr);
    this.canvas.style.width = `${width}px`;
    this.canvas.style.height = `${height}px`;
    const g = this.canvas.getContext("2d")!;
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    const css = getComputedStyle(this.el);
    const fg = css.getPropertyValue("--fg").trim() || "#1c2230";
    const muted = css.getPropertyValue("--muted").trim() || "#626d7d";
    const grid = css.getPropertyValue("--grid").trim() || "#eceef2";
    g.clearRect(0, 0, width, height);
    g.font = "11px system-ui, sans-serif";
    g.textBaseline = "middle";
    // Axis: ticks at a round step, labelled relative to the trace's start.
    const [a, b] = this.win;
    const nice = tickStep(b - a, 8);
    g.fillStyle = muted;
    g.strokeStyle = grid;
    for (let t = Math.ceil((a - this.full[0]) / nice) * nice + this.full[0]; t <= b; t += nice) {
      const x = this.xOf(t, width);
      g.beginPath();
      g.moveTo(x, AXIS_H - 4);
      g.lineTo(x, height);
      g.stroke();
      g.fillText(fmtMicros(t - this.full[0]), x + 3, AXIS_H / 2);
    }
    d.lanes.forEach((lane, i) => {
      g.fillStyle = muted;
      const label = `${lane.process} · ${lane.thread}`;
      g.fillText(label.length > 30 ? `${label.slice(0, 29)}…` : label, 4, AXIS_H + i * LANE_H + LANE_H / 2);
    });
    // Events: longest first, so short ones drawn later stay visible on top.
    const c = d.columns;
    let drawn = 0;
    g.save();
    g.beginPath();
    g.rect(LABEL_W, AXIS_H, width - LABEL_W, height - AXIS_H);
    g.clip();
    const order = c.name.map((_, i) => i).sort((p, q) => toNumber(c.duration[q]!) - toNumber(c.duration[p]!));
    for (const i of order) {
      const s = toNumber(c.start[i]!);
      const e = s + toNumber(c.duration[i]!);
      if (e < a || s > b) continue;
      const x0 = this.xOf(s, width);
      const x1 = Math.max(x0 + 1, this.xOf(e, width));
      const y = AXIS_H + (c.lane[i] ?? 0) * LANE_H + 2;
      const name = c.name[i] ?? "";
      g.fillStyle = colorOf(name);
      g.fillRect(x0, y, x1 - x0, LANE_H - 4);
      drawn++;
      if (x1 - x0 > 40) {
        g.fillStyle = fg;
        g.save();
        g.beginPath();
        g.rect(Math.max(x0, LABEL_W), y, x1 - Math.max(x0, LABEL_W), LANE_H - 4);
        g.clip();
        g.fillText(name, Math.max(x0, LABEL_W) + 3, y + (LANE_H - 4) / 2);
        g.restore();
      }
    }
    if (highlight) {
      g.fillStyle = "rgba(47, 111, 222, 0.18)";
      g.fillRect(Math.min(highlight.x0, highlight.x1), AXIS_H, Math.abs(highlight.x1 - highlight.x0), height - AXIS_H);
    }
    g.restore();
    this.timeline.dataset.start = String(a);
    this.timeline.dataset.end = String(b);
    this.timeline.dataset.drawn = String(drawn);
    this.timeline.dataset.state = "ready";
    this.info.textContent = `${d.total} events in view${d.truncated ? ` (the ${c.name.length} longest shown: zoom in for more)` : ""} · window ${fmtMicros(b - a)}`;
  }

  /** Moves the window and fetches its events (the longest ones at this zoom). */
  private setWindow(a: number, b: number): void {
    this.win = clampWindow(a, b, this.full[0], this.full[1]);
    this.draw();
    clearTimeout(this.fetchTimer);
    this.fetchTimer = window.setTimeout(() => void this.refetch(), 120);
  }

  private async refetch(): Promise<void> {
    const f = this.current();
    if (!f || !this.data) return;
    const seq = ++this.fetchSeq;
    this.abort?.abort();
    this.abort = new AbortController();
    const [a, b] = this.win;
    try {
      const ev = await this.ctx.api.get<EventsResponse>("profile/events", { run: f.run, file: f.file, start: a, end: b }, this.abort.signal);
      if (seq !== this.fetchSeq) return;
      this.data = ev;
      this.draw();
    } catch (e) {
      if ((e as Error).name !== "AbortError") this.info.textContent = `Could not load events: ${(e as Error).message}`;
    }
  }

  private onWheel(e: WheelEvent): void {
    if (!this.data) return;
    e.preventDefault();
    const width = this.canvas.clientWidth;
    const t = this.tOf(Math.max(LABEL_W, e.offsetX), width);
    const k = Math.exp(Math.sign(e.deltaY) * Math.min(1, Math.abs(e.deltaY) / 200));
    const [a, b] = zoomAround(this.win[0], this.win[1], t, k);
    this.setWindow(a, b);
  }

  private onMove(e: MouseEvent): void {
    const width = this.canvas.clientWidth;
    if (this.drag) {
      if (Math.abs(e.offsetX - this.drag.x0) > 3) this.drag.moved = true;
      this.draw({ x0: this.drag.x0, x1: e.offsetX });
      return;
    }
    const d = this.data;
    if (!d) return;
    const lane = Math.floor((e.offsetY - AXIS_H) / LANE_H);
    const t = this.tOf(e.offsetX, width);
    const c = d.columns;
    let best = -1;
    for (let i = 0; i < c.name.length; i++) {
      if (c.lane[i] !== lane) continue;
      const s = toNumber(c.start[i]!);
      const du = toNumber(c.duration[i]!);
      if (s <= t && t <= s + du && (best < 0 || du < toNumber(c.duration[best]!))) best = i;
    }
    if (best < 0 || e.offsetX < LABEL_W) {
      this.tip.style.display = "none";
      return;
    }
    this.tip.textContent = `${c.name[best]} (${c.category[best]}) · ${fmtMicros(toNumber(c.duration[best]!))} · self ${fmtMicros(toNumber(c.self_duration[best]!))} · at ${fmtMicros(toNumber(c.start[best]!) - this.full[0])}`;
    this.tip.style.display = "block";
    this.tip.style.left = `${this.timeline.offsetLeft + e.offsetX + 12}px`;
    this.tip.style.top = `${this.timeline.offsetTop + e.offsetY + 12}px`;
  }

  private onUp(e: MouseEvent): void {
    const drag = this.drag;
    this.drag = null;
    if (!drag || !drag.moved) return;
    const width = this.canvas.clientWidth;
    const t0 = this.tOf(Math.min(drag.x0, e.offsetX), width);
    const t1 = this.tOf(Math.max(drag.x0, e.offsetX), width);
    this.setWindow(t0, t1);
  }

  live(_change: LiveChange): void {
    // New profile files do not change the event logs' generation: the list is read again
    // with every change the server reports (cheap, and revalidated by ETag).
    void this.load();
  }

  destroy(): void {
    this.resize.disconnect();
    this.abort?.abort();
    clearTimeout(this.fetchTimer);
  }
}

const view: ViewFactory = (ctx) => new ProfileView(ctx);
export default view;
