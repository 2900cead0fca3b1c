/**
 * Images and audio: a card per (tag, run) with a step slider; bytes come from `blob/{key}` as
 * same-origin blob URLs (the CSP allows images and media from blob: only besides 'self').
 * A click on an image opens it full size.
 */
import type { Api } from "../api";
import { h, clear, button } from "../dom";
import { RunTagView, stepSlider, type RunTagSpec } from "./runtagcards";
import type { ViewContext, ViewFactory } from "./view";

interface MediaColumns {
  step: number[];
  wall_time: number[];
  index?: number[];
  width?: number[];
  height?: number[];
  content_type: string[];
  key: string[];
  sample_rate?: number[];
  label?: (string | null)[];
}

const urls = new Map<string, Promise<string>>();
const MAX_URLS = 300;

/** A blob URL for an immutable blob key, cached; the oldest are revoked past MAX_URLS. */
export function blobUrl(api: Api, key: string, signal?: AbortSignal): Promise<string> {
  let p = urls.get(key);
  if (!p) {
    p = api.blob(`blob/${encodeURIComponent(key)}`, undefined, signal).then((b) => URL.createObjectURL(b));
    p.catch(() => urls.delete(key));
    urls.set(key, p);
    if (urls.size > MAX_URLS) {
      const [oldKey, oldUrl] = urls.entries().next().value as [string, Promise<string>];
      urls.delete(oldKey);
      void oldUrl.then((u) => URL.revokeObjectURL(u)).catch(() => undefined);
    }
  }
  return p;
}

/** Rows grouped by step: indices of each step's samples. */
function byStep(c: MediaColumns): { steps: number[]; rows: number[][] } {
  const steps: number[] = [];
  const rows: number[][] = [];
  for (let i = 0; i < c.step.length; i++) {
    const s = c.step[i]!;
    if (steps.length === 0 || steps[steps.length - 1] !== s) {
      steps.push(s);
      rows.push([]);
    }
    rows[rows.length - 1]!.push(i);
  }
  return { steps, rows };
}

function fullSize(src: string, title: string): void {
  const img = h("img", { src, alt: title, class: "fullsize-img" });
  const dlg = h("dialog", { class: "dialog image-dialog", "aria-label": title });
  dlg.append(h("div", { class: "image-dialog-head" }, h("span", { class: "card-title", text: title }), button("", { icon: "close", title: "Close (Esc)", cls: "btn icon-btn", onClick: () => dlg.close() })), h("div", { class: "image-dialog-body" }, img));
  dlg.addEventListener("close", () => dlg.remove());
  dlg.addEventListener("click", (e) => {
    if (e.target === dlg) dlg.close();
  });
  document.body.appendChild(dlg);
  dlg.showModal();
}

const imageSpec: RunTagSpec = {
  kind: "images",
  title: "Images",
  cardClass: "media-card image-card",
  emptyDetail: "Images logged with add_image or tf.summary.image appear here, every step kept.",
  body(ctx, run, tag, el) {
    let cols: MediaColumns | null = null;
    let current = -1;
    let seq = 0;
    const frame = h("div", { class: "image-frame" });
    const meta = h("div", { class: "media-meta" });
    let slider: ReturnType<typeof stepSlider> | null = null;
    const show = async (i: number, signal: AbortSignal) => {
      if (!cols) return;
      current = i;
      const my = ++seq;
      const { rows, steps } = byStep(cols);
      const idxs = rows[i] ?? [];
      const imgs = await Promise.all(
        idxs.map(async (r) => {
          const src = await blobUrl(ctx.api, cols!.key[r]!, signal);
          const img = h("img", { src, alt: `${tag} at step ${steps[i]}`, class: "thumb", loading: "lazy", decoding: "async" });
          const w = cols!.width?.[r];
          const hh = cols!.height?.[r];
          if (w && hh) {
            // Small images (the usual 28x28 to 64x64 samples) are scaled up by a whole factor,
            // pixelated, to about the frame's height; large ones fit the card.
            const scale = Math.max(1, Math.min(8, Math.floor(200 / hh)));
            img.width = w * scale;
            img.height = hh * scale;
          }
          img.addEventListener("click", () => fullSize(src, `${tag} · ${run} · step ${steps[i]}`));
          return img;
        }),
      );
      if (my !== seq) return;
      frame.replaceChildren(...imgs);
      const r0 = idxs[0];
      meta.textContent = r0 === undefined ? "" : `${cols.width?.[r0] ?? "?"}×${cols.height?.[r0] ?? "?"} · ${cols.content_type[r0]}${idxs.length > 1 ? ` · ${idxs.length} images` : ""}`;
    };
    let ac: AbortController | null = null;
    return {
      async load(signal) {
        ac = new AbortController();
        signal.addEventListener("abort", () => ac?.abort());
        const res = await ctx.api.get<{ columns: MediaColumns }>("images", { tag, run }, signal);
        cols = res.columns;
        const { steps } = byStep(cols);
        if (steps.length === 0) {
          el.replaceChildren(h("div", { class: "chart-empty show", text: "No images" }));
          return;
        }
        const keepLatest = current < 0 || current >= steps.length - 2;
        const start = keepLatest ? steps.length - 1 : current;
        slider = stepSlider(steps, start, (i) => void show(i, ac!.signal));
        el.replaceChildren(frame, h("div", { class: "media-controls" }, slider.el, meta));
        await show(start, signal);
      },
      destroy() {
        ac?.abort();
      },
    };
  },
};

const audioSpec: RunTagSpec = {
  kind: "audio",
  title: "Audio",
  cardClass: "media-card audio-card",
  emptyDetail: "Audio logged with add_audio or tf.summary.audio appears here, with a player per step.",
  body(ctx, run, tag, el) {
    let cols: MediaColumns | null = null;
    let current = -1;
    const players = h("div", { class: "audio-list" });
    const meta = h("div", { class: "media-meta" });
    const show = async (i: number, signal: AbortSignal) => {
      if (!cols) return;
      current = i;
      const { rows } = byStep(cols);
      const items = await Promise.all(
        (rows[i] ?? []).map(async (r) => {
          const src = await blobUrl(ctx.api, cols!.key[r]!, signal);
          const audio = h("audio", { controls: true, preload: "metadata", src });
          const label = cols!.label?.[r];
          return h("div", { class: "audio-item" }, audio, label ? h("div", { class: "audio-label", text: label }) : null);
        }),
      );
      players.replaceChildren(...items);
      const r0 = (rows[i] ?? [])[0];
      meta.textContent = r0 === undefined ? "" : `${cols.sample_rate?.[r0] ? `${cols.sample_rate[r0]} Hz · ` : ""}${cols.content_type[r0]}`;
    };
    return {
      async load(signal) {
        const res = await ctx.api.get<{ columns: MediaColumns }>("audio", { tag, run }, signal);
        cols = res.columns;
        const { steps } = byStep(cols);
        if (steps.length === 0) {
          el.replaceChildren(h("div", { class: "chart-empty show", text: "No audio" }));
          return;
        }
        const start = current < 0 || current >= steps.length - 2 ? steps.length - 1 : current;
        const slider = stepSlider(steps, start, (i) => void show(i, signal));
        clear(el);
        el.append(players, h("div", { class: "media-controls" }, slider.el, meta));
        await show(start, signal);
      },
    };
  },
};

export const images: ViewFactory = (ctx: ViewContext) => new RunTagView(ctx, imageSpec);
export const audio: ViewFactory = (ctx: ViewContext) => new RunTagView(ctx, audioSpec);
