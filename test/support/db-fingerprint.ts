import type { Sql } from "../../src/db/client.js";

/** Per table: its row count and an md5 of all its rows as text, in primary key order. */
export type Fingerprint = Record<string, { rows: number; md5: string }>;

let cachedQuery: { sql: Sql; text: string } | null = null;

/**
 * One statement that fingerprints every table of the public schema. Built once per database from
 * the catalog (every table and its primary key), so that a table added later is covered too.
 */
async function fingerprintQuery(sql: Sql): Promise<string> {
  if (cachedQuery?.sql === sql) return cachedQuery.text;
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
  const ident = (s: string) => `"${s.replace(/"/g, '""')}"`;
  const parts = tables.map(({ name, pk }) => {
    const order = pk.map(ident).join(", ");
    return `SELECT '${name.replace(/'/g, "''")}' AS name, count(*)::int AS rows,
              coalesce(md5(string_agg(t::text, E'\\n' ORDER BY ${order})), '') AS md5
            FROM ${ident(name)} t`;
  });
  cachedQuery = { sql, text: parts.join("\nUNION ALL\n") };
  return cachedQuery.text;
}

/** Row counts and a checksum of every table: equal fingerprints mean nothing was written. */
export async function fingerprint(sql: Sql): Promise<Fingerprint> {
  const rows = await sql.query<{ name: string; rows: number; md5: string }>(await fingerprintQuery(sql));
  return Object.fromEntries(rows.map((r) => [r.name, { rows: Number(r.rows), md5: r.md5 }]));
}

/** The tables whose count or checksum differ, for a failure message that says where. */
export function changedTables(before: Fingerprint, after: Fingerprint): string[] {
  const names = new Set([...Object.keys(before), ...Object.keys(after)]);
  return [...names].filter((n) => before[n]?.rows !== after[n]?.rows || before[n]?.md5 !== after[n]?.md5).sort();
}
