import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PGlite } from "@electric-sql/pglite";
import pg from "pg";
import type { DbKind } from "./args.js";

/** The PostgreSQL server the benchmarks create their databases on (user postgres, trust auth). */
const PG_ADMIN_URL = process.env.BENCH_PG_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";

/**
 * A database of the benchmark's own: a fresh PostgreSQL database it creates and drops, or a PGlite
 * data directory in a temporary folder. `env` is what the server needs to use it.
 */
export interface BenchDatabase {
  readonly kind: DbKind;
  readonly env: Record<string, string>;
  /**
   * Runs SQL from the benchmark process. PostgreSQL: any time. PGlite: only while no server has the
   * data directory open (it is a single-process database).
   */
  query<T extends Record<string, unknown>>(sql: string, params?: unknown[]): Promise<T[]>;
  drop(): Promise<void>;
}

export async function createDatabase(kind: DbKind): Promise<BenchDatabase> {
  return kind === "postgres" ? createPostgres() : createPglite();
}

function createPglite(): BenchDatabase {
  const dataDir = mkdtempSync(join(tmpdir(), "dcp-bench-"));
  return {
    kind: "pglite",
    // The server keeps PGlite under DATA_DIR/pglite (src/config.ts).
    env: { DATA_DIR: dataDir },
    async query<T extends Record<string, unknown>>(sql: string, params?: unknown[]) {
      const db = await PGlite.create(join(dataDir, "pglite"));
      try {
        return (await db.query<T>(sql, params)).rows;
      } finally {
        await db.close();
      }
    },
    async drop() {
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

async function createPostgres(): Promise<BenchDatabase> {
  const name = `dcp_bench_${process.pid}_${randomBytes(4).toString("hex")}`;
  await admin(`CREATE DATABASE ${name}`);
  const url = new URL(PG_ADMIN_URL);
  url.pathname = `/${name}`;
  const pool = new pg.Pool({ connectionString: url.toString(), max: 2 });
  pool.on("error", () => {});
  return {
    kind: "postgres",
    env: { DATABASE_URL: url.toString() },
    async query<T extends Record<string, unknown>>(sql: string, params?: unknown[]) {
      return (await pool.query<T>(sql, params)).rows;
    },
    async drop() {
      await pool.end();
      await admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    },
  };
}

async function admin(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: PG_ADMIN_URL });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}
