// Bundles the server (src/, not its packages) into build/server/main.mjs, which `npm start` runs
// with plain node: no TypeScript transform at start-up, and far fewer modules to resolve and load.
// Runs in postinstall (after the Prisma client is generated) and again from start.mjs when src/
// has changed since. build/server/ is two levels deep, as src/db/ is: paths the code resolves from
// import.meta.url (../../prisma/migrations) mean the same thing in the bundle.
import { build } from "esbuild";
import { fileURLToPath } from "node:url";

export const ROOT = fileURLToPath(new URL("../", import.meta.url));
export const BUNDLE = fileURLToPath(new URL("../build/server/main.mjs", import.meta.url));

/** `entry` and `outfile` name another tree's main.ts and bundle (bench/ab.ts builds a git ref's). */
export async function buildServer({ entry = fileURLToPath(new URL("../src/main.ts", import.meta.url)), outfile = BUNDLE } = {}) {
  await build({
    entryPoints: [entry],
    outfile,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    // Packages stay imports: they load their own files (WASM, PGlite's data) relative to themselves.
    packages: "external",
    logLevel: "warning",
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await buildServer();
