import type { PrismaClient } from "../generated/prisma/client.js";

/**
 * Counts the SQL statements Prisma sends, for the benchmarks (SQL statements per request) and for
 * tests that prove a query costs a constant number of statements. Off unless BENCH_COUNT_SQL=1:
 * Prisma's query events cost an object per statement, which the service must not pay in production.
 *
 * What is counted: every statement Prisma reports, including a transaction's COMMIT (Prisma does not
 * report BEGIN), and the prepared statements of the hot reads (src/db/prepared.ts). Raw SQL outside
 * both (db.sql: migrations, /readyz) is not counted.
 */
export const countingStatements = process.env.BENCH_COUNT_SQL === "1";

const COUNTER = Symbol.for("deployment-control-plane.statement-counter");

export interface RecordedStatement {
  sql: string;
  /** Prisma's parameters, as the JSON text its query event carries. */
  params: string;
}

/**
 * The count and the most recent statements (for benchmarks that EXPLAIN what a request ran). Kept
 * on globalThis: the benchmarks' probe (bench/lib/probe.ts) imports this module from src/ while the
 * server runs its bundled copy (build/server/main.mjs), and both must read the same count.
 */
const state = ((globalThis as { [COUNTER]?: { statements: number; recent: RecordedStatement[] } })[COUNTER] ??= { statements: 0, recent: [] });
const RECENT = 200;

/** Spread into PrismaClient's options: asks Prisma for query events, only when counting. */
export const statementLogOptions: { log?: [{ emit: "event"; level: "query" }] } = countingStatements
  ? { log: [{ emit: "event", level: "query" }] }
  : {};

/** Counts the statements of a client built with statementLogOptions; returns the client. */
export function countStatements<P extends PrismaClient>(prisma: P): P {
  if (countingStatements) {
    (prisma as unknown as PrismaClient<"query">).$on("query", (event) => {
      state.statements += 1;
      state.recent.push({ sql: event.query, params: event.params });
      if (state.recent.length > RECENT) state.recent.splice(0, state.recent.length - RECENT);
    });
  }
  return prisma;
}

/** Counts a statement sent below Prisma (src/db/prepared.ts), when counting. */
export function recordStatement(sql: string, params: readonly unknown[]): void {
  if (!countingStatements) return;
  state.statements += 1;
  state.recent.push({ sql, params: JSON.stringify(params) });
  if (state.recent.length > RECENT) state.recent.splice(0, state.recent.length - RECENT);
}

/** Statements counted so far in this process (0 when counting is off). */
export function statementCount(): number {
  return state.statements;
}

/** The statements counted since the count was `since` (at most the last 200). */
export function statementsSince(since: number): RecordedStatement[] {
  return state.recent.slice(Math.max(0, state.recent.length - (state.statements - since)));
}
