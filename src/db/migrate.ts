import { createHash, randomUUID } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import type { Sql } from "./client.js";

export const MIGRATIONS_DIR = fileURLToPath(new URL("../../prisma/migrations/", import.meta.url));

/** The table and lock Prisma Migrate uses, so `prisma migrate deploy` and this agree on what is applied. */
const PRISMA_MIGRATIONS_TABLE = `
CREATE TABLE IF NOT EXISTS "_prisma_migrations" (
    "id"                    VARCHAR(36) PRIMARY KEY NOT NULL,
    "checksum"              VARCHAR(64) NOT NULL,
    "finished_at"           TIMESTAMPTZ,
    "migration_name"        VARCHAR(255) NOT NULL,
    "logs"                  TEXT,
    "rolled_back_at"        TIMESTAMPTZ,
    "started_at"            TIMESTAMPTZ NOT NULL DEFAULT now(),
    "applied_steps_count"   INTEGER NOT NULL DEFAULT 0
)`;
const PRISMA_ADVISORY_LOCK = 72707369;
/**
 * How long one statement of the migration session may go unanswered, instead of the pool's 20 s
 * (QUERY_TIMEOUT_MS): a migration may rewrite a large table, and the advisory lock waits for another
 * replica's migrations. A database lost meanwhile still ends it sooner, by TCP keepalive.
 */
export const MIGRATION_QUERY_TIMEOUT_MS = 3_600_000;

export interface Migration {
  name: string;
  sql: string;
  checksum: string;
}

export async function readMigrations(dir = MIGRATIONS_DIR): Promise<Migration[]> {
  const entries = await readdir(dir, { withFileTypes: true });
  const names = entries.filter((e) => e.isDirectory()).map((e) => e.name).sort();
  return Promise.all(
    names.map(async (name) => {
      const sql = await readFile(`${dir}${name}/migration.sql`, "utf8");
      return { name, sql, checksum: createHash("sha256").update(sql).digest("hex") };
    }),
  );
}

/**
 * Applies every migration not yet recorded, each in its own transaction, under Prisma's advisory
 * lock so that replicas starting together apply each migration once. Returns the names applied.
 *
 * A migration that fails is rolled back whole and recorded nowhere: its error (the database's, as
 * `cause`) is thrown under its name, and the next start tries it again. Prisma Migrate would record
 * it as failed, which stops `prisma migrate deploy` (P3009) until someone says what a half-applied
 * script left behind; here there is nothing left behind to say anything about.
 */
export async function migrate(db: Sql, migrations?: Migration[]): Promise<string[]> {
  const all = migrations ?? (await readMigrations());
  return db.session((sql) => applyUnderLock(sql, all), { queryTimeoutMs: MIGRATION_QUERY_TIMEOUT_MS });
}

async function applyUnderLock(sql: Sql, all: Migration[]): Promise<string[]> {
  await sql.script(`SELECT pg_advisory_lock(${PRISMA_ADVISORY_LOCK})`);
  let applied: string[];
  try {
    applied = await applyPending(sql, all);
  } catch (err) {
    // The session lock outlives the session's transactions: released here, or a pooled connection
    // would keep it and the next start would wait on it. The first error is the one to tell; one
    // from the unlock (a lost connection, which takes the lock with it) would only hide it.
    await sql.script(`SELECT pg_advisory_unlock(${PRISMA_ADVISORY_LOCK})`).catch(() => {});
    throw err;
  }
  await sql.script(`SELECT pg_advisory_unlock(${PRISMA_ADVISORY_LOCK})`);
  return applied;
}

async function applyPending(sql: Sql, all: Migration[]): Promise<string[]> {
  const applied: string[] = [];
  await sql.script(PRISMA_MIGRATIONS_TABLE);
  const byName = await recordedMigrations(sql);
  for (const m of all) {
    const recorded = byName.get(m.name);
    if (recorded !== undefined) {
      if (recorded !== m.checksum) throw new Error(`migration ${m.name} was changed after it was applied`);
      continue;
    }
    try {
      await sql.script(
        `BEGIN;\n${m.sql}\n;INSERT INTO "_prisma_migrations" (id, checksum, finished_at, migration_name, applied_steps_count) ` +
          `VALUES ('${randomUUID()}', '${m.checksum}', now(), '${m.name.replace(/'/g, "''")}', 1);\nCOMMIT;`,
      );
    } catch (err) {
      // A statement that fails leaves the transaction open and aborted: every later statement on this
      // session would fail with 25P02 until it ends. (A COMMIT that fails has ended it already; the
      // ROLLBACK is then a warning.) A ROLLBACK that fails too has lost the connection, and the
      // transaction with it.
      await sql.script("ROLLBACK").catch(() => {});
      throw migrationFailed(m.name, err);
    }
    applied.push(m.name);
  }
  return applied;
}

/** The database's error under the migration's name; the error itself (SQLSTATE, position) is its cause. */
function migrationFailed(name: string, err: unknown): Error {
  const e = err as { message?: unknown; detail?: unknown; hint?: unknown };
  const message = typeof e?.message === "string" ? e.message : String(err);
  const more = [e?.detail, e?.hint].filter((s): s is string => typeof s === "string" && s !== "");
  return new Error(`migration ${name} failed: ${message}${more.length > 0 ? ` (${more.join("; ")})` : ""}`, { cause: err });
}

/** The migrations recorded as applied, by name, with their checksums. */
async function recordedMigrations(sql: Sql): Promise<Map<string, string>> {
  const rows = await sql.query<{ migration_name: string; checksum: string }>(
    `SELECT migration_name, checksum FROM "_prisma_migrations" WHERE finished_at IS NOT NULL AND rolled_back_at IS NULL`,
  );
  return new Map(rows.map((r) => [r.migration_name, r.checksum]));
}

/** True when every migration on disk is recorded as applied. */
export async function migrationsApplied(sql: Sql, migrations: Migration[]): Promise<boolean> {
  const recorded = await recordedMigrations(sql);
  return migrations.every((m) => recorded.has(m.name));
}

/**
 * Migrations recorded (applied, or begun and left unfinished by Prisma Migrate) that are not on disk,
 * oldest first: a newer version of the service made them, and this one (a rollback, or an older
 * replica during a rolling upgrade) runs on a schema it was not written for. Call after migrate(),
 * which has made sure the table exists.
 */
export async function unknownMigrations(sql: Sql, migrations: Migration[]): Promise<string[]> {
  const known = new Set(migrations.map((m) => m.name));
  // Unfinished ones too: Prisma Migrate records a migration that failed part-way, its changes made.
  const rows = await sql.query<{ migration_name: string }>(`SELECT migration_name FROM "_prisma_migrations" WHERE rolled_back_at IS NULL`);
  return [...new Set(rows.map((r) => r.migration_name))].filter((name) => !known.has(name)).sort();
}
