// One page from hydrogen-view-sdk: the app bundled by esbuild (olm aliased to an empty module), beside the
// SDK's assets it loads by path (its service worker, its worker, the download sandbox) and its fonts.
import {build} from "esbuild";
import {copyFileSync, mkdirSync, rmSync} from "node:fs";

const sdk = "node_modules/hydrogen-view-sdk";
rmSync("dist", {recursive: true, force: true});
mkdirSync("dist");
await build({
  entryPoints: ["src/main.js"],
  bundle: true,
  format: "esm",
  outfile: "dist/app.js",
  alias: {"@matrix-org/olm/olm.js": "./src/olm-stub.js"},
  loader: {".woff": "file", ".woff2": "file", ".svg": "file", ".png": "file"},
  logLevel: "warning",
});
copyFileSync("src/index.html", "dist/index.html");
copyFileSync(`${sdk}/lib-build/sw.js`, "dist/sw.js");
copyFileSync(`${sdk}/asset-build/assets/main.js`, "dist/main.js");
copyFileSync(`${sdk}/asset-build/assets/download-sandbox.html`, "dist/download-sandbox.html");
console.log("client-check: built dist/");
