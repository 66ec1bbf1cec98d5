import type { PGlite } from "@electric-sql/pglite";
import type pg from "pg";
import { recordStatement } from "./statement-counter.js";

/**
 * A statement of the hot reads, sent as a named prepared statement: PostgreSQL parses and plans it
 * once per connection instead of on every request (Prisma sends unnamed statements, parsed each
 * time), and the rows come back from the driver as they are, without Prisma's mapping. Only core
 * read functions use these (faces never send SQL); every statement names its workspace.
 *
 * The SQL is the same on PostgreSQL and PGlite; columns are selected under the model's field names
 * (`d.created_at AS "createdAt"`), so rows have the shape Prisma's models have (timestamps as Date,
 * JSON parsed, uuid as text).
 */
export interface Statement {
  /** Unique per text: a connection keeps one prepared statement per name. */
  readonly name: string;
  readonly text: string;
}

const names = new Map<string, string>();

/** Declares a statement once, at module level. Two texts under one name is a programming error. */
export function statement(name: string, text: string): Statement {
  const known = names.get(name);
  if (known !== undefined && known !== text) throw new Error(`prepared statement ${name} declared twice with different SQL`);
  names.set(name, text);
  return { name, text };
}

export interface Prepared {
  rows<T>(statement: Statement, values: readonly unknown[]): Promise<T[]>;
}

/** PostgreSQL: the pool's `{ name, text, values }` queries; pg prepares each name once per connection. */
export function preparedPg(pool: pg.Pool): Prepared {
  return {
    async rows<T>(s: Statement, values: readonly unknown[]) {
      recordStatement(s.text, values);
      const result = await pool.query({ name: s.name, text: s.text, values: values as unknown[] });
      return result.rows as T[];
    },
  };
}

/** PGlite: one connection in this process; the same SQL with parameters. */
export function preparedPglite(pglite: PGlite): Prepared {
  return {
    async rows<T>(s: Statement, values: readonly unknown[]) {
      recordStatement(s.text, values);
      return (await pglite.query<T>(s.text, values as unknown[])).rows;
    },
  };
}
