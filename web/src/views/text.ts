/**
 * Text: each step's text rendered as markdown (GFM tables, code) and sanitized in the browser;
 * rank-2 text tensors as tables. The sanitizer keeps no script, no event handler, no style
 * attribute (the CSP would refuse it) and no image (external images would leave the origin);
 * links get a safe target.
 */
import DOMPurify from "dompurify";
import { Marked } from "marked";
import { h } from "../dom";
import { RunTagView, type RunTagSpec } from "./runtagcards";
import type { ViewContext, ViewFactory } from "./view";

interface TextColumns {
  step: number[];
  wall_time: number[];
  text: (string | string[][] | string[])[];
  shape: (number[] | null)[];
}

const PAGE = 25;

DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A") {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer nofollow");
  }
});

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!);
}

// Raw HTML inside the markdown is shown as text, never parsed: parsing it (even in the
// sanitizer's inert document) makes Chromium report CSP violations for inline handlers and
// styles, and it is the writer's text anyway. Images become their alt text: fetching a URL
// from a log would leave the origin.
const md = new Marked({
  gfm: true,
  breaks: false,
  async: false,
  renderer: {
    html: ({ text }) => escapeHtml(text),
    image: ({ text }) => `<span class="md-image">[image: ${escapeHtml(text)}]</span>`,
  },
});

export function renderMarkdown(src: string): DocumentFragment {
  const html = md.parse(src) as string;
  return DOMPurify.sanitize(html, {
    RETURN_DOM_FRAGMENT: true,
    FORBID_TAGS: ["img", "style", "svg", "math", "form", "input", "button", "textarea", "select", "iframe", "object", "embed", "video", "audio", "source", "link", "meta", "base"],
    FORBID_ATTR: ["style", "id", "srcset"],
    ALLOWED_URI_REGEXP: /^(?:https?:|mailto:|#)/i,
  });
}

function table(rows: string[][]): HTMLElement {
  return h("div", { class: "table-wrap" }, h("table", { class: "data" }, rows.map((r) => h("tr", null, r.map((c) => h("td", { text: String(c) }))))));
}

const textSpec: RunTagSpec = {
  kind: "text",
  title: "Text",
  cardClass: "text-card",
  emptyDetail: "Text logged with add_text or tf.summary.text appears here as markdown.",
  body(ctx, run, tag, el) {
    let shown = PAGE;
    let cols: TextColumns | null = null;
    const render = () => {
      if (!cols) return;
      const n = cols.step.length;
      const items: HTMLElement[] = [];
      for (let i = n - 1; i >= Math.max(0, n - shown); i--) {
        const t = cols.text[i];
        let content: Node;
        if (Array.isArray(t)) {
          // Rows of a rank-2 text tensor; a flat list (the server keeps elements, and a shape
          // when it knows one) is cut into rows of the shape's last dimension.
          const shape = cols.shape[i] ?? [];
          const flat = t.every((r) => !Array.isArray(r));
          const width = flat && shape.length === 2 ? shape[1]! : 1;
          const rows: string[][] = flat ? [] : t.map((r) => (Array.isArray(r) ? r.map(String) : [String(r)]));
          if (flat) for (let k = 0; k < t.length; k += width) rows.push((t.slice(k, k + width) as string[]).map(String));
          content = table(rows);
        }
        else {
          const div = h("div", { class: "markdown" });
          div.appendChild(renderMarkdown(String(t ?? "")));
          content = div;
        }
        items.push(h("div", { class: "text-entry" }, h("div", { class: "text-step", text: `step ${cols.step[i]}` }), content));
      }
      const more = n > shown ? h("button", { type: "button", class: "btn small", text: `Show ${Math.min(PAGE, n - shown)} older` }) : null;
      more?.addEventListener("click", () => {
        shown += PAGE;
        render();
      });
      el.replaceChildren(h("div", { class: "text-list" }, items, more));
    };
    return {
      async load(signal) {
        const res = await ctx.api.get<{ columns: TextColumns }>("text", { tag, run }, signal);
        cols = res.columns;
        if (cols.step.length === 0) {
          el.replaceChildren(h("div", { class: "chart-empty show", text: "No text" }));
          return;
        }
        render();
      },
    };
  },
};

const view: ViewFactory = (ctx: ViewContext) => new RunTagView(ctx, textSpec);
export default view;
