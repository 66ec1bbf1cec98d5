import { PGlite } from "@electric-sql/pglite";
import pg from "pg";

type Query = (...args: unknown[]) => unknown;

/** The object in the prototype chain that defines `name` (PGlite's query lives on a base class). */
function owner(proto: object, name: string): Record<string, Query> {
  for (let p: object | null = proto; p; p = Object.getPrototypeOf(p)) {
    if (Object.prototype.hasOwnProperty.call(p, name)) return p as Record<string, Query>;
  }
  throw new Error(`no ${name} in the prototype chain`);
}

/**
 * Counts SQL statements at the drivers, below Prisma: every query a pg client or PGlite runs from
 * now until restore(). Whatever Prisma does (batching, transactions), this is what the database sees.
 */
export function countSql() {
  let count = 0;
  const patched: [Record<string, Query>, Query][] = [];
  for (const target of [owner(pg.Client.prototype, "query"), owner(PGlite.prototype, "query")]) {
    const original = target.query!;
    patched.push([target, original]);
    target.query = function (this: unknown, ...args: unknown[]) {
      count += 1;
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
  };
}
