import { createRequire } from "node:module";
import { defineConfig } from "vitest/config";

export default defineConfig({
  resolve: {
    // graphql 16 ships CJS (main) and ESM (module) side by side with no exports map: Node, and so
    // Pothos and yoga, load the CJS one, while Vite would pick the ESM one for our own imports.
    // Two instances of graphql cannot share a schema, so resolve ours as Node does.
    alias: [{ find: /^graphql$/, replacement: createRequire(import.meta.url).resolve("graphql") }],
  },
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/support/global-setup.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Each test file gets its own database: a PostgreSQL template copy, or on PGlite one as the snapshot
    // left it, lent from the worker's pool (test/support/pglite-pool.ts).
    pool: "forks",
    // Sized for 2 cores. On PGlite two workers keep both busy (the embedded databases run inside them; a
    // third made the suite slower, 268 s -> 288 s, and with lent databases no faster, 206 s -> 197 s); on
    // PostgreSQL part of the work is the server's, in its own processes, and a third worker fills the time
    // the two spend waiting for it (164 s -> 141 s; a fourth, 151 s -> 151 s).
    maxWorkers: process.env.TEST_DATABASE_URL ? 3 : 2,
    // Test files share each worker's module cache: importing the app (Prisma client, GraphQL schema)
    // once per worker instead of once per file saves about a third of the suite's time. Files keep
    // no module-level state of their own beyond what test/support caches on purpose.
    isolate: false,
  },
});
