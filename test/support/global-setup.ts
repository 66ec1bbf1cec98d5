import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import type { TestProject } from "vitest/node";
import { openDatabase } from "../../src/db/client.js";
import { migrate } from "../../src/db/migrate.js";
import { buildServer } from "../../scripts/build.mjs";

declare module "vitest" {
  export interface ProvidedContext {
    /** PGlite runs: a migrated data directory dump that each test file starts from. */
    pgliteSnapshotPath: string | null;
    /** PGlite runs: a DATA_DIR whose embedded database holds the same, for processes of their own (seededDataDir). */
    pgliteDataDir: string | null;
    /** PostgreSQL runs: a migrated template database that each test file copies. */
    pgTemplate: { adminUrl: string; name: string } | null;
    /** The server bundled from this run's sources, for server processes of their own (server-process.ts). */
    serverBundle: string;
  }
}

/** Prepares, once per test run, what test files start from: the server bundle and the migrated database. */
export default async function setup(project: TestProject) {
  const removeBundle = await bundleServer(project);
  const teardown = await prepareDatabase(project);
  return async () => {
    await teardown();
    removeBundle();
  };
}

/**
 * Bundles src/ once for the whole run, as `npm start` runs it (scripts/build.mjs): a server process
 * started from the bundle is ready about a second and a half of CPU sooner than one transforming the
 * TypeScript sources through tsx, and the suite starts dozens. Two levels deep like build/server/main.mjs,
 * so that the paths the code resolves from import.meta.url mean the same.
 */
async function bundleServer(project: TestProject) {
  const outfile = fileURLToPath(new URL(`../../build/server/test-${process.pid}.mjs`, import.meta.url));
  await buildServer({ outfile });
  project.provide("serverBundle", outfile);
  return () => rmSync(outfile, { force: true });
}

/**
 * Migrates once per test run: PGlite takes seconds to initialise, so every test file loads a snapshot;
 * on PostgreSQL (TEST_DATABASE_URL) every test file gets a fresh copy of a migrated template database.
 */
async function prepareDatabase(project: TestProject): Promise<() => unknown> {
  const adminUrl = process.env.TEST_DATABASE_URL;
  if (adminUrl) {
    const name = `dcp_tpl_${process.pid}_${Date.now()}`;
    await adminQuery(adminUrl, `CREATE DATABASE ${name}`);
    const db = await openDatabase({ kind: "postgres", url: withDatabase(adminUrl, name) }, { poolSize: 1 });
    await migrate(db.sql);
    await db.close();
    project.provide("pgTemplate", { adminUrl, name });
    project.provide("pgliteSnapshotPath", null);
    project.provide("pgliteDataDir", null);
    return async () => {
      await dropDatabases(adminUrl, `dcp_t_${process.pid}_%`);
      await adminQuery(adminUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    };
  }
  const dir = mkdtempSync(join(tmpdir(), "dcp-test-"));
  const db = await openDatabase({ kind: "pglite", dataDir: null });
  await migrate(db.sql);
  const path = join(dir, "migrated.tar");
  const snapshot = await db.snapshot!();
  writeFileSync(path, Buffer.from(await snapshot.arrayBuffer()));
  await db.close();
  // The same database on disk, as a server's DATA_DIR holds it (DATA_DIR/pglite), closed cleanly: copying
  // it takes a tenth of a second, where a server's first start runs initdb and every migration.
  const dataDir = join(dir, "data-dir");
  await (await openDatabase({ kind: "pglite", dataDir: join(dataDir, "pglite") }, { pgliteSnapshot: snapshot })).close();
  project.provide("pgliteSnapshotPath", path);
  project.provide("pgliteDataDir", dataDir);
  project.provide("pgTemplate", null);
  return () => rmSync(dir, { recursive: true, force: true });
}

export function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

export async function adminQuery(adminUrl: string, sql: string, params: unknown[] = []) {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    return (await client.query(sql, params)).rows;
  } finally {
    await client.end();
  }
}

async function dropDatabases(adminUrl: string, pattern: string) {
  const rows = await adminQuery(adminUrl, "SELECT datname FROM pg_database WHERE datname LIKE $1", [pattern]);
  for (const { datname } of rows) await adminQuery(adminUrl, `DROP DATABASE IF EXISTS "${datname}" WITH (FORCE)`);
}
