/**
 * The runs panel: filter, select all/none, count, tree by folder or flat list, and colour by
 * hparam. The list is virtual (fixed-height rows, only the rows in view exist in the DOM), so
 * 100,000 runs scroll as smoothly as ten.
 */
import { buildTree, compact, flatten, type RunNode, type RunRow } from "./lib/runtree";
import { button, clear, h, svgIcon } from "./dom";
import { isHparamFilter } from "./lib/filter";
import type { Store } from "./store";
import type { UrlState } from "./lib/urlstate";

const ROW = 24;
const OVERSCAN = 8;

// A perceptually even ramp (viridis endpoints and midpoints) for numeric hparams.
const RAMP = ["#440154", "#3b528b", "#21918c", "#5ec962", "#fde725"];
const CATEGORICAL = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];

function lerpColor(a: string, b: string, t: number): string {
  const pa = [1, 3, 5].map((i) => parseInt(a.slice(i, i + 2), 16));
  const pb = [1, 3, 5].map((i) => parseInt(b.slice(i, i + 2), 16));
  return "#" + pa.map((v, i) => Math.round(v + (pb[i]! - v) * t).toString(16).padStart(2, "0")).join("");
}

export function rampColor(t: number): string {
  const x = Math.min(1, Math.max(0, t)) * (RAMP.length - 1);
  const i = Math.min(RAMP.length - 2, Math.floor(x));
  return lerpColor(RAMP[i]!, RAMP[i + 1]!, x - i);
}

interface FlatRow {
  run: number;
}

export class RunsPanel {
  readonly el: HTMLElement;
  private input: HTMLInputElement;
  private count: HTMLElement;
  private scroller: HTMLElement;
  private spacer: HTMLElement;
  private rowsEl: HTMLElement;
  private emptyEl: HTMLElement;
  private colorBy: HTMLSelectElement;
  private modeBtn: HTMLButtonElement;
  private tree: RunNode | null = null;
  private expanded = new Set<string>();
  private rows: (RunRow | FlatRow)[] = [];
  /** Prefix sums of checked-and-visible runs, for folder tri-state checkboxes in O(1). */
  private checkedPrefix = new Uint32Array(1);
  private visiblePrefix = new Uint32Array(1);
  private raf = 0;
  private loaded = false;

  constructor(private readonly store: Store) {
    this.input = h("input", { type: "search", class: "input", id: "run-filter", placeholder: "Filter runs (text, glob, /regex/, hp.lr<0.1)", "aria-label": "Filter runs", value: store.state.runFilter });
    this.input.addEventListener("input", () => store.update({ runFilter: this.input.value }, { replace: true }));
    this.count = h("span", { class: "run-count", "aria-live": "polite" });
    this.modeBtn = button("", { icon: store.state.tree ? "list" : "tree", title: store.state.tree ? "Show a flat list" : "Show a tree by folder", cls: "btn icon-btn", onClick: () => store.update({ tree: !store.state.tree }, { replace: true }) });
    const all = button("All", { title: "Select every run that passes the filter (a)", cls: "btn small", onClick: () => this.checkFiltered(true) });
    const none = button("None", { title: "Deselect every run that passes the filter (n)", cls: "btn small", onClick: () => this.checkFiltered(false) });
    this.colorBy = h("select", { class: "input select", "aria-label": "Colour runs by", id: "color-by" }, h("option", { value: "", text: "Colour: run" }));
    this.colorBy.addEventListener("change", () => this.applyColorBy());
    this.scroller = h("div", { class: "runs-scroll", tabindex: 0, role: "listbox", "aria-label": "Runs", "aria-multiselectable": "true" });
    this.spacer = h("div", { class: "runs-spacer" });
    this.rowsEl = h("div", { class: "runs-rows" });
    this.emptyEl = h("div", { class: "runs-empty" });
    this.scroller.append(this.spacer, this.rowsEl, this.emptyEl);
    this.scroller.addEventListener("scroll", () => this.schedule(), { passive: true });
    this.rowsEl.addEventListener("click", (e) => this.onClick(e));
    new ResizeObserver(() => this.schedule()).observe(this.scroller);
    this.el = h(
      "aside",
      { class: "runs-panel", "aria-label": "Runs" },
      h("div", { class: "runs-head" }, h("div", { class: "runs-title" }, h("span", { class: "panel-title", text: "Runs" }), this.count, this.modeBtn), this.input, h("div", { class: "runs-actions" }, all, none, this.colorBy)),
      this.scroller,
    );
    store.on("runs", () => {
      this.loaded = true;
      this.rebuild();
    });
    store.on("selection", () => this.refresh());
    store.on("hparams", () => this.fillColorBy());
    store.on("state", (prev) => {
      // Only the filter and the tree/list mode change this panel (a selection change comes as
      // "selection"): a smoothing step or a new tab leaves it as it is.
      const p = prev as UrlState | undefined;
      if (p && p.runFilter === store.state.runFilter && p.tree === store.state.tree) return;
      if (this.input.value !== store.state.runFilter && document.activeElement !== this.input) this.input.value = store.state.runFilter;
      this.modeBtn.replaceChildren(svgIcon(store.state.tree ? "list" : "tree"));
      this.modeBtn.title = store.state.tree ? "Show a flat list" : "Show a tree by folder";
      this.refresh();
    });
    this.rebuild();
  }

  focusFilter(): void {
    this.input.focus();
    this.input.select();
  }

  private rebuild(): void {
    const names = this.store.runs.map((r) => r.name);
    this.tree = compact(buildTree(names));
    // Small logdirs open fully; large ones open the first level only.
    if (this.expanded.size === 0) {
      const open = (n: RunNode, depth: number) => {
        if (n.children.length === 0) return;
        if (n.path) this.expanded.add(n.path);
        if (names.length <= 60 || depth < 1) n.children.forEach((c) => open(c, depth + 1));
      };
      if (names.length <= 60) open(this.tree, 0);
    }
    this.refresh();
  }

  private refresh(): void {
    const store = this.store;
    const runs = store.runs;
    const n = runs.length;
    const vis = new Uint32Array(n + 1);
    const chk = new Uint32Array(n + 1);
    let shown = 0;
    for (let i = 0; i < n; i++) {
      const name = runs[i]!.name;
      const v = store.filter.test(name);
      vis[i + 1] = vis[i]! + (v ? 1 : 0);
      const c = v && store.isChecked(name);
      chk[i + 1] = chk[i]! + (c ? 1 : 0);
      if (c) shown++;
    }
    this.visiblePrefix = vis;
    this.checkedPrefix = chk;
    const filtered = vis[n]!;
    this.count.textContent = filtered === n ? `${shown} of ${n}` : `${shown} of ${filtered} (${n})`;
    this.input.classList.toggle("invalid", store.filter.error !== null);
    this.input.title = store.filter.error ?? (isHparamFilter(store.state.runFilter) ? "Hparam filter" : "");
    if (store.state.tree && this.tree) {
      this.rows = flatten(this.tree, this.expanded, (i) => vis[i + 1]! > vis[i]!);
    } else {
      const rows: FlatRow[] = [];
      for (let i = 0; i < n; i++) if (vis[i + 1]! > vis[i]!) rows.push({ run: i });
      this.rows = rows;
    }
    this.spacer.style.height = `${this.rows.length * ROW}px`;
    this.paint();
  }

  private schedule(): void {
    if (this.raf) return;
    this.raf = requestAnimationFrame(() => {
      this.raf = 0;
      this.paint();
    });
  }

  private paint(): void {
    const top = this.scroller.scrollTop;
    const height = this.scroller.clientHeight || 600;
    const first = Math.max(0, Math.floor(top / ROW) - OVERSCAN);
    const last = Math.min(this.rows.length, Math.ceil((top + height) / ROW) + OVERSCAN);
    this.rowsEl.style.transform = `translateY(${first * ROW}px)`;
    const want = last - first;
    while (this.rowsEl.children.length > want) this.rowsEl.lastElementChild!.remove();
    while (this.rowsEl.children.length < want) this.rowsEl.appendChild(this.makeRow());
    for (let k = 0; k < want; k++) this.fillRow(this.rowsEl.children[k] as HTMLElement, this.rows[first + k]!, first + k);
    this.emptyEl.textContent = this.rows.length > 0 ? "" : this.store.runs.length > 0 ? "No run matches the filter" : this.loaded ? "No runs yet" : "";
  }

  private makeRow(): HTMLElement {
    const row = h("div", { class: "run-row", role: "option" });
    const twisty = h("span", { class: "twisty" });
    twisty.appendChild(svgIcon("chevron"));
    row.append(twisty, h("span", { class: "cb" }), h("span", { class: "swatch" }), h("span", { class: "run-name" }));
    return row;
  }

  private fillRow(row: HTMLElement, r: RunRow | FlatRow, index: number): void {
    const [twisty, cb, swatch, name] = Array.from(row.children) as HTMLElement[];
    row.dataset.index = String(index);
    let runIdx: number;
    let checkedState: "on" | "off" | "mixed";
    let label: string;
    let depth = 0;
    let folder = false;
    if ("node" in r) {
      const node = r.node;
      depth = r.depth;
      runIdx = node.run;
      folder = node.children.length > 0;
      label = node.name;
      const vis = this.visiblePrefix[node.last + 1]! - this.visiblePrefix[node.first]!;
      const chk = this.checkedPrefix[node.last + 1]! - this.checkedPrefix[node.first]!;
      checkedState = folder ? (chk === 0 ? "off" : chk === vis ? "on" : "mixed") : this.store.isChecked(node.path) ? "on" : "off";
      row.title = node.path;
      twisty!.classList.toggle("open", folder && this.expanded.has(node.path));
    } else {
      runIdx = r.run;
      label = this.store.runs[runIdx]!.name;
      checkedState = this.store.isChecked(label) ? "on" : "off";
      row.title = label;
    }
    twisty!.style.visibility = folder ? "visible" : "hidden";
    row.style.paddingLeft = `${4 + depth * 14}px`;
    row.classList.toggle("folder", folder);
    cb!.dataset.state = checkedState;
    row.setAttribute("aria-selected", String(checkedState === "on"));
    const run = runIdx >= 0 ? this.store.runs[runIdx] : undefined;
    swatch!.style.visibility = run ? "visible" : "hidden";
    if (run) swatch!.style.background = this.store.colorOf(run.name);
    if (name!.textContent !== label) name!.textContent = label;
    name!.classList.toggle("problems", !!run && run.problems > 0);
  }

  private onClick(e: MouseEvent): void {
    const row = (e.target as HTMLElement).closest<HTMLElement>(".run-row");
    if (!row) return;
    const r = this.rows[Number(row.dataset.index)];
    if (!r) return;
    const onTwisty = (e.target as HTMLElement).closest(".twisty");
    if ("node" in r) {
      const node = r.node;
      const folder = node.children.length > 0;
      if (folder && (onTwisty || (node.run < 0 && !(e.target as HTMLElement).closest(".cb")))) {
        if (this.expanded.has(node.path)) this.expanded.delete(node.path);
        else this.expanded.add(node.path);
        this.refresh();
        return;
      }
      const names: string[] = [];
      const src = folder && !(e.target as HTMLElement).closest(".run-name") ? [node.first, node.last] : node.run >= 0 ? [node.run, node.run] : [node.first, node.last];
      for (let i = src[0]!; i <= src[1]!; i++) {
        const nm = this.store.runs[i]!.name;
        if (this.store.filter.test(nm)) names.push(nm);
      }
      this.toggle(names, e);
    } else {
      this.toggle([this.store.runs[r.run]!.name], e);
    }
  }

  private toggle(names: string[], e: MouseEvent): void {
    if (names.length === 0) return;
    if (e.altKey || e.metaKey || e.ctrlKey) {
      this.store.selectOnly(names);
      return;
    }
    const allOn = names.every((n) => this.store.isChecked(n));
    this.store.setChecked(names, !allOn);
  }

  checkFiltered(on: boolean): void {
    const f = this.store.filter;
    if (f.empty) {
      if (on) this.store.selectAll();
      else this.store.selectNone();
      return;
    }
    this.store.setChecked(this.store.runs.filter((r) => f.test(r.name)).map((r) => r.name), on);
  }

  private fillColorBy(): void {
    const hp = this.store.hparams;
    clear(this.colorBy);
    this.colorBy.appendChild(h("option", { value: "", text: "Colour: run" }));
    for (const n of hp?.names ?? []) this.colorBy.appendChild(h("option", { value: n, text: `Colour: ${n}` }));
  }

  private applyColorBy(): void {
    const name = this.colorBy.value;
    const hp = this.store.hparams;
    if (!name || !hp) {
      this.store.colorOverride = null;
    } else {
      const values = this.store.runs.map((r) => hp.byRun.get(r.name)?.[name] ?? null);
      const nums = values.filter((v): v is number => typeof v === "number" && Number.isFinite(v));
      const map = new Map<string, string>();
      if (nums.length > 0 && nums.length === values.filter((v) => v !== null).length) {
        const logScale = nums.every((v) => v > 0) && Math.max(...nums) / Math.min(...nums) > 100;
        const f = (v: number) => (logScale ? Math.log10(v) : v);
        const lo = Math.min(...nums.map(f));
        const hi = Math.max(...nums.map(f));
        this.store.runs.forEach((r, i) => {
          const v = values[i];
          map.set(r.name, typeof v === "number" ? rampColor(hi > lo ? (f(v) - lo) / (hi - lo) : 0.5) : "#999999");
        });
      } else {
        const cats = [...new Set(values.filter((v) => v !== null).map(String))].sort();
        this.store.runs.forEach((r, i) => {
          const v = values[i];
          map.set(r.name, v === null || v === undefined ? "#999999" : CATEGORICAL[cats.indexOf(String(v)) % CATEGORICAL.length]!);
        });
      }
      this.store.colorOverride = map;
    }
    this.store.emit("selection");
  }
}
