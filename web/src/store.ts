/**
 * Application state: the URL state (tab, filters, smoothing, selection...) plus the runs the
 * server knows. Views subscribe to named topics and redraw only what a change touches.
 */
import { compileFilter, compileHparamFilter, isHparamFilter, type CompiledFilter } from "./lib/filter";
import { DEFAULT_STATE, formatHash, parseHash, type UrlState } from "./lib/urlstate";
import { toNumber } from "./lib/columns";
import type { RunsResponse } from "./api";

export interface Run {
  index: number;
  name: string;
  color: string;
  startTime: number;
  lastWallTime: number;
  maxStep: number | null;
  problems: number;
}

export type Topic = "state" | "runs" | "selection" | "live" | "theme" | "connection" | "hparams";

export type HparamValue = string | number | boolean | null;

export interface Hparams {
  names: string[];
  types: Record<string, string>;
  metrics: string[];
  byRun: Map<string, Record<string, HparamValue>>;
}

export interface LiveChange {
  generation: number;
  runs: string[];
  kinds: string[];
}

type Listener = (detail?: unknown) => void;

export class Store {
  state: UrlState;
  runs: Run[] = [];
  runsByName = new Map<string, Run>();
  filter: CompiledFilter = compileFilter("");
  /** Overrides of run colours (colour by hparam). */
  colorOverride: Map<string, string> | null = null;
  hparams: Hparams | null = null;
  connection: "connecting" | "live" | "reconnecting" | "polling" = "connecting";
  private hidden = new Set<string>();
  private only: Set<string> | null = null;
  private listeners = new Map<Topic, Set<Listener>>();
  private selectedCache: Run[] | null = null;
  private resolveRuns: () => void = () => undefined;
  /** Settles once the first run list arrived (or failed): charts wait for it to pick runs. */
  readonly runsLoaded: Promise<void> = new Promise((r) => (this.resolveRuns = r));

  constructor(hash: string) {
    this.state = parseHash(hash);
    this.syncDerived();
  }

  on(topic: Topic, fn: Listener): () => void {
    let set = this.listeners.get(topic);
    if (!set) this.listeners.set(topic, (set = new Set()));
    set.add(fn);
    return () => set!.delete(fn);
  }

  emit(topic: Topic, detail?: unknown): void {
    for (const fn of [...(this.listeners.get(topic) ?? [])]) fn(detail);
  }

  private syncDerived(): void {
    this.hidden = new Set(this.state.hidden);
    this.only = this.state.only === null ? null : new Set(this.state.only);
    const text = this.state.runFilter;
    this.filter = isHparamFilter(text)
      ? compileHparamFilter(text, (run, name) => this.hparams?.byRun.get(run)?.[name])
      : compileFilter(text);
    this.selectedCache = null;
  }

  /** Apply a change to the URL state. Only a new tab or enlarged card makes a history entry
   * (Back returns to it); other changes replace the current one. */
  update(patch: Partial<UrlState>, opts: { replace?: boolean } = {}): void {
    const prev = this.state;
    this.state = { ...prev, ...patch };
    const selectionChanged =
      patch.hidden !== undefined || patch.only !== undefined || patch.runFilter !== undefined;
    if (selectionChanged) this.syncDerived();
    const hash = formatHash(this.state);
    const shown = this.pendingHash ?? location.hash;
    if (hash !== shown && !(hash === "#scalars" && shown === "")) {
      const navigation = (patch.view !== undefined && patch.view !== prev.view) || (patch.card !== undefined && patch.card !== prev.card);
      if (opts.replace || !navigation) this.replaceHash(hash);
      else {
        this.flushHash();
        history.pushState(null, "", hash);
      }
    }
    this.emit("state", prev);
    if (selectionChanged) this.emit("selection");
  }

  private pendingHash: string | null = null;
  private hashTimer = 0;
  private lastHashWrite = -Infinity;

  /** The URL follows the state at most every 100 ms (at once after a pause, and the last state
   * always): a slider drag sends an input per frame, and writing the URL each time took part of
   * the frame that should show the change. */
  private replaceHash(hash: string): void {
    const now = performance.now();
    if (this.pendingHash === null && now - this.lastHashWrite >= 100) {
      history.replaceState(null, "", hash);
      this.lastHashWrite = now;
      return;
    }
    this.pendingHash = hash;
    if (!this.hashTimer) this.hashTimer = window.setTimeout(() => this.flushHash(), Math.max(0, 100 - (now - this.lastHashWrite)));
  }

  /** Writes a replaced URL still waiting, now. */
  flushHash(): void {
    window.clearTimeout(this.hashTimer);
    this.hashTimer = 0;
    if (this.pendingHash === null) return;
    history.replaceState(null, "", this.pendingHash);
    this.pendingHash = null;
    this.lastHashWrite = performance.now();
  }

  /** Back/forward or a pasted link. */
  fromHash(hash: string): void {
    // The URL the user went to wins over one still waiting to be written.
    window.clearTimeout(this.hashTimer);
    this.hashTimer = 0;
    this.pendingHash = null;
    const prev = this.state;
    this.state = parseHash(hash);
    this.syncDerived();
    this.emit("state", prev);
    this.emit("selection");
  }

  setRuns(res: RunsResponse): void {
    const c = res.columns;
    const runs: Run[] = new Array(c.run.length);
    for (let i = 0; i < c.run.length; i++) {
      runs[i] = {
        index: i,
        name: c.run[i]!,
        color: c.color[i] ?? "#888",
        startTime: toNumber(c.start_time[i]),
        lastWallTime: toNumber(c.last_wall_time[i]),
        maxStep: c.max_step[i] ?? null,
        problems: c.problems[i] ?? 0,
      };
    }
    this.runs = runs;
    this.runsByName = new Map(runs.map((r) => [r.name, r]));
    this.selectedCache = null;
    this.resolveRuns();
    this.emit("runs");
    this.emit("selection");
  }

  runsFailed(): void {
    this.resolveRuns();
  }

  setHparams(hp: Hparams): void {
    this.hparams = hp;
    if (isHparamFilter(this.state.runFilter)) {
      this.syncDerived();
      this.emit("selection");
    }
    this.emit("hparams");
  }

  colorOf(run: string): string {
    return this.colorOverride?.get(run) ?? this.runsByName.get(run)?.color ?? "#888";
  }

  /** Checked in the runs panel (before the filter). */
  isChecked(name: string): boolean {
    return this.only !== null ? this.only.has(name) : !this.hidden.has(name);
  }

  /** Drawn: passes the filter and is checked. */
  isSelected(name: string): boolean {
    return this.isChecked(name) && this.filter.test(name);
  }

  selectedRuns(): Run[] {
    if (!this.selectedCache) this.selectedCache = this.runs.filter((r) => this.isSelected(r.name));
    return this.selectedCache;
  }

  setChecked(names: readonly string[], checked: boolean): void {
    if (this.only !== null) {
      const only = new Set(this.only);
      for (const n of names) {
        if (checked) only.add(n);
        else only.delete(n);
      }
      // Everything checked again: back to the short form.
      if (only.size === this.runs.length) this.update({ only: null, hidden: [] });
      else this.update({ only: [...only].sort() });
      return;
    }
    const hidden = new Set(this.hidden);
    for (const n of names) {
      if (checked) hidden.delete(n);
      else hidden.add(n);
    }
    // Past half the runs hidden, the explicit list of checked ones is the shorter link.
    if (hidden.size > this.runs.length / 2 && this.runs.length > 0) {
      const only = this.runs.filter((r) => !hidden.has(r.name)).map((r) => r.name);
      this.update({ only, hidden: [] });
    } else {
      this.update({ hidden: [...hidden].sort(), only: null });
    }
  }

  selectAll(): void {
    this.update({ hidden: [], only: null });
  }

  selectNone(): void {
    this.update({ hidden: [], only: [] });
  }

  selectOnly(names: readonly string[]): void {
    this.update({ hidden: [], only: [...names].sort() });
  }

  reset(): void {
    this.update({ ...DEFAULT_STATE, hidden: [], collapsed: [] });
  }
}
