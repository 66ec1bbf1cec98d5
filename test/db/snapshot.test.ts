import { describe, expect, it } from "vitest";
import { openDatabase } from "../../src/db/client.js";
import { migrate } from "../../src/db/migrate.js";
import { skipDatabaseIndependent } from "../support/database-independent.js";
import { createTestDatabase } from "../support/app.js";
import { lendPglite } from "../support/pglite-pool.js";

// PGlite's own, whatever the run's database: a PostgreSQL run would repeat the PGlite run's test (support/database-independent.ts).
describe.skipIf(skipDatabaseIndependent)("PGlite snapshots", () => {
  it("start a database with the snapshot's tables and data, so tests need not migrate again", async () => {
    const source = await openDatabase({ kind: "pglite", dataDir: null });
    await migrate(source.sql);
    await source.sql.script("INSERT INTO organizations (id, name) VALUES ('00000000-0000-4000-8000-000000000001', 'snap')");
    const snapshot = await source.snapshot!();
    await source.close();

    const copy = await openDatabase({ kind: "pglite", dataDir: null }, { pgliteSnapshot: snapshot });
    try {
      expect(await copy.sql.query("SELECT name FROM organizations")).toEqual([{ name: "snap" }]);
      expect(await migrate(copy.sql)).toEqual([]);
    } finally {
      await copy.close();
    }
    // Two embedded databases start here (about 3 s each on a quiet machine, ten times that on a loaded one).
  }, 180_000);
});

// The pool test apps take their embedded databases from (support/pglite-pool.ts): PGlite runs only.
describe.skipIf(Boolean(process.env.TEST_DATABASE_URL))("lent embedded databases", () => {
  it("come back as the snapshot left them, and one whose schema a test changed is closed, not lent again", async () => {
    const db = await createTestDatabase();
    if (!("snapshot" in db)) throw new Error("expected a PGlite snapshot");
    const first = await lendPglite(db.snapshot);
    await first.pglite.exec(`INSERT INTO organizations (id, name) VALUES ('00000000-0000-4000-8000-000000000001', 'left behind')`);
    const [{ id }] = (await first.pglite.query<{ id: string }>(`SELECT nextval(pg_get_serial_sequence('revision_events', 'id'))::text AS id`)).rows as [{ id: string }];
    await first.pglite.exec("BEGIN; SET LOCAL statement_timeout = 1; PREPARE leftover AS SELECT 1");
    await first.giveBack();

    // The same database, lent again: empty, its sequences started again, its session new.
    const second = await lendPglite(db.snapshot);
    expect(second.pglite).toBe(first.pglite);
    expect((await second.pglite.query("SELECT * FROM organizations")).rows).toEqual([]);
    expect((await second.pglite.query<{ id: string }>(`SELECT nextval(pg_get_serial_sequence('revision_events', 'id'))::text AS id`)).rows).toEqual([{ id }]);
    expect((await second.pglite.query("SELECT name FROM pg_prepared_statements")).rows).toEqual([]);

    // A trigger left behind: that database is closed, and the next one lent is another.
    await second.pglite.exec(`CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'no'; END $$;
      CREATE TRIGGER refuse BEFORE INSERT ON organizations FOR EACH ROW EXECUTE FUNCTION refuse()`);
    await second.giveBack();
    expect(second.pglite.closed).toBe(true);
    const third = await lendPglite(db.snapshot);
    try {
      expect(third.pglite).not.toBe(second.pglite);
      await third.pglite.exec(`INSERT INTO organizations (id, name) VALUES ('00000000-0000-4000-8000-000000000002', 'allowed')`);
    } finally {
      await third.giveBack();
    }
  }, 180_000);

  it("are out of reach of the Database they were lent to once it is closed: a late statement fails as on a closed one", async () => {
    const db = await createTestDatabase();
    if (!("snapshot" in db)) throw new Error("expected a PGlite snapshot");
    const lease = await lendPglite(db.snapshot);
    const database = await openDatabase({ kind: "pglite", dataDir: null }, { pgliteLease: lease });
    await database.sql.script(`INSERT INTO organizations (id, name) VALUES ('00000000-0000-4000-8000-000000000003', 'mine')`);
    await database.close();
    await expect(database.sql.query("SELECT 1")).rejects.toThrow();
    await expect(database.prisma.organization.count()).rejects.toThrow();
    // The next borrower's database is untouched by the late statements, and as new.
    const next = await lendPglite(db.snapshot);
    try {
      expect(next.pglite).toBe(lease.pglite);
      expect((await next.pglite.query("SELECT * FROM organizations")).rows).toEqual([]);
    } finally {
      await next.giveBack();
    }
  }, 180_000);
});
