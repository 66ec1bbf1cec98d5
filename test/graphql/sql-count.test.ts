import pg from "pg";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { LISTENER_APPLICATION_NAME } from "../../src/events/postgres.js";
import { createTestDatabase, startTestApp, type TestApp } from "../support/app.js";
import { countSql } from "./sql-count.js";

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({ PIPELINE_WORKER: "off" });
});
afterAll(() => t.close());

// The statement counts of the efficiency tests rest on this: the service's own background work (the
// event bus's liveness check, periodic sweeps) runs whenever its timers say, and a request's count
// must not take it in.
describe("countSql", () => {
  it("counts within a piece of work only the statements it makes, not those of work that runs meanwhile", async () => {
    const query = (text: string) => t.app.db.sql.query(text);
    const sql = countSql();
    try {
      let release!: () => void;
      // Work that is not the measured one's, and runs in the middle of it.
      const meanwhile = new Promise<void>((resolve) => (release = resolve)).then(() => query("SELECT 2"));
      const { result, statements } = await sql.within(async () => {
        await query("SELECT 1");
        release();
        await meanwhile;
        await query("SELECT 1");
        return "done";
      });
      expect(result).toBe("done");
      expect(statements).toBe(2);
      expect(sql.count).toBe(3);
    } finally {
      sql.restore();
    }
  });

  it("leaves out the event bus's listening session, whose liveness check runs every 10 s (PostgreSQL)", async (ctx) => {
    if (!inject("pgTemplate")) ctx.skip("needs PostgreSQL (TEST_DATABASE_URL): PGlite's bus has no session of its own");
    const db = await createTestDatabase();
    const url = "url" in db ? db.url : "";
    const listening = new pg.Client({ connectionString: url, application_name: LISTENER_APPLICATION_NAME });
    const other = new pg.Client({ connectionString: url, application_name: "something-else" });
    await Promise.all([listening.connect(), other.connect()]);
    const sql = countSql();
    try {
      await listening.query("SELECT 1");
      await other.query("SELECT 1");
      expect(sql.count).toBe(1);
    } finally {
      sql.restore();
      await Promise.all([listening.end(), other.end()]);
    }
  });
});
