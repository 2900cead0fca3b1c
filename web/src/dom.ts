/**
 * Elements are built with this helper and text is always set through textContent, never parsed
 * as HTML: run names, tags and logged text can hold anything, and the CSP forbids inline style
 * strings anyway (element.style properties set from code are fine).
 */
type Attrs = Record<string, string | number | boolean | null | undefined>;
type Child = Node | string | null | undefined | false;

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs?: Attrs | null,
  ...children: (Child | Child[])[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") el.className = String(v);
      else if (k === "text") el.textContent = String(v);
      else el.setAttribute(k, v === true ? "" : String(v));
    }
  }
  append(el, children);
  return el;
}

function append(el: Element, children: (Child | Child[])[]): void {
  for (const c of children) {
    if (Array.isArray(c)) append(el, c);
    else if (c === null || c === undefined || c === false) continue;
    else if (typeof c === "string") el.appendChild(document.createTextNode(c));
    else el.appendChild(c);
  }
}

export function clear(el: Element): void {
  while (el.firstChild) el.removeChild(el.firstChild);
}

export function svgIcon(name: IconName): SVGSVGElement {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", "0 0 16 16");
  svg.setAttribute("aria-hidden", "true");
  svg.classList.add("icon");
  const path = document.createElementNS(ns, "path");
  path.setAttribute("d", ICONS[name]);
  svg.appendChild(path);
  return svg;
}

const ICONS = {
  expand: "M2 6V2h4M10 2h4v4M14 10v4h-4M6 14H2v-4",
  collapse: "M6 2v4H2M14 6h-4V2M10 14v-4h4M2 10h4v4",
  download: "M8 2v8M4.5 6.5 8 10l3.5-3.5M3 13h10",
  image: "M2 3h12v10H2zM2 11l3.5-3.5L8 10l2-2 4 4M10.5 6a.5.5 0 1 0 0-.01",
  reset: "M3 8a5 5 0 1 0 1.5-3.5M3 2v3h3",
  chevron: "M6 4l4 4-4 4",
  sun: "M8 5a3 3 0 1 0 0 6 3 3 0 0 0 0-6M8 1v2M8 13v2M1 8h2M13 8h2M3 3l1.5 1.5M11.5 11.5 13 13M3 13l1.5-1.5M11.5 4.5 13 3",
  moon: "M13 10A6 6 0 0 1 6 3a6 6 0 1 0 7 7",
  keyboard: "M1.5 4h13v8h-13zM4 6.5h.01M6.5 6.5h.01M9 6.5h.01M11.5 6.5h.01M4.5 9.5h7",
  close: "M4 4l8 8M12 4l-8 8",
  list: "M5 4h9M5 8h9M5 12h9M2 4h.01M2 8h.01M2 12h.01",
  tree: "M3 2v11h3M3 7h3M8 3h6M8 7h6M8 12h6",
} as const;

export type IconName = keyof typeof ICONS;

export function button(
  label: string,
  opts: { icon?: IconName; title?: string; cls?: string; onClick: (e: MouseEvent) => void },
): HTMLButtonElement {
  const b = h("button", { type: "button", class: opts.cls ?? "btn", title: opts.title ?? label, "aria-label": opts.title ?? label });
  if (opts.icon) b.appendChild(svgIcon(opts.icon));
  if (label && !opts.icon) b.appendChild(document.createTextNode(label));
  b.addEventListener("click", opts.onClick);
  return b;
}

export function downloadBlob(blob: Blob, filename: string): void {
  const url = URL.createObjectURL(blob);
  const a = h("a", { href: url, download: filename });
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/** A safe file name from a tag or run name. */
export function fileSafe(name: string): string {
  return name.replace(/[^A-Za-z0-9._=-]+/g, "_").replace(/^_+|_+$/g, "").slice(0, 120) || "data";
}
