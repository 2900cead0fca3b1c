/**
 * Shared pieces of tag-card views: grouping tags by prefix into collapsible sections, a tag
 * filter, and the visibility tracker that lets only on-screen cards fetch and draw.
 */
import { h, svgIcon } from "./dom";
import type { Store } from "./store";

export function groupOf(tag: string): string {
  const i = tag.indexOf("/");
  return i < 0 ? "" : tag.slice(0, i);
}

export function groupTags(tags: readonly string[]): Map<string, string[]> {
  const groups = new Map<string, string[]>();
  for (const t of tags) {
    const g = groupOf(t);
    let list = groups.get(g);
    if (!list) groups.set(g, (list = []));
    list.push(t);
  }
  // Named groups first, alphabetically; ungrouped tags last.
  return new Map([...groups.entries()].sort(([a], [b]) => (a === "" ? 1 : b === "" ? -1 : a.localeCompare(b))));
}

export interface Section {
  el: HTMLElement;
  body: HTMLElement;
}

export function section(store: Store, group: string, count: number): Section {
  const name = group === "" ? "Other" : group;
  const collapsed = store.state.collapsed.includes(group || "(other)");
  const head = h("button", { type: "button", class: "section-head", "aria-expanded": String(!collapsed) }, svgIcon("chevron"), h("span", { class: "section-name", text: name }), h("span", { class: "count", text: String(count) }));
  const body = h("div", { class: "card-grid" });
  const el = h("section", { class: collapsed ? "section collapsed" : "section" }, head, body);
  head.addEventListener("click", () => {
    const key = group || "(other)";
    const now = new Set(store.state.collapsed);
    if (now.has(key)) now.delete(key);
    else now.add(key);
    el.classList.toggle("collapsed", now.has(key));
    head.setAttribute("aria-expanded", String(!now.has(key)));
    store.update({ collapsed: [...now] }, { replace: true });
  });
  return { el, body };
}

/** Calls back when an element comes near the viewport or leaves it. */
export class Visibility {
  private io: IntersectionObserver;
  private cbs = new Map<Element, (visible: boolean) => void>();

  /** `root` defaults to the app's scroll container, so the margin preloads cards about to
   * scroll into view (with the viewport as root, the container's clipping would hide them). */
  constructor(root: Element | null = document.getElementById("main"), margin = "300px 0px") {
    this.io = new IntersectionObserver(
      (entries) => {
        for (const e of entries) this.cbs.get(e.target)?.(e.isIntersecting);
      },
      { root, rootMargin: margin },
    );
  }

  watch(el: Element, cb: (visible: boolean) => void): void {
    this.cbs.set(el, cb);
    this.io.observe(el);
  }

  unwatch(el: Element): void {
    this.cbs.delete(el);
    this.io.unobserve(el);
  }

  disconnect(): void {
    this.io.disconnect();
    this.cbs.clear();
  }
}

export function emptyState(title: string, detail: string): HTMLElement {
  return h("div", { class: "empty-state" }, h("div", { class: "empty-title", text: title }), h("div", { class: "empty-detail", text: detail }));
}

export function errorState(message: string, retry?: () => void): HTMLElement {
  const el = h("div", { class: "error-state", role: "alert" }, h("span", { text: message }));
  if (retry) {
    const b = h("button", { type: "button", class: "btn", text: "Retry" });
    b.addEventListener("click", retry);
    el.appendChild(b);
  }
  return el;
}
