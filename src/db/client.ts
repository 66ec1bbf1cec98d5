import { mkdirSync } from "node:fs";
import { PGlite } from "@electric-sql/pglite";
import { PrismaPg } from "@prisma/adapter-pg";
import pg from "pg";
import { PrismaPGlite } from "pglite-prisma-adapter";
import type { Config } from "../config.js";
import type { Logger } from "../logger.js";
import { PrismaClient } from "../generated/prisma/client.js";
import { type Prepared, preparedPg, preparedPglite } from "./prepared.js";
import { countStatements, statementLogOptions } from "./statement-counter.js";

export type { PrismaClient };

/** Raw SQL access below Prisma: migrations, LISTEN/NOTIFY, and test set-up. */
export interface Sql {
  /** Runs a script of one or more statements, without parameters. */
  script(sql: string): Promise<void>;
  query<T extends Record<string, unknown>>(sql: string, params?: unknown[]): Promise<T[]>;
  /**
   * Runs fn on one connection held for its duration (session locks, transactions). On PostgreSQL,
   * `queryTimeoutMs` bounds its statements instead of the pool's QUERY_TIMEOUT_MS (migrations).
   */
  session<T>(fn: (sql: Sql) => Promise<T>, options?: { queryTimeoutMs?: number }): Promise<T>;
}

export interface Database {
  readonly kind: "pglite" | "postgres";
  readonly prisma: PrismaClient;
  readonly sql: Sql;
  /** Named prepared statements for the hot reads (core read functions only). */
  readonly prepared: Prepared;
  /** The PostgreSQL pool, for LISTEN/NOTIFY connections; null on PGlite. */
  readonly pool: pg.Pool | null;
  /** PGlite only: the data directory as a tarball, to start other databases from (tests). */
  snapshot?(): Promise<Blob>;
  close(): Promise<void>;
}

/**
 * An embedded database lent for the life of one Database, which hands it back on close instead of
 * closing it: tests reuse them across test files (test/support/pglite-pool.ts), as opening one
 * costs about a second of CPU.
 */
export interface PGliteLease {
  readonly pglite: PGlite;
  giveBack(): Promise<void>;
}

export interface OpenOptions {
  /** PGlite only: start from this data directory dump instead of an empty database (tests). */
  pgliteSnapshot?: Blob;
  /** PGlite only: run on this database, lent, instead of opening one (tests). */
  pgliteLease?: PGliteLease;
  /** PostgreSQL only: connections in the pool. */
  poolSize?: number;
  /** PostgreSQL only: where lost connections are told. */
  logger?: Logger;
  /** PostgreSQL only: how long a statement may go unanswered (QUERY_TIMEOUT_MS by default). */
  queryTimeoutMs?: number;
}

/**
 * Bounds on every wait for PostgreSQL, so that one that stops answering without closing its sockets
 * (a network partition, a failover that stalls) fails requests with 503 instead of holding them, and
 * /readyz and the pipeline worker with them, for ever. Errors of each are "database unavailable"
 * (src/core/prisma-errors.ts).
 *
 * A connection: the pool's wait for one (all in use) and the opening of a new one. The same as a
 * transaction's maxWait below; a burst that queues longer answers 503 rather than waiting on.
 */
export const CONNECT_TIMEOUT_MS = 10_000;
/**
 * A statement with no answer: pg gives up on it ("Query read timeout"). Twice a transaction's
 * timeout below, which bounds the longest legitimate wait of the request path (a statement queued on
 * a row lock behind a transaction); longer work has its own bound (migrations' in src/db/migrate.ts, the
 * scripts' in scripts/lib/database.ts). Client-side: a stalled network never delivers the server's own
 * statement_timeout.
 */
export const QUERY_TIMEOUT_MS = 20_000;
/**
 * The server's own bound on a statement (statement_timeout) is this much shorter than the client's:
 * a database that is slow rather than cut off cancels the statement itself (SQLSTATE 57014), so that
 * nothing a 503 gave up on goes on running there, and the connection stays usable. The client's bound
 * is left for a path that delivers nothing at all.
 */
const SERVER_BOUND_MARGIN_MS = 1_000;
const serverBound = (queryTimeoutMs: number) => Math.max(queryTimeoutMs - SERVER_BOUND_MARGIN_MS, 1);

/**
 * TCP keepalive after this long idle: a dead peer or a dropped NAT mapping ends idle pooled connections
 * (after the system's probes) instead of leaving them to be found by the next request, and the probes
 * keep NAT mappings of idle connections alive.
 */
export const KEEPALIVE_IDLE_MS = 10_000;

/**
 * Prisma's defaults (2 s to get a connection, 5 s to finish) answer a burst of writes on one
 * deployment, which queue on its row lock while holding pooled connections, with errors; these
 * give such a burst time to drain, while a lost database still fails fast (a connection error).
 */
/**
 * What every client is made with. Errors are `minimal`: Prisma's other formats quote the calling
 * code and, for an invalid argument, every value passed (a sealed token, a key's hash), and a 500
 * logs its error's message.
 */
const clientOptions = { transactionOptions: { maxWait: 10_000, timeout: 10_000 }, errorFormat: "minimal", ...statementLogOptions } as const;

export async function openDatabase(config: Config["database"], options: OpenOptions = {}): Promise<Database> {
  return config.kind === "pglite"
    ? openPglite(config.dataDir, options)
    : openPostgres(config.url, options.poolSize ?? 10, options.queryTimeoutMs ?? QUERY_TIMEOUT_MS, options.logger);
}

async function openPglite(dataDir: string | null, { pgliteSnapshot: snapshot, pgliteLease: lease }: OpenOptions): Promise<Database> {
  if (dataDir) mkdirSync(dataDir, { recursive: true });
  // A lent database is reached through a view revoked on close: whatever of this Database still runs
  // after it (a late write of a stopped app) fails as on a closed database, not on its next borrower's.
  const view = lease ? Proxy.revocable(lease.pglite, { get: (target, key) => boundMember(target, key) }) : null;
  // One options object: PGlite ignores options that follow an undefined data directory argument.
  const pglite = view?.proxy ?? (await PGlite.create({ dataDir: dataDir ?? undefined, ...(snapshot && { loadDataDir: snapshot }) }));
  const prisma = countStatements(new PrismaClient({ adapter: new PrismaPGlite(pglite), ...clientOptions }));
  return {
    kind: "pglite",
    prisma,
    prepared: preparedPglite(pglite),
    pool: null,
    snapshot: () => pglite.dumpDataDir("none"),
    sql: {
      async script(sql) {
        await pglite.exec(sql);
      },
      async query<T extends Record<string, unknown>>(sql: string, params?: unknown[]) {
        return (await pglite.query<T>(sql, params)).rows;
      },
      // PGlite is a single connection already, in this process: nothing to wait for on a network.
      session(fn) {
        return fn(this);
      },
    },
    async close() {
      await prisma.$disconnect();
      if (!lease || !view) return pglite.close();
      view.revoke();
      await lease.giveBack();
    },
  };
}

/** A member of the object itself, its methods bound to it (PGlite's read private fields, which a proxy has not). */
function boundMember(target: object, key: string | symbol): unknown {
  const value: unknown = Reflect.get(target, key);
  return typeof value === "function" ? value.bind(target) : value;
}

async function openPostgres(url: string, max: number, queryTimeoutMs: number, logger?: Logger): Promise<Database> {
  const pool = new pg.Pool({
    connectionString: url,
    max,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    query_timeout: queryTimeoutMs,
    statement_timeout: serverBound(queryTimeoutMs),
    keepAlive: true,
    keepAliveInitialDelayMillis: KEEPALIVE_IDLE_MS,
  });
  dropStalledOnRelease(pool);
  // A connection the server drops (a failover, a restart, an idle reaper, pg_terminate_backend) emits
  // 'error' on its client. An idle one is the pool's to drop ('error' on the pool). One in use is
  // listened to by whoever holds it, but not always yet: a connection handed to a waiting
  // transaction can be cut before Prisma's adapter listens, and an 'error' without a listener ends
  // the process. So every connection is listened to from the moment it opens, for as long as it
  // lives; the query it was running fails on its own (503), and the pool replaces it.
  pool.on("error", (err) => logger?.warn({ reason: err.message }, "database: an idle connection was lost; the pool opens another"));
  pool.on("connect", (client) => {
    client.on("error", (err) => logger?.debug({ reason: err.message }, "database: a connection in use was lost"));
  });
  const prisma = countStatements(new PrismaClient({ adapter: new PrismaPg(pool), ...clientOptions }));
  return {
    kind: "postgres",
    prisma,
    prepared: preparedPg(pool),
    pool,
    sql: pgSql(pool),
    async close() {
      await prisma.$disconnect();
      await pool.end();
    },
  };
}

/** pg's own state of a connection, which its types leave out: the statement it still waits for. */
interface ClientState {
  _getActiveQuery?: () => unknown;
}

/**
 * pg gives up on a statement past its query_timeout, not on its connection, which still waits for the
 * answer: back in the pool it would hold every statement queued on it until that times out too. The
 * pool drops a connection released with an error; Prisma releases a transaction's without one. So one
 * released while still waiting is ended here (pg ends such a one by destroying its socket), which
 * tells the pool to drop it.
 */
function dropStalledOnRelease(pool: pg.Pool) {
  pool.on("release", (err, client) => {
    if (!err && (client as unknown as ClientState)._getActiveQuery?.()) client.end().catch(() => {});
  });
}

/** pg's query config, with the per-statement bound its types leave out. */
type BoundedQuery = pg.QueryConfig & { query_timeout?: number };

function pgSql(queryable: pg.Pool | pg.PoolClient, queryTimeoutMs?: number): Sql {
  const bounded = (text: string, values?: unknown[]): BoundedQuery => ({ text, values, query_timeout: queryTimeoutMs });
  return {
    async script(sql) {
      await queryable.query(bounded(sql));
    },
    async query<T extends Record<string, unknown>>(sql: string, params?: unknown[]) {
      return (await queryable.query<T>(bounded(sql, params))).rows;
    },
    async session(fn, options) {
      if (!(queryable instanceof pg.Pool)) return fn(this);
      const client = await queryable.connect();
      const bound = options?.queryTimeoutMs;
      let failed: Error | undefined;
      try {
        // The session's own bound on the server too, for its statements only: reset before the
        // connection goes back to the pool (or, should the reset fail, the connection is dropped).
        if (bound !== undefined) await client.query(bounded(`SET statement_timeout = ${serverBound(bound)}`));
        return await fn(pgSql(client, bound));
      } finally {
        if (bound !== undefined) await client.query(bounded("RESET statement_timeout")).catch((err: Error) => (failed = err));
        client.release(failed);
      }
    },
  };
}

/** A database URL as it may be shown (logs, messages): its password masked. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = "***";
    return u.toString();
  } catch {
    return "(unparseable)";
  }
}

/** Why a PostgreSQL database could not be reached, as one line naming DATABASE_URL (its password masked). */
export function unreachableDatabase(url: string, err: unknown, more = ""): string {
  return `cannot connect to the database at DATABASE_URL=${redactUrl(url)} (${err instanceof Error ? err.message.split("\n")[0] : String(err)})${more}`;
}
