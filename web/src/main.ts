/**
 * The dashboard shell: header with tabs and status, the runs panel, and the active view.
 * Scalars ship in the first bundle (it is the first tab); every other view is a lazy chunk.
 */
import "./style.css";
import { Api, ApiError, type Status } from "./api";
import { Store, type LiveChange, type HparamValue } from "./store";
import { RunsPanel } from "./runs";
import { Live } from "./live";
import { button, clear, h, svgIcon } from "./dom";
import { applyTheme, currentTheme, initialTheme } from "./theme";
import { createScalarsView } from "./views/scalars";
import type { View, ViewFactory } from "./views/view";
import { emptyState, errorState } from "./cards";
import { toNumber } from "./lib/columns";

interface Tab {
  id: string;
  label: string;
  kind?: string; // key in status.kinds
  unit?: string; // what status.kinds counts for it ("tag" unless said)
  load?: () => Promise<ViewFactory>;
  later?: boolean;
}

const TABS: Tab[] = [
  { id: "scalars", label: "Scalars", kind: "scalars" },
  { id: "custom_scalars", label: "Custom scalars", kind: "custom_scalars", load: () => import("./views/customscalars").then((m) => m.default) },
  { id: "histograms", label: "Histograms", kind: "histograms", load: () => import("./views/histograms").then((m) => m.histograms) },
  { id: "distributions", label: "Distributions", kind: "histograms", load: () => import("./views/histograms").then((m) => m.distributions) },
  { id: "images", label: "Images", kind: "images", load: () => import("./views/media").then((m) => m.images) },
  { id: "audio", label: "Audio", kind: "audio", load: () => import("./views/media").then((m) => m.audio) },
  { id: "text", label: "Text", kind: "text", load: () => import("./views/text").then((m) => m.default) },
  { id: "tensors", label: "Tensors", kind: "tensors", load: () => import("./views/tensors").then((m) => m.default) },
  { id: "pr_curves", label: "PR curves", kind: "pr_curves", load: () => import("./views/prcurves").then((m) => m.default) },
  { id: "hparams", label: "HParams", kind: "hparams", load: () => import("./views/hparams").then((m) => m.default) },
  { id: "health", label: "Health", load: () => import("./views/health").then((m) => m.default) },
  { id: "embeddings", label: "Embeddings", kind: "embeddings", unit: "embedding", load: () => import("./views/embeddings").then((m) => m.default) },
  { id: "profile", label: "Profile", load: () => import("./views/profile").then((m) => m.default) },
];

class App {
  readonly api = new Api();
  readonly store = new Store(location.hash);
  private runsPanel: RunsPanel;
  private main: HTMLElement;
  private nav: HTMLElement;
  private statusEl: HTMLElement;
  private progress: HTMLElement;
  private view: View | null = null;
  private viewId = "";
  private viewSeq = 0;
  private status: Status | null = null;
  private live: Live;

  constructor(root: HTMLElement) {
    applyTheme(initialTheme());
    this.api.askToken = (wrong) => tokenDialog(wrong);
    this.runsPanel = new RunsPanel(this.store);
    this.nav = h("nav", { class: "tabs", "aria-label": "Views" });
    this.statusEl = h("div", { class: "conn", role: "status", "aria-live": "polite" });
    this.progress = h("div", { class: "load-progress" });
    const themeBtn = button("", { icon: currentTheme() === "dark" ? "sun" : "moon", title: "Light or dark theme (d)", cls: "btn icon-btn", onClick: () => this.toggleTheme() });
    themeBtn.id = "theme-toggle";
    const keysBtn = button("", { icon: "keyboard", title: "Keyboard shortcuts (?)", cls: "btn icon-btn", onClick: () => shortcutsDialog() });
    const brand = h("a", { class: "brand", href: "#scalars", title: "tbscope" }, h("span", { class: "logo" }), h("span", { text: "tbscope" }));
    const header = h("header", { class: "app-header" }, brand, this.nav, h("div", { class: "spacer" }), this.statusEl, themeBtn, keysBtn, this.progress);
    this.main = h("main", { class: "app-main", id: "main" });
    root.replaceChildren(header, h("div", { class: "app-body" }, this.runsPanel.el, this.main));
    this.live = new Live(this.api, this.store, (c) => this.onLive(c));
    this.store.on("connection", () => this.renderStatus());
    this.store.on("state", (prev) => {
      if ((prev as { view: string }).view !== this.store.state.view) void this.showView();
    });
    window.addEventListener("popstate", () => this.store.fromHash(location.hash));
    window.addEventListener("keydown", (e) => this.onKey(e));
    this.renderTabs();
    void this.start();
  }

  private async start(): Promise<void> {
    // Status, runs and the view's first requests (tags, then charts) go out together: a chain
    // of round trips would come before the first chart.
    const statusP = this.api.status();
    // The scalars' parse worker loads and starts while those requests are out, not after the
    // first chart's answer has arrived.
    if (this.store.state.view === "scalars") this.api.startWorker();
    const runsP = this.loadRuns().then(() => performance.mark("tbscope:runs"));
    void this.showView();
    try {
      this.status = await statusP;
      performance.mark("tbscope:status");
    } catch (e) {
      this.main.replaceChildren(errorState(`Cannot reach the tbscope server: ${(e as Error).message}`, () => location.reload()));
      this.store.connection = "reconnecting";
      this.renderStatus();
      return;
    }
    document.title = `tbscope · ${this.status.logdirs.map((l) => l.name || l.path).join(", ")}`;
    this.renderTabs();
    this.renderStatus();
    await runsP;
    // Hparams only colour and filter runs here (the HParams tab loads its own table): unless the
    // link filters by them, fetch them after the first chart, not in its way.
    if (this.store.state.runFilter.trim().startsWith("hp.") || this.store.state.view !== "scalars") void this.loadHparams();
    else {
      const later = () => void this.loadHparams();
      window.addEventListener("tbscope:first-chart", later, { once: true });
      setTimeout(() => {
        window.removeEventListener("tbscope:first-chart", later);
        if (!this.store.hparams) later();
      }, 3000);
    }
    this.live.start(this.status.generation);
    if (!this.status.loading.done) void this.watchLoading();
  }

  private async loadRuns(): Promise<void> {
    try {
      this.store.setRuns(await this.api.runs());
    } catch (e) {
      this.runsPanel.el.appendChild(errorState(`Could not list runs: ${(e as Error).message}`));
      this.store.runsFailed();
    }
  }

  private async loadHparams(): Promise<void> {
    if (!this.status?.kinds.hparams) return;
    try {
      const res = await this.api.get<{ hparams: { name: string; type: string }[]; metrics: { tag: string }[]; columns: Record<string, unknown[]> }>("hparams");
      const byRun = new Map<string, Record<string, HparamValue>>();
      const runs = (res.columns.run ?? []) as string[];
      runs.forEach((run, i) => {
        const rec: Record<string, HparamValue> = {};
        for (const hp of res.hparams) {
          const v = res.columns[`hp:${hp.name}`]?.[i];
          rec[hp.name] = hp.type === "float" || hp.type === "int" ? (v === null || v === undefined ? null : toNumber(v as number)) : ((v ?? null) as HparamValue);
        }
        byRun.set(run, rec);
      });
      this.store.setHparams({ names: res.hparams.map((x) => x.name), types: Object.fromEntries(res.hparams.map((x) => [x.name, x.type])), metrics: res.metrics.map((m) => m.tag), byRun });
    } catch {
      // The hparams view reports its own errors; colouring and filtering just lack hparams.
    }
  }

  private async watchLoading(): Promise<void> {
    while (this.status && !this.status.loading.done) {
      await new Promise((r) => setTimeout(r, 1000));
      try {
        const prev = this.status;
        this.status = await this.api.status();
        this.renderStatus();
        if (this.status.generation !== prev.generation) {
          this.renderTabs();
          await this.loadRuns();
          this.view?.live({ generation: this.status.generation, runs: [], kinds: [] });
        }
      } catch {
        // The live connection shows the outage; keep waiting.
      }
    }
    this.renderStatus();
  }

  private async onLive(c: LiveChange): Promise<void> {
    const known = c.runs.every((r) => this.store.runsByName.has(r));
    try {
      this.status = await this.api.status();
      this.renderTabs();
    } catch {
      /* shown by the connection state */
    }
    if (!known || c.runs.length === 0) await this.loadRuns();
    if (c.kinds.includes("hparams")) void this.loadHparams();
    this.store.emit("live", c);
    this.view?.live(c);
  }

  private count(kind: string | undefined): number | boolean | undefined {
    if (!kind || !this.status) return undefined;
    return this.status.kinds[kind];
  }

  private renderTabs(): void {
    clear(this.nav);
    for (const t of TABS) {
      const n = this.count(t.kind);
      // A kind the server does not count (an older server without embeddings in its status)
      // is not known to be empty.
      const empty = t.later || (t.kind !== undefined && this.status !== null && n !== undefined && !n);
      const a = h("a", { href: `#${t.id}`, class: `tab${t.id === this.store.state.view ? " active" : ""}${empty ? " empty" : ""}`, "data-view": t.id, "aria-current": t.id === this.store.state.view ? "page" : null, title: t.later ? `${t.label}: coming in a later release` : typeof n === "number" ? `${n} ${t.unit ?? "tag"}${n === 1 ? "" : "s"}` : t.label }, t.label);
      a.addEventListener("click", (e) => {
        e.preventDefault();
        this.store.update({ view: t.id, card: null });
      });
      this.nav.appendChild(a);
    }
  }

  private renderStatus(): void {
    const s = this.status;
    const c = this.store.connection;
    const label = c === "live" ? "Live" : c === "polling" ? "Live (polling)" : c === "reconnecting" ? "Disconnected: reconnecting…" : "Connecting…";
    this.statusEl.className = `conn ${c}`;
    this.statusEl.replaceChildren(h("span", { class: "dot" }), h("span", { text: label }));
    document.documentElement.dataset.connection = c;
    if (s && !s.loading.done) {
      const frac = s.loading.bytes_total > 0 ? s.loading.bytes_done / s.loading.bytes_total : s.loading.files_total > 0 ? s.loading.files_done / s.loading.files_total : 0;
      this.progress.style.transform = `scaleX(${Math.max(0.02, frac)})`;
      this.progress.classList.add("show");
      this.progress.title = `Loading ${s.loading.files_done} of ${s.loading.files_total} files`;
      this.statusEl.appendChild(h("span", { class: "loading-note", text: `· loading ${s.loading.files_done}/${s.loading.files_total} files` }));
    } else {
      this.progress.classList.remove("show");
    }
  }

  private async showView(): Promise<void> {
    const id = this.store.state.view;
    if (id === this.viewId && this.view) return;
    const seq = ++this.viewSeq;
    this.renderTabs();
    this.view?.destroy();
    this.view = null;
    this.viewId = id;
    const tab = TABS.find((t) => t.id === id) ?? TABS[0]!;
    this.main.replaceChildren(h("div", { class: "loading-state", text: "Loading…" }));
    if (tab.later) {
      this.main.replaceChildren(emptyState(`${tab.label} are coming`, "The navigation is ready; a later tbscope release reads and shows this data."));
      return;
    }
    let factory: ViewFactory;
    try {
      factory = tab.load ? await tab.load() : createScalarsView;
    } catch (e) {
      this.main.replaceChildren(errorState(`Could not load the ${tab.label} view: ${(e as Error).message}`, () => void this.showView()));
      return;
    }
    if (seq !== this.viewSeq) return;
    this.view = factory({ api: this.api, store: this.store });
    this.main.replaceChildren(this.view.el);
    this.main.scrollTop = 0;
  }

  private toggleTheme(): void {
    applyTheme(currentTheme() === "dark" ? "light" : "dark");
    const btn = document.getElementById("theme-toggle");
    btn?.replaceChildren(svgIcon(currentTheme() === "dark" ? "sun" : "moon"));
    this.store.emit("theme");
  }

  private onKey(e: KeyboardEvent): void {
    const target = e.target as HTMLElement;
    const typing = target.matches("input, textarea, select, [contenteditable]");
    if (e.key === "Escape") {
      if (typing) (target as HTMLInputElement).blur();
      else if (this.store.state.card) this.store.update({ card: null });
      return;
    }
    if (typing || e.ctrlKey || e.metaKey || e.altKey) return;
    const go = (fn: () => void) => {
      e.preventDefault();
      fn();
    };
    switch (e.key) {
      case "/":
        return go(() => this.runsPanel.focusFilter());
      case "f":
        return go(() => (document.getElementById("tag-filter") as HTMLInputElement | null)?.focus());
      case "s":
        return go(() => (document.getElementById("smoothing") as HTMLInputElement | null)?.focus());
      case "a":
        return go(() => this.runsPanel.checkFiltered(true));
      case "n":
        return go(() => this.runsPanel.checkFiltered(false));
      case "d":
        return go(() => this.toggleTheme());
      case "l":
        return go(() => this.store.update({ logY: !this.store.state.logY }));
      case "o":
        return go(() => this.store.update({ ignoreOutliers: !this.store.state.ignoreOutliers }));
      case "x": {
        const order = ["step", "relative", "wall_time"] as const;
        const next = order[(order.indexOf(this.store.state.xAxis) + 1) % order.length]!;
        return go(() => this.store.update({ xAxis: next }));
      }
      case "?":
        return go(() => shortcutsDialog());
    }
    const n = Number(e.key);
    if (n >= 1 && n <= 9) {
      const tabs = TABS.filter((t) => !t.later);
      const t = tabs[n - 1];
      if (t) go(() => this.store.update({ view: t.id, card: null }));
    }
  }
}

const SHORTCUTS: [string, string][] = [
  ["/", "Filter runs"],
  ["f", "Filter tags"],
  ["s", "Smoothing slider (then ← →)"],
  ["a / n", "Select all / no runs that pass the filter"],
  ["x", "Next x axis: step, relative, wall time"],
  ["l", "Log-scale y"],
  ["o", "Ignore outliers in the y range"],
  ["1–9", "Switch tab"],
  ["d", "Light / dark theme"],
  ["Esc", "Close the enlarged chart or dialog"],
  ["Drag / double-click", "Zoom a chart / reset it"],
  ["Alt+click a run", "Show only that run"],
];

function shortcutsDialog(): void {
  const dlg = h("dialog", { class: "dialog", "aria-label": "Keyboard shortcuts" });
  const table = h("table", { class: "keys" }, SHORTCUTS.map(([k, v]) => h("tr", null, h("td", null, h("kbd", { text: k })), h("td", { text: v }))));
  const close = button("Close", { cls: "btn", onClick: () => dlg.close() });
  dlg.append(h("h2", { text: "Keyboard shortcuts" }), table, h("div", { class: "dialog-actions" }, close));
  dlg.addEventListener("close", () => dlg.remove());
  document.body.appendChild(dlg);
  dlg.showModal();
}

function tokenDialog(wrong: boolean): Promise<string> {
  return new Promise((resolve) => {
    const dlg = h("dialog", { class: "dialog token-dialog", "aria-label": "Access token" });
    const input = h("input", { type: "password", class: "input", id: "token-input", autocomplete: "current-password", placeholder: "Token", required: true });
    const form = h(
      "form",
      { method: "dialog" },
      h("h2", { text: "This server needs a token" }),
      h("p", { text: wrong ? "That token was not accepted. Check it and try again." : "Paste the token printed by `tbscope serve` (or set in TBSCOPE_TOKEN)." }),
      input,
      h("div", { class: "dialog-actions" }, h("button", { type: "submit", class: "btn primary", text: "Open dashboard" })),
    );
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      if (!input.value.trim()) return;
      dlg.close();
      dlg.remove();
      resolve(input.value.trim());
    });
    dlg.addEventListener("cancel", (e) => e.preventDefault());
    dlg.appendChild(form);
    document.body.appendChild(dlg);
    dlg.showModal();
    input.focus();
  });
}

window.addEventListener("unhandledrejection", (e) => {
  // Aborted fetches are routine (scrolling, zooming); anything else is a real error.
  if (e.reason instanceof DOMException && e.reason.name === "AbortError") e.preventDefault();
  if (e.reason instanceof ApiError && e.reason.status === 401) e.preventDefault();
});

new App(document.getElementById("app")!);
