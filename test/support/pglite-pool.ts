import { PGlite } from "@electric-sql/pglite";
import type { PGliteLease } from "../../src/db/client.js";

/**
 * Embedded databases reused across the test files of a worker (vitest runs them one after another in
 * a process whose modules they share: vitest.config.ts, isolate: false). Opening one from the migrated
 * snapshot costs about a second of CPU, and nearly every test file opens one: a fifth of a PGlite run's
 * CPU. An app that startTestApp built on a lent database hands it back when it stops; it is lent again
 * once it is as the snapshot left it: its session reset (DISCARD ALL: settings, prepared statements,
 * locks) and every table emptied. One whose schema or applied migrations a test changed (a trigger
 * that refuses writes left behind, say) is closed instead, as is one a test closed itself.
 *
 * Closing an app's Database hands a lent one back rather than closing it, and that Database can no
 * longer reach it (src/db/client.ts): to the app, closed. A test that closes its app's database to see
 * what follows (test/app/health.test.ts) sees what it would with a database of its own.
 */
const idle: PGlite[] = [];
/** The schema and migrations of a database just opened from the snapshot. */
let pristine: Promise<string> | null = null;

export async function lendPglite(snapshot: Blob): Promise<PGliteLease> {
  const pglite = idle.pop() ?? (await PGlite.create({ loadDataDir: snapshot }));
  pristine ??= schemaOf(pglite);
  await pristine;
  let given = false;
  return {
    pglite,
    async giveBack() {
      if (given) return;
      given = true;
      if (await emptied(pglite)) idle.push(pglite);
    },
  };
}

async function emptied(pglite: PGlite): Promise<boolean> {
  if (pglite.closed) return false;
  try {
    // A transaction a stopped app left open ends (outside one, ROLLBACK only warns). Apart: one exec is one transaction.
    await pglite.exec("ROLLBACK");
    await pglite.exec("DISCARD ALL");
    if ((await schemaOf(pglite)) !== (await pristine)) throw new Error("the schema or migrations changed");
    const { rows } = await pglite.query<{ name: string }>(
      `SELECT format('%I', relname) AS name FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relkind = 'r' AND relname <> '_prisma_migrations'`,
    );
    await pglite.exec(`TRUNCATE ${rows.map((r) => r.name).join(", ")} RESTART IDENTITY CASCADE`);
    return true;
  } catch {
    await pglite.close().catch(() => {});
    return false;
  }
}

/** What a test could leave changed beyond rows: relations and their columns (options included), indexes, constraints, triggers, functions, roles, settings, migrations. */
async function schemaOf(pglite: PGlite): Promise<string> {
  const { rows } = await pglite.query<{ schema: string }>(`
    SELECT md5(string_agg(item, E'\\n' ORDER BY item)) AS schema FROM (
      SELECT format('%s %s.%s %s %s', c.relkind, n.nspname, c.relname, c.reloptions,
               (SELECT string_agg(format('%s %s %s %s %s', a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, pg_get_expr(d.adbin, d.adrelid), a.attoptions), ', ' ORDER BY a.attnum)
                FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
                WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped)) AS item
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%'
      UNION ALL SELECT 'index ' || pg_get_indexdef(indexrelid) FROM pg_index WHERE indrelid >= 16384
      UNION ALL SELECT format('constraint %s %s', conname, pg_get_constraintdef(oid)) FROM pg_constraint WHERE connamespace >= 16384 OR conrelid >= 16384
      UNION ALL SELECT format('trigger %s %s %s', tgname, tgrelid::regclass, tgenabled) FROM pg_trigger WHERE NOT tgisinternal
      UNION ALL SELECT format('function %s %s', oid::regprocedure, md5(prosrc)) FROM pg_proc WHERE oid >= 16384
      UNION ALL SELECT format('namespace %s', nspname) FROM pg_namespace
      UNION ALL SELECT format('role %s %s', rolname, rolconfig) FROM pg_roles
      UNION ALL SELECT format('setting %s %s %s', setdatabase, setrole, setconfig) FROM pg_db_role_setting
      UNION ALL SELECT format('database %s %s', datname, datallowconn) FROM pg_database
      UNION ALL SELECT format('migration %s %s %s %s', migration_name, checksum, finished_at, rolled_back_at) FROM _prisma_migrations
    ) items`);
  return rows[0]!.schema;
}
