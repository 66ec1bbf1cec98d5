import { afterEach, describe, expect, it } from "vitest";
import { type Database, openDatabase } from "../../src/db/client.js";
import { Vacuum } from "../../src/db/vacuum.js";
import { createLogger } from "../../src/logger.js";
import { createTestDatabase, startTestApp, type TestApp } from "../support/app.js";

/** Updates every row of `churn` `times` times: each update leaves a dead row version behind. */
async function churn(db: Database, times: number) {
  for (let i = 0; i < times; i++) await db.sql.query(`UPDATE churn SET v = v + 1`);
}
const size = async (db: Database) => Number((await db.sql.query<{ size: string }>(`SELECT pg_table_size('churn')::text AS size`))[0]!.size);

const setUp = (db: Database) => db.sql.script(`CREATE TABLE churn (id int PRIMARY KEY, v int NOT NULL); INSERT INTO churn SELECT g, 0 FROM generate_series(1, 1000) g;`);

// Embedded PGlite has no autovacuum: without one, a table updated over and over only grows.
describe.skipIf(process.env.TEST_DATABASE_URL)("vacuuming embedded PGlite", () => {
  let db: Database | null = null;
  let t: TestApp | null = null;
  afterEach(async () => {
    await db?.close();
    await t?.close();
    db = t = null;
  });

  it("reclaims dead row versions, so that a table updated again and again stops growing", async () => {
    const seed = await createTestDatabase();
    if (!("snapshot" in seed)) throw new Error("expected a PGlite snapshot");
    db = await openDatabase({ kind: "pglite", dataDir: null }, { pgliteSnapshot: seed.snapshot });
    await setUp(db);
    await churn(db, 50);
    const grown = await size(db);
    // Without vacuum the same churn again would double the table.
    await churn(db, 50);
    expect(await size(db)).toBeGreaterThan(1.8 * grown);

    const vacuum = new Vacuum(db.sql, createLogger("silent"));
    await vacuum.run();
    const vacuumed = await size(db);
    await churn(db, 50);
    expect(await size(db)).toBeLessThan(1.2 * vacuumed);
    await vacuum.stop();
  });

  it("is done by an app on PGlite by itself, on a timer", async () => {
    t = await startTestApp({ PIPELINE_WORKER: "off" }, undefined, { vacuumEveryMs: 100 });
    await setUp(t.app.db);
    await churn(t.app.db, 50);
    const grown = await size(t.app.db);
    for (let round = 0; round < 4; round++) {
      await new Promise((r) => setTimeout(r, 150));
      await churn(t.app.db, 50);
    }
    // Four more rounds of the same churn: without the vacuum, five times the size.
    expect(await size(t.app.db)).toBeLessThan(2 * grown);
  });
});
