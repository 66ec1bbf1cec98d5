import type { PGlite } from "@electric-sql/pglite";
import pg from "pg";
import { parseTimestamptz } from "../time.js";
import { recordStatement } from "./statement-counter.js";

/**
 * A statement of the hot reads, sent as a named prepared statement: PostgreSQL parses and plans it
 * once per connection instead of on every request (Prisma sends unnamed statements, parsed each
 * time), and the rows come back from the driver as they are, without Prisma's mapping. Only core
 * read functions use these (faces never send SQL); every statement names its workspace.
 *
 * The SQL is the same on PostgreSQL and PGlite; columns are selected under the model's field names
 * (`d.created_at AS "createdAt"`), so rows have the shape Prisma's models have (timestamps as Date,
 * JSON parsed, uuid as text). Timestamps are read by parseTimestamptz, which is several times faster
 * than the drivers' general parsers on the form PostgreSQL sends.
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
  /** The rows as tuples, columns in the statement's order: for a tupleReader to shape. */
  tuples(statement: Statement, values: readonly unknown[]): Promise<unknown[][]>;
}

/**
 * A reader of tuple rows (Prepared.tuples): `fields[i]` from column `offset + i`, as one object
 * literal compiled once per field list. The drivers build an object row key by key (a keyed store a
 * column, some 1.8 µs a row of 30 columns, and as much again to copy it into another shape); an
 * object literal of fixed shape is allocated whole (about 0.2 µs), with one hidden class for all.
 */
export function tupleReader<T>(fields: readonly string[], offset = 0): (tuple: readonly unknown[]) => T {
  // In a literal, "__proto__": sets the prototype rather than a key.
  if (fields.includes("__proto__")) throw new Error("tupleReader: __proto__ cannot be a field");
  const body = fields.map((field, i) => `${JSON.stringify(field)}: t[${offset + i}]`).join(", ");
  // Generated from field names (quoted as JSON strings), never from input.
  return new Function("t", `return { ${body} };`) as (tuple: readonly unknown[]) => T;
}

const TIMESTAMPTZ = pg.types.builtins.TIMESTAMPTZ;
/** pg's own parser (postgres-date) for the forms the fast one leaves to it. */
const generalTimestamptz = pg.types.getTypeParser(TIMESTAMPTZ) as (text: string) => Date;
const timestamptz = (text: string) => parseTimestamptz(text, generalTimestamptz);

/** pg's parsers, but for timestamptz. */
const pgTypes = {
  getTypeParser: ((oid: number, format?: "text" | "binary") =>
    oid === TIMESTAMPTZ && format !== "binary" ? timestamptz : pg.types.getTypeParser(oid, format ?? "text")) as typeof pg.types.getTypeParser,
};

/** PostgreSQL: the pool's `{ name, text, values }` queries; pg prepares each name once per connection. */
export function preparedPg(pool: pg.Pool): Prepared {
  return {
    async rows<T>(s: Statement, values: readonly unknown[]) {
      recordStatement(s.text, values);
      const result = await pool.query({ name: s.name, text: s.text, values: values as unknown[], types: pgTypes });
      return result.rows as T[];
    },
    async tuples(s: Statement, values: readonly unknown[]) {
      recordStatement(s.text, values);
      const result = await pool.query<unknown[]>({ name: s.name, text: s.text, values: values as unknown[], types: pgTypes, rowMode: "array" });
      return result.rows;
    },
  };
}

/** PGlite: one connection in this process; the same SQL with parameters. */
export function preparedPglite(pglite: PGlite): Prepared {
  const options = { parsers: { [TIMESTAMPTZ]: timestamptz } };
  const asTuples = { ...options, rowMode: "array" as const };
  return {
    async rows<T>(s: Statement, values: readonly unknown[]) {
      recordStatement(s.text, values);
      return (await pglite.query<T>(s.text, values as unknown[], options)).rows;
    },
    async tuples(s: Statement, values: readonly unknown[]) {
      recordStatement(s.text, values);
      return (await pglite.query<unknown[]>(s.text, values as unknown[], asTuples)).rows;
    },
  };
}
