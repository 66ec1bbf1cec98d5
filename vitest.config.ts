import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/support/global-setup.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Each test file gets its own database (a PGlite snapshot or a PostgreSQL template copy).
    pool: "forks",
    maxWorkers: 2,
  },
});
