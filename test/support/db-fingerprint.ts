import type { Sql } from "../../src/db/client.js";

/** Per table: its row count and an md5 of all its rows as text, in primary key order. */
export type Fingerprint = Record<string, { rows: number; md5: string }>;

const cached = new WeakMap<Sql, { tables: { name: string; pk: string[] }[] }>();

/** Every table of the public schema with its primary key, read once per database from the catalog. */
async function tablesOf(sql: Sql): Promise<{ name: string; pk: string[] }[]> {
  const known = cached.get(sql);
  if (known) return known.tables;
  const tables = await sql.query<{ name: string; pk: string[] }>(`
    SELECT c.relname AS name,
           array_agg(a.attname::text ORDER BY array_position(i.indkey::int2[], a.attnum)) AS pk
    FROM pg_class c
    JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'public'
    JOIN pg_index i ON i.indrelid = c.oid AND i.indisprimary
    JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = ANY(i.indkey)
    WHERE c.relkind = 'r'
    GROUP BY c.relname
    ORDER BY c.relname`);
  if (tables.length === 0) throw new Error("no tables with a primary key in the public schema");
  cached.set(sql, { tables });
  return tables;
}

const ident = (s: string) => `"${s.replace(/"/g, '""')}"`;
const literal = (s: string) => `'${s.replace(/'/g, "''")}'`;

/**
 * Row counts and a checksum of every table (or of the tables named in `only`): equal fingerprints mean
 * nothing was written.
 */
export async function fingerprint(sql: Sql, only?: ReadonlySet<string>): Promise<Fingerprint> {
  const tables = (await tablesOf(sql)).filter(({ name }) => !only || only.has(name));
  if (tables.length === 0) return {};
  const parts = tables.map(
    ({ name, pk }) =>
      `SELECT ${literal(name)} AS name, count(*)::int AS rows,
         coalesce(md5(string_agg(t::text, E'\\n' ORDER BY ${pk.map(ident).join(", ")})), '') AS md5
       FROM ${ident(name)} t`,
  );
  const rows = await sql.query<{ name: string; rows: number; md5: string }>(parts.join("\nUNION ALL\n"));
  return Object.fromEntries(rows.map((r) => [r.name, { rows: Number(r.rows), md5: r.md5 }]));
}

/**
 * A cheap stamp of each table: its row count and the newest transaction id among its rows. Any
 * committed insert, update or delete changes it (a new row version carries its writer's id, the
 * newest), and, unlike a checksum, it reads no column values. A table whose stamp is the same was
 * not written.
 */
export type WriteStamps = Record<string, string>;

export async function writeStamps(sql: Sql): Promise<WriteStamps> {
  const parts = (await tablesOf(sql)).map(
    ({ name }) => `SELECT ${literal(name)} AS name, count(*)::int AS n, coalesce(max(xmin::text::bigint), 0)::text AS x FROM ${ident(name)}`,
  );
  const rows = await sql.query<{ name: string; n: number; x: string }>(parts.join("\nUNION ALL\n"));
  return Object.fromEntries(rows.map((r) => [r.name, `${r.n}:${r.x}`]));
}

/** The tables whose stamps differ. */
export function stampedTables(before: WriteStamps, after: WriteStamps): string[] {
  const names = new Set([...Object.keys(before), ...Object.keys(after)]);
  return [...names].filter((n) => before[n] !== after[n]).sort();
}

/** The tables whose count or checksum differ, for a failure message that says where. */
export function changedTables(before: Fingerprint, after: Fingerprint): string[] {
  const names = new Set([...Object.keys(before), ...Object.keys(after)]);
  return [...names].filter((n) => before[n]?.rows !== after[n]?.rows || before[n]?.md5 !== after[n]?.md5).sort();
}
