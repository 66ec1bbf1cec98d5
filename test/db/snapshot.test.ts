import { describe, expect, it } from "vitest";
import { openDatabase } from "../../src/db/client.js";
import { migrate } from "../../src/db/migrate.js";
import { skipDatabaseIndependent } from "../support/database-independent.js";

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
