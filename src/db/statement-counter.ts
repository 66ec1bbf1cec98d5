import type { PrismaClient } from "../generated/prisma/client.js";

/**
 * Counts the SQL statements Prisma sends, for the benchmarks (SQL statements per request) and for
 * tests that prove a query costs a constant number of statements. Off unless BENCH_COUNT_SQL=1:
 * Prisma's query events cost an object per statement, which the service must not pay in production.
 *
 * What is counted: every statement Prisma reports, including a transaction's COMMIT; Prisma does not
 * report BEGIN. Raw SQL outside Prisma (db.sql: migrations, /readyz) is not counted.
 */
export const countingStatements = process.env.BENCH_COUNT_SQL === "1";

let statements = 0;

export interface RecordedStatement {
  sql: string;
  /** Prisma's parameters, as the JSON text its query event carries. */
  params: string;
}

/** The most recent statements, for benchmarks that EXPLAIN what a request ran. */
const recent: RecordedStatement[] = [];
const RECENT = 200;

/** Spread into PrismaClient's options: asks Prisma for query events, only when counting. */
export const statementLogOptions: { log?: [{ emit: "event"; level: "query" }] } = countingStatements
  ? { log: [{ emit: "event", level: "query" }] }
  : {};

/** Counts the statements of a client built with statementLogOptions; returns the client. */
export function countStatements<P extends PrismaClient>(prisma: P): P {
  if (countingStatements) {
    (prisma as unknown as PrismaClient<"query">).$on("query", (event) => {
      statements += 1;
      recent.push({ sql: event.query, params: event.params });
      if (recent.length > RECENT) recent.splice(0, recent.length - RECENT);
    });
  }
  return prisma;
}

/** Statements counted so far in this process (0 when counting is off). */
export function statementCount(): number {
  return statements;
}

/** The statements counted since the count was `since` (at most the last 200). */
export function statementsSince(since: number): RecordedStatement[] {
  return recent.slice(Math.max(0, recent.length - (statements - since)));
}
