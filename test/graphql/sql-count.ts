import { AsyncLocalStorage } from "node:async_hooks";
import { PGlite } from "@electric-sql/pglite";
import pg from "pg";
import { LISTENER_APPLICATION_NAME } from "../../src/events/postgres.js";

type Query = (...args: unknown[]) => unknown;

/** The object in the prototype chain that defines `name` (PGlite's query lives on a base class). */
function owner(proto: object, name: string): Record<string, Query> {
  for (let p: object | null = proto; p; p = Object.getPrototypeOf(p)) {
    if (Object.prototype.hasOwnProperty.call(p, name)) return p as Record<string, Query>;
  }
  throw new Error(`no ${name} in the prototype chain`);
}

/**
 * Test app options (startTestApp's third argument) that keep the service's own timers (the key
 * re-check, PGlite's vacuum) from running statements while a test counts those of work it does not
 * start itself (a change's delivery to subscribers).
 */
export const QUIET_TIMERS = { keyRecheckMs: 3_600_000, vacuumEveryMs: 3_600_000 };

/** The statements counted for the work that `within` runs, wherever its promises, timers and callbacks take it. */
const scope = new AsyncLocalStorage<{ count: number }>();

/** The event bus's listening session (events/postgres.ts): it runs LISTEN and its own liveness check, every 10 s. */
const isListeningSession = (client: unknown) =>
  client instanceof pg.Client && (client as pg.Client & { connectionParameters?: { application_name?: string } }).connectionParameters?.application_name === LISTENER_APPLICATION_NAME;

/**
 * Counts SQL statements at the drivers, below Prisma: every query a pg client or PGlite runs from
 * now until restore(), but the event bus's liveness checks. Whatever Prisma does (batching,
 * transactions), this is what the database sees. `count` is every such statement of the process,
 * so also those of the service's timers (the key re-check, PGlite's vacuum: a test that counts
 * work it does not start itself sets them far apart); for what a request costs, run it `within`.
 * One at a time.
 */
export function countSql() {
  let count = 0;
  const patched: [Record<string, Query>, Query][] = [];
  for (const target of [owner(pg.Client.prototype, "query"), owner(PGlite.prototype, "query")]) {
    const original = target.query!;
    patched.push([target, original]);
    target.query = function (this: unknown, ...args: unknown[]) {
      if (isListeningSession(this)) return original.apply(this, args);
      count += 1;
      const counted = scope.getStore();
      if (counted) counted.count += 1;
      return original.apply(this, args);
    };
  }
  return {
    get count() {
      return count;
    },
    reset() {
      count = 0;
    },
    restore() {
      for (const [target, original] of patched) target.query = original;
    },
    /** Runs `work` and counts the statements it makes itself, not those of anything else running meanwhile. */
    async within<T>(work: () => Promise<T>): Promise<{ result: T; statements: number }> {
      const counted = { count: 0 };
      const result = await scope.run(counted, work);
      return { result, statements: counted.count };
    },
  };
}
