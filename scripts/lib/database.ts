import { existsSync } from "node:fs";
import type { Config } from "../../src/config.js";
import { type Database, openDatabase, redactUrl, unreachableDatabase } from "../../src/db/client.js";
import { lockDataDir, StartupError } from "../../src/db/data-dir-lock.js";
import { isDatabaseUnavailable } from "../../src/core/prisma-errors.js";

/**
 * How long one statement of a script may go unanswered, instead of the service's 20 s: the rotation
 * counts every sealed column of whole tables at its end, and a person waits at the terminal anyway.
 */
const SCRIPT_QUERY_TIMEOUT_MS = 600_000;

/**
 * The service's database, as a command-line script (`npm run keys`, `npm run secrets:rotate`) opens
 * it: PostgreSQL (DATABASE_URL) beside the running replicas; embedded PGlite only while no other
 * process has DATA_DIR, whose lock it holds until close(). A folder in use throws StartupError, which
 * names the process that has it (a second process inside PGlite's folder could corrupt it).
 */
export async function openScriptDatabase(config: Config, command: string): Promise<{ db: Database; close(): Promise<void> }> {
  // The service makes its embedded database at its first start; a script opening a DATA_DIR without
  // one (mistyped, say) would make an empty one there, and act on it as if it were the service's.
  if (config.database.kind === "pglite" && config.database.dataDir && !existsSync(config.database.dataDir)) {
    throw new StartupError(
      `There is no database in DATA_DIR ${config.dataDir}: start the service there once (it creates one), or set DATA_DIR (or DATABASE_URL) to the service's.`,
    );
  }
  const lock = config.database.kind === "pglite" && config.database.dataDir ? lockDataDir(config.dataDir, command) : null;
  let db: Database;
  try {
    db = await openDatabase(config.database, { poolSize: 2, queryTimeoutMs: SCRIPT_QUERY_TIMEOUT_MS });
  } catch (err) {
    lock?.release();
    throw err;
  }
  if (config.database.kind === "postgres") {
    try {
      await refuseForeignDatabase(db, config.database.url);
    } catch (err) {
      await db.close().catch(() => undefined);
      throw err;
    }
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

/**
 * The PostgreSQL database at DATABASE_URL, as a script may act on it: one the service has run on (its
 * migrations table is there). Another (mistyped, or a new one) is refused and left as it was, rather
 * than given the service's tables; one that cannot be reached is said in one line.
 */
async function refuseForeignDatabase(db: Database, url: string): Promise<void> {
  let rows: { migrated: boolean }[];
  try {
    rows = await db.sql.query<{ migrated: boolean }>(`SELECT to_regclass('public._prisma_migrations') IS NOT NULL AS migrated`);
  } catch (err) {
    if (!isDatabaseUnavailable(err)) throw err;
    throw new StartupError(unreachableDatabase(url, err));
  }
  if (!rows[0]?.migrated) {
    throw new StartupError(
      `DATABASE_URL=${redactUrl(url)} holds no control plane database (the service has never run on it): start the service on it once, or set DATABASE_URL to the service's.`,
    );
  }
}
