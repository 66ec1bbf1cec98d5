// Bundles the server into build/server/main.mjs, which `npm start` runs with plain node: no
// TypeScript transform at start-up, and one module to load where src/ and its packages are some
// 1,500 (resolving, reading and compiling them one by one took some 0.4 s of each start: bench/README.md).
// Runs in postinstall (after the Prisma client is generated) and again from start.mjs when src/
// has changed since. build/server/ is two levels deep, as src/db/ is: paths the code resolves from
// import.meta.url (../../prisma/migrations) mean the same thing in the bundle.
import { build } from "esbuild";
import { fileURLToPath } from "node:url";

export const ROOT = fileURLToPath(new URL("../", import.meta.url));
export const BUNDLE = fileURLToPath(new URL("../build/server/main.mjs", import.meta.url));

/**
 * Packages that stay imports, loaded from node_modules as they are:
 * - those that load files relative to themselves: Prisma's query compiler (WebAssembly), PGlite's
 *   WebAssembly and data, GraphiQL's page (imported on the first page asked for);
 * - pino, whose transports run in worker threads that load pino's own files;
 * - pg (bundled, its start-up message went out with objects for its parameters).
 */
const EXTERNAL = [
  "@prisma/*",
  "@electric-sql/pglite",
  "@electric-sql/pglite/*",
  "pglite-prisma-adapter",
  "@graphql-yoga/render-graphiql",
  "pino",
  "pino-*",
  "thread-stream",
  "pg",
  "pg-*",
];

/** `entry` and `outfile` name another tree's main.ts and bundle (bench/ab.ts builds a git ref's). */
export async function buildServer({ entry = fileURLToPath(new URL("../src/main.ts", import.meta.url)), outfile = BUNDLE } = {}) {
  await build({
    entryPoints: [entry],
    outfile,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    external: EXTERNAL,
    // CommonJS packages inside an ES module bundle still call require (node's own modules, optional
    // packages such as ws's bufferutil, tried and caught): a require of the bundle's own place.
    banner: { js: 'import { createRequire as __createRequire } from "node:module"; const require = __createRequire(import.meta.url);' },
    logLevel: "warning",
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await buildServer();
