import { defineConfig } from "vitest/config";

// The build lands where the Python package serves it from: python/tbscope/server/static/ is
// the URL folder P/static/ and also holds index.html, which the server answers at P/. Every
// URL stays relative so the app works under any --path_prefix.
export default defineConfig({
  base: "./",
  build: {
    outDir: "../python/tbscope/server/static",
    emptyOutDir: true,
    assetsDir: "assets",
    target: "es2022",
    modulePreload: { polyfill: false },
    // Assets are never inlined as data: URLs (the CSP allows 'self' only).
    assetsInlineLimit: 0,
    reportCompressedSize: true,
    chunkSizeWarningLimit: 200,
  },
  experimental: {
    renderBuiltUrl(filename, { hostType }) {
      // index.html is served at P/, the assets at P/static/.
      if (hostType === "html") return "static/" + filename;
      return { relative: true };
    },
  },
  test: {
    include: ["test/**/*.test.ts"],
    environment: "node",
  },
});
