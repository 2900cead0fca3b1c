/**
 * Health: the data-loss report. Every corrupt record skipped (file, byte range, reason) and
 * every truncated tail, with the runs they touch; an all-clear when nothing was lost.
 */
import { h, clear } from "../dom";
import { emptyState, errorState } from "../cards";
import { fmtBytes } from "../chart/format";
import type { LiveChange } from "../store";
import type { View, ViewContext, ViewFactory } from "./view";

interface HealthResponse {
  ok: boolean;
  columns: { file: string[]; run: string[]; offset: number[]; end: number[]; severity: string[]; reason: string[] };
}

class HealthView implements View {
  readonly el: HTMLElement;
  private content = h("div", { class: "view-content" });

  constructor(private readonly ctx: ViewContext) {
    this.el = h("div", { class: "view health-view" }, this.content);
    void this.load();
  }

  private async load(): Promise<void> {
    try {
      const res = await this.ctx.api.get<HealthResponse>("health");
      this.render(res);
    } catch (e) {
      this.content.replaceChildren(errorState(`Could not load the health report: ${(e as Error).message}`, () => void this.load()));
    }
  }

  private render(res: HealthResponse): void {
    clear(this.content);
    const c = res.columns;
    const n = c.file.length;
    const runs = this.ctx.store.runs;
    const summary = h("div", { class: `health-summary ${res.ok ? "ok" : "bad"}` }, h("span", { class: "dot" }), h("span", { text: res.ok ? (n === 0 ? "No data lost: every record read cleanly." : `No data lost; ${n} note${n === 1 ? "" : "s"} (e.g. files still being written).`) : `Data was lost in ${new Set(c.file).size} file${new Set(c.file).size === 1 ? "" : "s"}: ${n} problem${n === 1 ? "" : "s"} below.` }));
    this.content.appendChild(summary);
    if (n === 0) {
      this.content.appendChild(emptyState("All clear", `${runs.length} runs read; no corrupt or truncated records.`));
      return;
    }
    const rows = [];
    for (let i = 0; i < n; i++) {
      rows.push(
        h(
          "tr",
          { class: `sev-${c.severity[i]}` },
          h("td", null, h("span", { class: `sev sev-${c.severity[i]}`, text: c.severity[i] ?? "" })),
          h("td", { class: "run", text: c.run[i] ?? "" }),
          h("td", { class: "file", text: c.file[i] ?? "", title: c.file[i] ?? "" }),
          h("td", { class: "num", text: String(c.offset[i]) }),
          h("td", { class: "num", text: fmtBytes(Math.max(0, (c.end[i] ?? 0) - (c.offset[i] ?? 0))) }),
          h("td", { class: "reason", text: c.reason[i] ?? "" }),
        ),
      );
    }
    this.content.appendChild(
      h("div", { class: "table-wrap" }, h("table", { class: "data health-table" }, h("thead", null, h("tr", null, ["Severity", "Run", "File", "Offset", "Bytes", "Reason"].map((x, k) => h("th", { class: k === 3 || k === 4 ? "num" : "", text: x })))), h("tbody", null, rows))),
    );
  }

  live(_change: LiveChange): void {
    void this.load();
  }

  destroy(): void {}
}

const view: ViewFactory = (ctx) => new HealthView(ctx);
export default view;
