/** Light and dark themes: CSS variables on <html data-theme>; charts read them when built. */
export type Theme = "light" | "dark";

export function initialTheme(): Theme {
  const saved = localStorage.getItem("tbscope_theme");
  if (saved === "light" || saved === "dark") return saved;
  return matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
}

export function applyTheme(t: Theme): void {
  document.documentElement.dataset.theme = t;
  localStorage.setItem("tbscope_theme", t);
  cached = null;
}

export function currentTheme(): Theme {
  return document.documentElement.dataset.theme === "dark" ? "dark" : "light";
}

export interface ThemeColors {
  bg: string;
  fg: string;
  axis: string;
  grid: string;
  font: string;
  accent: string;
}

let cached: ThemeColors | null = null;

export function themeColors(): ThemeColors {
  if (cached) return cached;
  const cs = getComputedStyle(document.documentElement);
  const v = (name: string, dflt: string) => cs.getPropertyValue(name).trim() || dflt;
  cached = {
    bg: v("--card", "#fff"),
    fg: v("--fg", "#222"),
    axis: v("--muted", "#666"),
    grid: v("--grid", "#eee"),
    font: v("--font", "system-ui, sans-serif"),
    accent: v("--accent", "#f57c00"),
  };
  return cached;
}
