/** Number, time and duration formatting for axes, tooltips and tables. */
export function fmtNum(v: number | null, digits = 4): string {
  // uPlot passes null for log-axis ticks it leaves unlabelled.
  if (v === null || v === undefined) return "";
  if (Number.isNaN(v)) return "NaN";
  if (v === Infinity) return "∞";
  if (v === -Infinity) return "-∞";
  if (v === 0) return "0";
  const a = Math.abs(v);
  if (a >= 1e6 || a < 1e-3) return v.toExponential(Math.max(0, digits - 1)).replace("e+", "e");
  const s = v.toPrecision(digits);
  return s.includes(".") && !s.includes("e") ? s.replace(/\.?0+$/, "") : s;
}

export function fmtStep(v: number | null): string {
  if (v === null || v === undefined) return "";
  if (!Number.isFinite(v)) return String(v);
  const a = Math.abs(v);
  if (a >= 1e9) return (v / 1e9).toFixed(a >= 1e10 ? 0 : 1).replace(/\.0$/, "") + "G";
  if (a >= 1e6) return (v / 1e6).toFixed(a >= 1e7 ? 0 : 1).replace(/\.0$/, "") + "M";
  if (a >= 1e4) return (v / 1e3).toFixed(a >= 1e5 ? 0 : 1).replace(/\.0$/, "") + "k";
  return String(Math.round(v * 1000) / 1000);
}

export function fmtDuration(seconds: number): string {
  if (!Number.isFinite(seconds)) return "";
  const neg = seconds < 0;
  let s = Math.abs(seconds);
  let out: string;
  if (s < 1) out = `${Math.round(s * 1000)}ms`;
  else if (s < 60) out = `${+s.toFixed(1)}s`;
  else if (s < 3600) out = `${Math.floor(s / 60)}m${Math.round(s % 60) ? ` ${Math.round(s % 60)}s` : ""}`;
  else if (s < 86400) {
    const hrs = Math.floor(s / 3600);
    s -= hrs * 3600;
    out = `${hrs}h${Math.round(s / 60) ? ` ${Math.round(s / 60)}m` : ""}`;
  } else {
    const d = Math.floor(s / 86400);
    out = `${d}d ${Math.round((s - d * 86400) / 3600)}h`;
  }
  return neg ? "-" + out : out;
}

export function fmtTime(seconds: number): string {
  if (!Number.isFinite(seconds)) return "";
  const d = new Date(seconds * 1000);
  const pad = (n: number) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

export function fmtBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ["KB", "MB", "GB", "TB"];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v.toFixed(v >= 100 ? 0 : 1)} ${units[i]}`;
}
