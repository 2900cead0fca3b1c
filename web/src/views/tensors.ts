/**
 * Tensors: per step the dtype, shape and statistics; a heatmap of a 2-D value (the whole
 * tensor fetched with `full=1` for the chosen step) and a sparkline of the mean over steps.
 */
import { h } from "../dom";
import { toNumber, type JsonNumber } from "../lib/columns";
import { fmtNum, fmtStep } from "../chart/format";
import { rampColor } from "../runs";
import { RunTagView, stepSlider, type RunTagSpec } from "./runtagcards";
import type { ViewContext, ViewFactory } from "./view";

interface TensorColumns {
  step: number[];
  wall_time: number[];
  dtype: string[];
  shape: number[][];
  min: JsonNumber[];
  max: JsonNumber[];
  mean: JsonNumber[];
  std: JsonNumber[];
  values: (unknown[] | null)[];
}

function flat(v: unknown, out: number[] = []): number[] {
  if (Array.isArray(v)) for (const x of v) flat(x, out);
  else out.push(toNumber(v as JsonNumber));
  return out;
}

function heatmap(canvas: HTMLCanvasElement, values: number[], rows: number, cols: number): void {
  canvas.width = cols;
  canvas.height = rows;
  const ctx = canvas.getContext("2d")!;
  const img = ctx.createImageData(cols, rows);
  let lo = Infinity;
  let hi = -Infinity;
  for (const v of values) if (Number.isFinite(v)) ((lo = Math.min(lo, v)), (hi = Math.max(hi, v)));
  for (let i = 0; i < rows * cols; i++) {
    const v = values[i] ?? NaN;
    const c = Number.isFinite(v) ? rampColor(hi > lo ? (v - lo) / (hi - lo) : 0.5) : "#ff00ff";
    img.data[i * 4] = parseInt(c.slice(1, 3), 16);
    img.data[i * 4 + 1] = parseInt(c.slice(3, 5), 16);
    img.data[i * 4 + 2] = parseInt(c.slice(5, 7), 16);
    img.data[i * 4 + 3] = 255;
  }
  ctx.putImageData(img, 0, 0);
  canvas.title = `min ${fmtNum(lo)} · max ${fmtNum(hi)}`;
}

const tensorSpec: RunTagSpec = {
  kind: "tensors",
  title: "Tensors",
  cardClass: "tensor-card",
  emptyDetail: "Tensors logged with add_tensor or tf.summary.write (non-scalar) appear here.",
  body(ctx, run, tag, el) {
    let cols: TensorColumns | null = null;
    const stats = h("table", { class: "data stats" });
    const heat = h("canvas", { class: "heatmap" });
    const note = h("div", { class: "media-meta" });
    const show = async (i: number, signal: AbortSignal) => {
      if (!cols) return;
      const shape = cols.shape[i] ?? [];
      stats.replaceChildren(
        h("tr", null, ["step", "dtype", "shape", "min", "max", "mean", "std"].map((x) => h("th", { text: x }))),
        h(
          "tr",
          null,
          h("td", { text: fmtStep(cols.step[i]!) }),
          h("td", { text: cols.dtype[i] ?? "" }),
          h("td", { text: `[${shape.join(", ")}]` }),
          [cols.min, cols.max, cols.mean, cols.std].map((c) => h("td", { class: "num", text: fmtNum(toNumber(c[i]), 5) })),
        ),
      );
      note.textContent = "";
      heat.style.display = "none";
      const dims = shape.filter((d) => d > 1);
      if (dims.length === 2 || (shape.length === 2 && dims.length >= 1)) {
        const [r, c] = shape.length === 2 ? [shape[0]!, shape[1]!] : [dims[0]!, dims[1]!];
        let values = cols.values[i];
        if (!values) {
          const res = await ctx.api.get<{ columns: TensorColumns }>("tensors", { tag, run, full: 1, step: cols.step[i]! }, signal);
          const k = res.columns.step.indexOf(cols.step[i]!);
          values = res.columns.values[k >= 0 ? k : 0] ?? null;
        }
        if (values) {
          heatmap(heat, flat(values), r, c);
          heat.style.display = "block";
          note.textContent = `${r}×${c} heatmap`;
        }
      } else if (cols.values[i] && flat(cols.values[i]).length <= 16) {
        note.textContent = `values: ${flat(cols.values[i]).map((v) => fmtNum(v, 4)).join(", ")}`;
      }
    };
    return {
      async load(signal) {
        const res = await ctx.api.get<{ columns: TensorColumns }>("tensors", { tag, run }, signal);
        cols = res.columns;
        if (cols.step.length === 0) {
          el.replaceChildren(h("div", { class: "chart-empty show", text: "No tensors" }));
          return;
        }
        const last = cols.step.length - 1;
        const slider = stepSlider(cols.step, last, (i) => void show(i, signal));
        el.replaceChildren(h("div", { class: "table-wrap" }, stats), heat, h("div", { class: "media-controls" }, slider.el, note));
        await show(last, signal);
      },
    };
  },
};

const view: ViewFactory = (ctx: ViewContext) => new RunTagView(ctx, tensorSpec);
export default view;
