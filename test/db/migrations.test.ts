import { createHash, randomUUID } from "node:crypto";
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { get_dmmf } from "@prisma/prisma-schema-wasm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Database, openDatabase, type Sql } from "../../src/db/client.js";
import { migrate, MIGRATIONS_DIR, readMigrations, unknownMigrations } from "../../src/db/migrate.js";
import { buildApp } from "../../src/app.js";
import { loadConfig } from "../../src/config.js";
import { createLogger } from "../../src/logger.js";
import { onThisRunsBackend, TEST_JWT_SECRET, TEST_SECRETS_KEY, THIS_RUNS_BACKEND } from "../support/app.js";
import { adminQuery, withDatabase } from "../support/global-setup.js";
import { skipDatabaseIndependent } from "../support/database-independent.js";
import { customHost } from "../../src/core/serving-hosts.js";

/** The parts of Prisma's DMMF this test reads. */
interface DmmfField {
  name: string;
  dbName?: string | null;
  kind: "scalar" | "object" | "enum" | "unsupported";
  type: string;
  isList: boolean;
  isRequired: boolean;
  isUpdatedAt: boolean;
  hasDefaultValue: boolean;
  default?: unknown;
  nativeType?: [string, string[]] | null;
  relationFromFields?: string[];
  relationToFields?: string[];
  relationOnDelete?: string;
  relationOnUpdate?: string;
}
interface DmmfModel {
  name: string;
  dbName: string | null;
  fields: DmmfField[];
}
interface DmmfIndex {
  model: string;
  type: "id" | "unique" | "normal" | "fulltext";
  dbName?: string | null;
  fields: { name: string; sortOrder?: "asc" | "desc" }[];
}

const dmmf = JSON.parse(
  get_dmmf(JSON.stringify({ prismaSchema: readFileSync(new URL("../../prisma/schema.prisma", import.meta.url), "utf8") })),
) as { datamodel: { models: DmmfModel[]; indexes: DmmfIndex[] } };
const models = dmmf.datamodel.models;
const tableOf = (m: DmmfModel) => m.dbName ?? m.name;
const columnOf = (f: DmmfField) => f.dbName ?? f.name;
const model = (name: string) => models.find((m) => m.name === name)!;
const column = (m: DmmfModel, field: string) => columnOf(m.fields.find((f) => f.name === field)!);

/** The SQL type Prisma's migrations give a scalar field (format_type's spelling). */
function sqlType(f: DmmfField): string {
  const [native, args] = f.nativeType ?? [null, []];
  const base = (() => {
    if (native === "Uuid") return "uuid";
    if (native === "Timestamptz") return `timestamp(${args[0] ?? 6}) with time zone`;
    if (native) throw new Error(`no rule for native type ${native} of ${f.name}`);
    const defaults: Record<string, string> = {
      String: "text",
      Int: "integer",
      BigInt: "bigint",
      Boolean: "boolean",
      Json: "jsonb",
      DateTime: "timestamp(3) without time zone",
      Float: "double precision",
      Decimal: "numeric(65,30)",
      Bytes: "bytea",
    };
    const type = defaults[f.type];
    if (!type) throw new Error(`no rule for type ${f.type} of ${f.name}`);
    return type;
  })();
  return f.isList ? `${base}[]` : base;
}

/** The column default Prisma writes in SQL, or null for none (uuid() and cuid() are made by the client). */
function sqlDefault(f: DmmfField, table: string): string | RegExp | null {
  if (!f.hasDefaultValue) return null;
  const d = f.default;
  if (typeof d === "object" && d !== null && !Array.isArray(d) && "name" in d) {
    const name = (d as { name: string }).name;
    if (name === "now") return "CURRENT_TIMESTAMP";
    if (name === "autoincrement") return new RegExp(`^nextval\\('"?${table}_${columnOf(f)}_seq"?'::regclass\\)$`);
    if (["uuid", "cuid", "nanoid", "ulid"].includes(name)) return null;
    throw new Error(`no rule for default ${name}() of ${f.name}`);
  }
  if (Array.isArray(d)) {
    if (d.length > 0) throw new Error(`no rule for a non-empty list default of ${f.name}`);
    return `ARRAY[]::${sqlType(f)}`;
  }
  if (typeof d === "string") return `'${d.replace(/'/g, "''")}'::text`;
  return String(d);
}

const ON_ACTION: Record<string, string> = { a: "NoAction", r: "Restrict", c: "Cascade", n: "SetNull", d: "SetDefault" };

interface Catalog {
  tables: string[];
  columns: { table: string; column: string; type: string; notnull: boolean; default: string | null }[];
  indexes: { table: string; name: string; unique: boolean; primary: boolean; columns: string[]; desc: boolean[] }[];
  foreignKeys: { table: string; name: string; columns: string[]; refTable: string; refColumns: string[]; onDelete: string; onUpdate: string }[];
}

async function readCatalog(sql: Sql): Promise<Catalog> {
  const tables = await sql.query<{ name: string }>(
    `SELECT c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p', 'v', 'm', 'f') ORDER BY 1`,
  );
  const columns = await sql.query<Catalog["columns"][number]>(
    `SELECT c.relname AS table, a.attname AS column, format_type(a.atttypid, a.atttypmod) AS type,
            a.attnotnull AS notnull, pg_get_expr(d.adbin, d.adrelid) AS default
     FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
     LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
     WHERE n.nspname = current_schema() AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped
     ORDER BY 1, 2`,
  );
  const indexes = await sql.query<Catalog["indexes"][number]>(
    `SELECT t.relname AS table, i.relname AS name, ix.indisunique AS unique, ix.indisprimary AS primary,
            json_agg(a.attname ORDER BY k.ord) AS columns,
            json_agg((ix.indoption[k.ord - 1] & 1) = 1 ORDER BY k.ord) AS desc
     FROM pg_index ix JOIN pg_class i ON i.oid = ix.indexrelid JOIN pg_class t ON t.oid = ix.indrelid
     JOIN pg_namespace n ON n.oid = t.relnamespace
     CROSS JOIN LATERAL unnest(ix.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord)
     JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum
     WHERE n.nspname = current_schema() AND t.relname <> '_prisma_migrations'
     GROUP BY 1, 2, 3, 4 ORDER BY 1, 2`,
  );
  const foreignKeys = await sql.query<Catalog["foreignKeys"][number]>(
    `SELECT t.relname AS table, con.conname AS name, r.relname AS "refTable",
            (SELECT json_agg(a.attname ORDER BY k.ord) FROM unnest(con.conkey) WITH ORDINALITY k(n, ord)
               JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.n) AS columns,
            (SELECT json_agg(a.attname ORDER BY k.ord) FROM unnest(con.confkey) WITH ORDINALITY k(n, ord)
               JOIN pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.n) AS "refColumns",
            con.confdeltype AS "onDelete", con.confupdtype AS "onUpdate"
     FROM pg_constraint con JOIN pg_class t ON t.oid = con.conrelid JOIN pg_class r ON r.oid = con.confrelid
     JOIN pg_namespace n ON n.oid = t.relnamespace
     WHERE n.nspname = current_schema() AND con.contype = 'f' ORDER BY 1, 2`,
  );
  return {
    tables: tables.map((t) => t.name),
    columns,
    indexes,
    foreignKeys: foreignKeys.map((fk) => ({ ...fk, onDelete: ON_ACTION[fk.onDelete]!, onUpdate: ON_ACTION[fk.onUpdate]! })),
  };
}

/** What the catalog must hold according to schema.prisma, with Prisma's naming conventions. */
function expectedFromSchema() {
  const columns = models.flatMap((m) =>
    m.fields
      .filter((f) => f.kind === "scalar" || f.kind === "enum")
      .map((f) => ({
        table: tableOf(m),
        column: columnOf(f),
        type: sqlType(f),
        // Prisma leaves scalar list columns nullable.
        notnull: f.isRequired && !f.isList,
        default: sqlDefault(f, tableOf(m)),
      })),
  );
  const indexes = dmmf.datamodel.indexes.map((i) => {
    const m = model(i.model);
    const cols = i.fields.map((f) => column(m, f.name));
    const suffix = { id: "pkey", unique: "key", normal: "idx", fulltext: "idx" }[i.type];
    return {
      table: tableOf(m),
      name: i.dbName ?? (i.type === "id" ? `${tableOf(m)}_pkey` : `${tableOf(m)}_${cols.join("_")}_${suffix}`.slice(0, 63)),
      unique: i.type === "id" || i.type === "unique",
      primary: i.type === "id",
      columns: cols,
      desc: i.fields.map((f) => f.sortOrder === "desc"),
    };
  });
  const foreignKeys = models.flatMap((m) =>
    m.fields
      .filter((f) => f.kind === "object" && (f.relationFromFields?.length ?? 0) > 0)
      .map((f) => {
        const cols = f.relationFromFields!.map((name) => column(m, name));
        const target = model(f.type);
        return {
          table: tableOf(m),
          name: `${tableOf(m)}_${cols.join("_")}_fkey`,
          columns: cols,
          refTable: tableOf(target),
          refColumns: f.relationToFields!.map((name) => column(target, name)),
          onDelete: f.relationOnDelete ?? (f.isRequired ? "Restrict" : "SetNull"),
          onUpdate: f.relationOnUpdate ?? "Cascade",
        };
      }),
  );
  return { columns, indexes, foreignKeys };
}

const byKey = <T extends { table: string }>(rows: T[], key: (r: T) => string) =>
  [...rows].sort((a, b) => key(a).localeCompare(key(b)));

const sha256 = (text: string) => createHash("sha256").update(text).digest("hex");
const migrationDirs = readdirSync(MIGRATIONS_DIR, { withFileTypes: true })
  .filter((e) => e.isDirectory())
  .map((e) => e.name)
  .sort();

/**
 * An empty database of each kind this run can reach: PGlite always, PostgreSQL with TEST_DATABASE_URL;
 * but PGlite not in CI's PostgreSQL run, which would repeat the PGlite run's tests of it (support/database-independent.ts).
 */
const targets: { name: string; open: () => Promise<{ db: Database; drop: () => Promise<void> }> }[] = [];
if (!skipDatabaseIndependent) {
  targets.push({
    name: "PGlite",
    open: async () => {
      const db = await openDatabase({ kind: "pglite", dataDir: null });
      return { db, drop: () => db.close() };
    },
  });
}
const adminUrl = process.env.TEST_DATABASE_URL;
if (adminUrl) {
  targets.push({
    name: "PostgreSQL",
    open: async () => {
      const name = `dcp_mig_${process.pid}_${Date.now()}`;
      await adminQuery(adminUrl, `CREATE DATABASE ${name}`);
      const db = await openDatabase({ kind: "postgres", url: withDatabase(adminUrl, name) }, { poolSize: 3 });
      return {
        db,
        drop: async () => {
          await db.close();
          await adminQuery(adminUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
        },
      };
    },
  });
}

describe.each(targets)("migrations on an empty $name database", (target) => {
  let db: Database;
  let drop: () => Promise<void>;
  let applied: string[];

  beforeAll(async () => {
    ({ db, drop } = await target.open());
    expect(await readCatalog(db.sql)).toEqual({ tables: [], columns: [], indexes: [], foreignKeys: [] });
    applied = await migrate(db.sql);
  });
  afterAll(() => drop());

  it("applies every migration folder, in order", () => {
    expect(migrationDirs.length).toBeGreaterThan(0);
    expect(applied).toEqual(migrationDirs);
  });

  it("creates exactly the tables and columns of schema.prisma, with their types, nullability and defaults", async () => {
    const catalog = await readCatalog(db.sql);
    expect(catalog.tables).toEqual([...models.map(tableOf), "_prisma_migrations"].sort());
    const actual = catalog.columns.filter((c) => c.table !== "_prisma_migrations");
    const key = (c: { table: string; column: string }) => `${c.table}.${c.column}`;
    const expected = byKey(expectedFromSchema().columns, key);
    expect(byKey(actual, key).map((c) => ({ ...c, default: expect.anything() }))).toEqual(
      expected.map((c) => ({ ...c, default: expect.anything() })),
    );
    for (const [n, want] of expected.entries()) {
      const got = byKey(actual, key)[n]!.default;
      if (want.default instanceof RegExp) expect(got, key(want)).toMatch(want.default);
      else expect(got, key(want)).toBe(want.default);
    }
  });

  it("has exactly the primary keys, unique constraints and indexes of schema.prisma, DESC columns included", async () => {
    const key = (i: { table: string; name: string }) => `${i.table}.${i.name}`;
    expect(byKey((await readCatalog(db.sql)).indexes, key)).toEqual(byKey(expectedFromSchema().indexes, key));
  });

  it("has exactly the foreign keys of schema.prisma, with their ON DELETE and ON UPDATE actions", async () => {
    const key = (f: { table: string; name: string }) => `${f.table}.${f.name}`;
    expect(byKey((await readCatalog(db.sql)).foreignKeys, key)).toEqual(byKey(expectedFromSchema().foreignKeys, key));
  });

  it("records each migration in _prisma_migrations with Prisma's checksum, the SHA-256 of migration.sql", async () => {
    const rows = await db.sql.query<{ migration_name: string; checksum: string; finished_at: Date | null; rolled_back_at: Date | null; applied_steps_count: number }>(
      `SELECT migration_name, checksum, finished_at, rolled_back_at, applied_steps_count FROM "_prisma_migrations" ORDER BY migration_name`,
    );
    expect(rows).toEqual(
      migrationDirs.map((name) => ({
        migration_name: name,
        checksum: sha256(readFileSync(join(MIGRATIONS_DIR, name, "migration.sql"), "utf8")),
        finished_at: expect.any(Date),
        rolled_back_at: null,
        applied_steps_count: 1,
      })),
    );
  });

  it("is idempotent: a second run applies nothing and records nothing", async () => {
    expect(await migrate(db.sql)).toEqual([]);
    const [{ count }] = (await db.sql.query<{ count: number }>(`SELECT count(*)::int AS count FROM "_prisma_migrations"`)) as [{ count: number }];
    expect(count).toBe(migrationDirs.length);
  });

  it("refuses a migration that was edited after it was applied, and changes nothing", async () => {
    const dir = mkdtempSync(join(tmpdir(), "dcp-mig-"));
    try {
      cpSync(MIGRATIONS_DIR, dir, { recursive: true });
      const first = join(dir, migrationDirs[0]!, "migration.sql");
      writeFileSync(first, `${readFileSync(first, "utf8")}\nCREATE TABLE "sneaky" ("id" INTEGER);\n`);
      const edited = await readMigrations(`${dir}/`);
      await expect(migrate(db.sql, edited)).rejects.toThrow(`migration ${migrationDirs[0]} was changed after it was applied`);
      expect((await readCatalog(db.sql)).tables).not.toContain("sneaky");
      // The advisory lock was released: a correct run still works.
      expect(await migrate(db.sql)).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  const failures = [
    {
      case: "one of its statements fails",
      sql: `CREATE TABLE "half_done" ("id" INTEGER);\nSELECT * FROM no_such_table_zz;`,
      error: 'relation "no_such_table_zz" does not exist',
      code: "42P01",
    },
    {
      case: "its COMMIT fails, on a deferred constraint",
      sql: `CREATE TABLE "half_done" ("id" INTEGER PRIMARY KEY, "parent" INTEGER REFERENCES "half_done" DEFERRABLE INITIALLY DEFERRED);\nINSERT INTO "half_done" VALUES (1, 2);`,
      error: 'insert or update on table "half_done" violates foreign key constraint',
      code: "23503",
    },
  ];
  it.each(failures)("a migration that fails ($case) fails with its own error under its name, leaves nothing of itself, and releases the lock", async ({ sql, error, code }) => {
    const bad = { name: "29990101000000_bad", sql, checksum: "x" };
    const expected = `migration ${bad.name} failed: ${error}`;
    // One connection, so that what is looked at afterwards is the session the migration ran on (PGlite is one).
    const one =
      db.kind === "pglite" ? db : await openDatabase({ kind: "postgres", url: (db.pool!.options as { connectionString: string }).connectionString }, { poolSize: 1 });
    try {
      const failure = await migrate(one.sql, [...(await readMigrations()), bad]).then(
        () => null,
        (err: unknown) => err as Error,
      );
      expect(failure?.message).toContain(expected);
      // The database's error itself, with its SQLSTATE, and not "current transaction is aborted" (25P02).
      expect(failure?.cause).toMatchObject({ code });
      // The session is out of the failed transaction, and no longer holds the migration lock.
      expect(await one.sql.query(`SELECT 1 AS alive`)).toEqual([{ alive: 1 }]);
      expect(
        await one.sql.query(
          `SELECT count(*)::int AS held FROM pg_locks WHERE locktype = 'advisory' AND objid = 72707369 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
        ),
      ).toEqual([{ held: 0 }]);
      // Nothing of it: no table, and no record in _prisma_migrations. Prisma Migrate records a failed
      // migration (finished_at and rolled_back_at NULL), which stops `prisma migrate deploy` (P3009) until
      // someone says what it left behind; this one was rolled back whole, so there is nothing to say.
      expect((await readCatalog(one.sql)).tables).not.toContain("half_done");
      expect(await db.sql.query(`SELECT migration_name FROM "_prisma_migrations" WHERE migration_name = $1`, [bad.name])).toEqual([]);
      // The next start (another connection, on PostgreSQL) is not kept waiting: it tries the migration again, and fails the same way.
      await expect(migrate(db.sql, [bad])).rejects.toThrow(expected);
      expect(await migrate(db.sql)).toEqual([]);
      const [{ count }] = (await db.sql.query<{ count: number }>(`SELECT count(*)::int AS count FROM "_prisma_migrations"`)) as [{ count: number }];
      expect(count).toBe(migrationDirs.length);
    } finally {
      if (one !== db) await one.close();
    }
  });

  it.runIf(target.name === "PostgreSQL")("applies each migration once when replicas migrate at the same time", async () => {
    const { db: fresh, drop: dropFresh } = await target.open();
    const other = await openDatabase({ kind: "postgres", url: (fresh.pool!.options as { connectionString: string }).connectionString }, { poolSize: 1 });
    try {
      const results = await Promise.all([migrate(fresh.sql), migrate(other.sql)]);
      expect(results.flat().sort()).toEqual(migrationDirs);
      const rows = await fresh.sql.query<{ migration_name: string }>(`SELECT migration_name FROM "_prisma_migrations"`);
      expect(rows.map((r) => r.migration_name).sort()).toEqual(migrationDirs);
    } finally {
      await other.close();
      await dropFresh();
    }
    // Every migration on a fresh database, twice over: seconds on a quiet machine, far more on a loaded one.
  }, 180_000);
});

/**
 * Inserts a row with `values`, filling every other column that needs one (NOT NULL, no default) with a
 * value of its type: rows as a migration of the past found them, without the code of then.
 */
async function insertFilled(sql: Sql, table: string, values: Record<string, unknown>): Promise<void> {
  const required = await sql.query<{ column_name: string; data_type: string }>(
    `SELECT column_name, data_type FROM information_schema.columns
     WHERE table_schema = current_schema() AND table_name = $1 AND is_nullable = 'NO' AND column_default IS NULL`,
    [table],
  );
  const filler = (type: string): unknown =>
    type === "uuid"
      ? randomUUID()
      : type.startsWith("timestamp")
        ? new Date().toISOString()
        : ({ boolean: false, integer: 0, bigint: 0, jsonb: "{}", ARRAY: "{}" }[type] ?? "x");
  const row = { ...Object.fromEntries(required.map((c) => [c.column_name, filler(c.data_type)])), ...values };
  const columns = Object.keys(row);
  await sql.query(`INSERT INTO ${table} (${columns.map((c) => `"${c}"`).join(", ")}) VALUES (${columns.map((_, i) => `$${i + 1}`).join(", ")})`, Object.values(row));
}

/** Ids of the rows the data-migration tests store (uuids ending in `n`). */
const idOf = (n: number) => `00000000-0000-0000-0000-${String(n).padStart(12, "0")}`;
const ORG = idOf(10);
const WORKSPACE = idOf(20);

/**
 * A fresh database migrated up to `name`, not including it, where `seed` stores rows as they were
 * then (in workspace WORKSPACE); then `name` and what follows, applied over them.
 */
async function acrossMigration(target: (typeof targets)[number], name: string, seed: (sql: Sql) => Promise<void>): Promise<{ sql: Sql; drop: () => Promise<void> }> {
  const { db, drop } = await target.open();
  try {
    const all = await readMigrations();
    const at = all.findIndex((m) => m.name === name);
    expect(at, name).toBeGreaterThan(0);
    await migrate(db.sql, all.slice(0, at));
    await insertFilled(db.sql, "organizations", { id: ORG });
    await insertFilled(db.sql, "workspaces", { id: WORKSPACE, organization_id: ORG });
    await seed(db.sql);
    expect(await migrate(db.sql)).toEqual(all.slice(at).map((m) => m.name));
    return { sql: db.sql, drop };
  } catch (err) {
    await drop();
    throw err;
  }
}

describe.each(targets)("data migrations on a $name database", (target) => {
  it("gives the revision events stored before 20261129060000 their revision's deployment", async () => {
    const [d1, d2, r1, r2, r3] = [31, 32, 41, 42, 43].map(idOf);
    const { sql, drop } = await acrossMigration(target, "20261129060000_revision_events_by_deployment", async (sql) => {
      for (const [d, name] of [[d1, "one"], [d2, "two"]]) await insertFilled(sql, "deployments", { id: d, workspace_id: WORKSPACE, name });
      for (const [r, d] of [[r1, d1], [r2, d1], [r3, d2]]) {
        await insertFilled(sql, "revisions", { id: r, workspace_id: WORKSPACE, deployment_id: d });
        await insertFilled(sql, "revision_events", { revision_id: r, to_status: "CREATING" });
      }
    });
    try {
      const events = await sql.query(`SELECT revision_id::text AS revision, deployment_id::text AS deployment FROM revision_events ORDER BY id`);
      expect(events).toEqual([
        { revision: r1, deployment: d1 },
        { revision: r2, deployment: d1 },
        { revision: r3, deployment: d2 },
      ]);
    } finally {
      await drop();
    }
  }, 180_000);

  it("gives the deployments stored before 20261207070000 their custom URL's host, as core reads it, duplicates kept", async () => {
    const urls = [
      "https://Agent.Example.com/x",
      "http://user:pw@Host.example:8443/p?q=1#f",
      "https://[::1]:8080/",
      "https://host.example?x=1",
      "https://host.example#top",
      "https://agent.example.com",
      "https://Dotted.example.com./p",
      null,
    ];
    const { sql, drop } = await acrossMigration(target, "20261207070000_deployment_custom_host", async (sql) => {
      for (const [n, url] of urls.entries()) {
        await insertFilled(sql, "deployments", { id: idOf(50 + n), workspace_id: WORKSPACE, name: `d${n}`, source_config: JSON.stringify(url === null ? {} : { custom_url: url }) });
      }
    });
    try {
      const hosts = await sql.query<{ custom_host: string | null }>(`SELECT custom_host FROM deployments ORDER BY id`);
      expect(hosts.map((h) => h.custom_host)).toEqual(urls.map(customHost));
      expect(urls.map(customHost)).toEqual(["agent.example.com", "host.example", "[::1]", "host.example", "host.example", "agent.example.com", "dotted.example.com", null]);
      // From then on the database keeps it, whoever writes the row (code of before this, which knows no
      // such column, included): a custom URL set, changed or dropped.
      const kept = async () => (await sql.query<{ custom_host: string | null }>(`SELECT custom_host FROM deployments WHERE id = $1`, [idOf(60)]))[0]!.custom_host;
      await insertFilled(sql, "deployments", { id: idOf(60), workspace_id: WORKSPACE, name: "later", source_config: JSON.stringify({ custom_url: "https://Later.example.org./x" }) });
      expect(await kept()).toBe("later.example.org");
      await sql.query(`UPDATE deployments SET source_config = $2 WHERE id = $1`, [idOf(60), JSON.stringify({ custom_url: "http://u@moved.example.org:81" })]);
      expect(await kept()).toBe("moved.example.org");
      await sql.query(`UPDATE deployments SET custom_host = 'forged.example.org' WHERE id = $1`, [idOf(60)]);
      expect(await kept()).toBe("moved.example.org");
      await sql.query(`UPDATE deployments SET source_config = '{}' WHERE id = $1`, [idOf(60)]);
      expect(await kept()).toBeNull();
      // The database's reading of a URL is core's, odd ones included.
      const odd = [
        "HTTPS://A.B.C", "https://x@y@z.example/", "https://[::1]", "https://a.example:99999", "https://%41.example", "https://bücher.example",
        "ftp://files.example", "https://", "not a url", "https://a.example./.", "https://a..example", "https://a.com\\@evil.example",
        `https://${"a".repeat(253)}/x`, `https://${"a".repeat(254)}/x`, `https://${"界".repeat(300)}.com`,
      ];
      for (const url of odd) {
        const [row] = await sql.query<{ host: string | null }>(`SELECT deployment_custom_host($1) AS host`, [url]);
        expect(row!.host, url).toBe(customHost(url));
      }
    } finally {
      await drop();
    }
  }, 180_000);

  it("numbers the log lines stored before 20261207100000 in their deployment's log, in commit order, and goes on from there", async () => {
    const [d1, d2, r1, r2, r3] = [71, 72, 81, 82, 83].map(idOf);
    const { sql, drop } = await acrossMigration(target, "20261207100000_log_line_numbers", async (sql) => {
      for (const [d, name] of [[d1, "one"], [d2, "two"]]) await insertFilled(sql, "deployments", { id: d, workspace_id: WORKSPACE, name });
      for (const [r, d] of [[r1, d1], [r2, d1], [r3, d2]]) await insertFilled(sql, "revisions", { id: r, workspace_id: WORKSPACE, deployment_id: d });
      // Interleaved as writers of the two deployments would have committed them (ids in commit order).
      for (const [r, d, kind] of [[r1, d1, "build"], [r3, d2, "build"], [r1, d1, "deploy"], [r2, d1, "build"], [r3, d2, "deploy"], [r2, d1, "build"]]) {
        await insertFilled(sql, "revision_logs", { revision_id: r, deployment_id: d, workspace_id: WORKSPACE, kind, level: "INFO", message: `${r} ${kind}` });
      }
    });
    try {
      const lines = await sql.query<{ deployment: string; line: string }>(`SELECT deployment_id::text AS deployment, line::text FROM revision_logs ORDER BY id`);
      expect(lines).toEqual([
        { deployment: d1, line: "1" },
        { deployment: d2, line: "1" },
        { deployment: d1, line: "2" },
        { deployment: d1, line: "3" },
        { deployment: d2, line: "2" },
        { deployment: d1, line: "4" },
      ]);
      // The next line of each deployment follows its last.
      await sql.query(`SELECT append_revision_logs($1::uuid, ARRAY['build'], ARRAY['INFO'], ARRAY['next'], ARRAY[]::text[])`, [r2]);
      await sql.query(`SELECT append_revision_logs($1::uuid, ARRAY['deploy', 'deploy'], ARRAY['INFO', 'INFO'], ARRAY['next', 'then'], ARRAY[]::text[])`, [r3]);
      const added = await sql.query<{ deployment: string; line: string; message: string }>(
        `SELECT deployment_id::text AS deployment, line::text, message FROM revision_logs WHERE message IN ('next', 'then') ORDER BY id`,
      );
      expect(added).toEqual([
        { deployment: d1, line: "5", message: "next" },
        { deployment: d2, line: "3", message: "next" },
        { deployment: d2, line: "4", message: "then" },
      ]);
    } finally {
      await drop();
    }
  }, 180_000);

  it("gives the OAuth flows and tokens stored before 20261129040000 their provider's endpoints of then", async () => {
    const [provider, bare] = [30, 31].map(idOf);
    const { sql, drop } = await acrossMigration(target, "20261129040000_oauth_grant_endpoints", async (sql) => {
      for (const [id, slug, revocation] of [[provider, "idp", "https://idp.example/revoke"], [bare, "bare", null]] as const) {
        await insertFilled(sql, "oauth_providers", {
          id, workspace_id: WORKSPACE, organization_id: ORG, provider_id: slug, token_url: `https://${slug}.example/token`, revocation_url: revocation,
        });
      }
      for (const [n, p] of [provider, bare].entries()) {
        await insertFilled(sql, "oauth_tokens", { workspace_id: WORKSPACE, oauth_provider_id: p });
        await insertFilled(sql, "oauth_flows", { workspace_id: WORKSPACE, oauth_provider_id: p, state_hash: `state-${n}` });
      }
    });
    try {
      const kept = (table: string) => sql.query(`SELECT oauth_provider_id::text AS provider, token_url, revocation_url FROM ${table} ORDER BY oauth_provider_id`);
      const expected = [
        { provider, token_url: "https://idp.example/token", revocation_url: "https://idp.example/revoke" },
        { provider: bare, token_url: "https://bare.example/token", revocation_url: null },
      ];
      expect(await kept("oauth_tokens")).toEqual(expected);
      expect(await kept("oauth_flows")).toEqual(expected);
    } finally {
      await drop();
    }
  }, 180_000);
});

describe("a version started on a database that a newer one migrated (a rollback)", () => {
  it(`on ${THIS_RUNS_BACKEND}: warns, naming the migrations it does not know, and serves`, () =>
    onThisRunsBackend("dcp-rollback-", async (env, open) => {
      // One finished, one that failed part-way under Prisma Migrate (unfinished), one rolled back (not named).
      const newer = ["29991231000000_from_a_newer_version", "29991231000001_failed_part_way"];
      const db = await open();
      try {
        await migrate(db.sql);
        for (const [name, finished, rolledBack] of [[newer[0]!, true, false], [newer[1]!, false, false], ["29991231000002_rolled_back", true, true]] as const) {
          await db.sql.query(
            `INSERT INTO "_prisma_migrations" (id, checksum, finished_at, rolled_back_at, migration_name, applied_steps_count)
             VALUES ($1, $2, CASE WHEN $3 THEN now() END, CASE WHEN $4 THEN now() END, $5, 1)`,
            [randomUUID(), sha256(name), finished, rolledBack, name],
          );
        }
        expect(await unknownMigrations(db.sql, await readMigrations())).toEqual(newer);
      } finally {
        await db.close();
      }
      const lines: string[] = [];
      const config = loadConfig({ ...env, SECRETS_KEY: TEST_SECRETS_KEY, JWT_SECRET: TEST_JWT_SECRET, PORT: "0", METRICS_PORT: "off" });
      const app = await buildApp(config, { logger: createLogger("warn", { write: (line: string) => void lines.push(line) }) });
      try {
        const warnings = lines.map((l) => JSON.parse(l) as { level: number; msg: string; unknown?: string[] });
        expect(warnings.filter((w) => w.unknown)).toEqual([
          expect.objectContaining({ level: 40, unknown: newer, msg: expect.stringMatching(/^the database has migrations this version does not know/) }),
        ]);
        expect((await app.fetch(new Request("http://localhost/readyz"))).status).toBe(200);
      } finally {
        await app.stop();
      }
    }), 120_000);
});
