/**
 * TensorBoard's own smoothing code, taken from the web bundle that the pinned tensorboard wheel
 * ships (webfiles.zip in the project's venv), so the tests compare against the real thing rather
 * than against our reading of it.
 */
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { resolve } from "node:path";

export type TbPoint = { x: number; y: number };
export type TbSmoother = (
  series: { id: string; points: TbPoint[] }[],
  weight: number,
) => { id: string; points: TbPoint[] }[];

const PY = `
import re, sys, zipfile, tensorboard, os
z = zipfile.ZipFile(os.path.join(os.path.dirname(tensorboard.__file__), "webfiles.zip"))
js = z.read("index.js").decode("utf-8")
m = re.search(r"Number\\.isFinite\\(e\\)\\|\\|\\(e=0\\),e=Math\\.max\\(0,Math\\.min\\(e,1\\)\\);.*?return n\\}", js)
if not m:
    sys.exit("TensorBoard's smoothing code was not found in webfiles.zip")
sys.stdout.write(m.group(0)[:-1])  # without the generator's closing brace
`;

export function loadTensorBoardSmoother(): TbSmoother {
  const python = process.env.TBSCOPE_PYTHON ?? resolve(import.meta.dirname, "../../.venv/bin/python");
  if (!existsSync(python)) {
    throw new Error(`${python} not found: run \`make venv\` first (it installs tensorboard)`);
  }
  const body = execFileSync(python, ["-c", PY], { encoding: "utf-8" });
  // The body is the generator's code with parameters (t = series, e = weight).
  return new Function("t", "e", body) as TbSmoother;
}
