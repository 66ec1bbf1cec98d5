import type { Config } from "../../src/config.js";
import { type Database, openDatabase } from "../../src/db/client.js";
import { lockDataDir } from "../../src/db/data-dir-lock.js";

/**
 * The service's database, as a command-line script (`npm run keys`, `npm run secrets:rotate`) opens
 * it: PostgreSQL (DATABASE_URL) beside the running replicas; embedded PGlite only while no other
 * process has DATA_DIR, whose lock it holds until close(). A folder in use throws StartupError, which
 * names the process that has it (a second process inside PGlite's folder could corrupt it).
 */
export async function openScriptDatabase(config: Config, command: string): Promise<{ db: Database; close(): Promise<void> }> {
  const lock = config.database.kind === "pglite" && config.database.dataDir ? lockDataDir(config.dataDir, command) : null;
  let db: Database;
  try {
    db = await openDatabase(config.database, { poolSize: 2 });
  } catch (err) {
    lock?.release();
    throw err;
  }
  return {
    db,
    async close() {
      try {
        await db.close();
      } finally {
        lock?.release();
      }
    },
  };
}
