import pg from "pg";
import { describe, expect, it } from "vitest";
import { isDatabaseUnavailable } from "../../src/core/prisma-errors.js";
import { openDatabase } from "../../src/db/client.js";
import { createTestDatabase } from "../support/app.js";
import { waitFor } from "../support/wait.js";

/**
 * A statement past its bound ends on the server too, not on the client alone: a database slow under
 * load (rather than cut off) would otherwise go on running each statement a 503 gave up on, beside the
 * connections the pool opens in their place. A session given a longer bound (migrations) has it for
 * its own statements only. PostgreSQL only.
 */
describe.skipIf(!process.env.TEST_DATABASE_URL)("a statement's bound", () => {
  /** The statements of `database` still running `text` (pg_stat_activity, from a connection of its own). */
  async function running(url: string, text: string): Promise<number> {
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    try {
      const { rows } = await admin.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND state = 'active' AND query = $1`,
        [text],
      );
      return rows[0]!.n;
    } finally {
      await admin.end();
    }
  }

  async function terminate(url: string, text: string) {
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    await admin.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND query = $1`, [text]).finally(() => admin.end());
  }

  it("ends the statement on the server as well: a 503 leaves nothing running", { timeout: 120_000 }, async () => {
    const database = await createTestDatabase();
    if (!("url" in database)) throw new Error("expected PostgreSQL");
    const db = await openDatabase({ kind: "postgres", url: database.url }, { poolSize: 2, queryTimeoutMs: 2_000 });
    const slow = "SELECT pg_sleep(600)";
    try {
      const failed = await db.sql.query(slow).then(
        () => null,
        (err: unknown) => err,
      );
      expect(isDatabaseUnavailable(failed), String(failed)).toBe(true);
      await waitFor(() => running(database.url, slow), (n) => n === 0, { what: "the statement given up on to end on the server" });
      // The connections still serve.
      expect(await db.sql.query("SELECT 1 AS n")).toEqual([{ n: 1 }]);
      expect(await db.prisma.$queryRaw`SELECT 2 AS n`).toEqual([{ n: 2 }]);
    } finally {
      await terminate(database.url, slow);
      await db.close();
    }
  });

  it("is a session's own when it is given a longer one, and the pool's again after it", { timeout: 120_000 }, async () => {
    const database = await createTestDatabase();
    if (!("url" in database)) throw new Error("expected PostgreSQL");
    // One connection: the session's and the pool's statements after it share it.
    const db = await openDatabase({ kind: "postgres", url: database.url }, { poolSize: 1, queryTimeoutMs: 2_000 });
    try {
      const inSession = await db.sql.session((sql) => sql.query<{ n: number }>("SELECT 7 AS n FROM pg_sleep(2.5)"), { queryTimeoutMs: 30_000 });
      expect(inSession).toEqual([{ n: 7 }]);
      const after = await db.sql.query("SELECT pg_sleep(2.5)").then(
        () => null,
        (err: unknown) => err,
      );
      expect(isDatabaseUnavailable(after), String(after)).toBe(true);
    } finally {
      await terminate(database.url, "SELECT pg_sleep(2.5)");
      await db.close();
    }
  });
});
