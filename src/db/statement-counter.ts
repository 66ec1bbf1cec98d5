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

/** Spread into PrismaClient's options: asks Prisma for query events, only when counting. */
export const statementLogOptions: { log?: [{ emit: "event"; level: "query" }] } = countingStatements
  ? { log: [{ emit: "event", level: "query" }] }
  : {};

/** Counts the statements of a client built with statementLogOptions; returns the client. */
export function countStatements<P extends PrismaClient>(prisma: P): P {
  if (countingStatements) {
    (prisma as unknown as PrismaClient<"query">).$on("query", () => {
      statements += 1;
    });
  }
  return prisma;
}

/** Statements counted so far in this process (0 when counting is off). */
export function statementCount(): number {
  return statements;
}
