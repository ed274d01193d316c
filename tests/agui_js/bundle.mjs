// Bundles page/app.js (and @ag-ui/client from node_modules) into one ES module for the browser.
// Usage: node bundle.mjs <outfile>
import { build } from "esbuild";

await build({
  entryPoints: [new URL("page/app.js", import.meta.url).pathname],
  bundle: true,
  format: "esm",
  platform: "browser",
  target: "es2022",
  outfile: process.argv[2],
  logLevel: "error",
});
