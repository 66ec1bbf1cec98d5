import { z } from "zod";
import type { PrismaClient } from "../db/client.js";
import type { SecretBox, StoredSecret } from "./secrets.js";

/**
 * Every column that holds values sealed by SecretBox (`secrets.seal(` in src/core): a `secrets` list of
 * [{ name, value: ciphertext }], or a column of one sealed value (null where there is none). A column
 * sealed anywhere else must be added here, or the rotation would leave it under the old key.
 * Deployments come before revisions: a revision created meanwhile copies its deployment's secrets.
 */
const SEALED = {
  deployments: { list: "secrets" },
  revisions: { list: "secrets" },
  oauth_providers: { values: ["client_secret"] },
  oauth_tokens: { values: ["access_token", "refresh_token"] },
  oauth_flows: { values: ["code_verifier"] },
} as const satisfies Record<string, { list: string } | { values: readonly string[] }>;
type Table = keyof typeof SEALED;
const TABLES = Object.keys(SEALED) as Table[];

const columnsOf = (table: Table): string[] => {
  const sealed: { list: string } | { values: readonly string[] } = SEALED[table];
  return "list" in sealed ? [sealed.list] : [...sealed.values];
};
const isList = (table: Table) => "list" in SEALED[table];

export interface TableReport {
  scanned: number;
  /** Rows whose sealed values were re-sealed under the current key. */
  rotated: number;
}

export type RotationReport = Record<Table, TableReport> & {
  /** Rows left as they were: a value no configured key opens, or a column that is not what it should be. */
  failed: { table: Table; id: string; reason: string }[];
  /**
   * Per table, the rows that still hold a value under another key once every table was rotated: the
   * failed ones, and any written meanwhile by a process still sealing under an older key. All zero is
   * what "every stored secret is sealed under the current key" means.
   */
  remaining: Record<Table, number>;
};

const storedSecrets = z.array(z.object({ name: z.string(), value: z.string() }));

/** Attempts per row when a concurrent write changes it between read and update. */
const ATTEMPTS = 3;

/** A row as read: its id, and each sealed column's value (jsonb parsed, text as is). */
type Row = { id: string } & Record<string, unknown>;

/**
 * Re-seals every stored secret value under the box's current key (the box also holds the previous
 * keys, to open what they sealed). Values already under the current key are left alone, so a second
 * run rotates nothing. A row is written whole or not at all, and only if nobody changed its sealed
 * columns since they were read; a value that no key opens is reported and its row left untouched:
 * nothing is lost. Last, every sealed column is counted again for values under another key.
 */
export async function rotateSecrets(
  prisma: PrismaClient,
  box: SecretBox,
  options: { batchSize?: number } = {},
): Promise<RotationReport> {
  const report: RotationReport = {
    ...(Object.fromEntries(TABLES.map((table) => [table, { scanned: 0, rotated: 0 }])) as Record<Table, TableReport>),
    failed: [],
    remaining: Object.fromEntries(TABLES.map((table) => [table, 0])) as Record<Table, number>,
  };
  // SecretBox does not expose its key id; it is the second field of anything it seals.
  const currentId = keyIdOf(box.seal(""));
  for (const table of TABLES) {
    await rotateTable(prisma, box, currentId, table, options.batchSize ?? 200, report);
  }
  for (const table of TABLES) report.remaining[table] = await countNotCurrent(prisma, currentId, table);
  return report;
}

async function rotateTable(
  prisma: PrismaClient,
  box: SecretBox,
  currentId: string,
  table: Table,
  batchSize: number,
  report: RotationReport,
) {
  const columns = columnsOf(table).map((c) => `"${c}"`).join(", ");
  let after = "00000000-0000-0000-0000-000000000000";
  for (;;) {
    const rows = await prisma.$queryRawUnsafe<Row[]>(
      `SELECT "id"::text AS "id", ${columns} FROM "${table}" WHERE "id" > $1::uuid ORDER BY "id" LIMIT $2`,
      after,
      batchSize,
    );
    for (const row of rows) {
      report[table].scanned++;
      const outcome = await rotateRow(prisma, box, currentId, table, row);
      if (outcome === "rotated") report[table].rotated++;
      else if (outcome !== "current") report.failed.push({ table, id: row.id, reason: outcome.failed });
    }
    if (rows.length < batchSize) return;
    after = rows.at(-1)!.id;
  }
}

type Outcome = "rotated" | "current" | { failed: string };

async function rotateRow(prisma: PrismaClient, box: SecretBox, currentId: string, table: Table, row: Row): Promise<Outcome> {
  const columns = columnsOf(table);
  const cast = isList(table) ? "jsonb" : "text";
  const param = (value: unknown) => (isList(table) ? JSON.stringify(value) : value);
  let read: Row = row;
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    const next: unknown[] = [];
    let changed = false;
    for (const column of columns) {
      const resealed = isList(table) ? resealList(box, currentId, read[column]) : resealValue(box, currentId, column, read[column]);
      if (typeof resealed === "object" && resealed !== null && "failed" in resealed) return resealed;
      if (resealed === "current") next.push(read[column]);
      else {
        next.push(resealed);
        changed = true;
      }
    }
    if (!changed) return "current";
    // Raw SQL: a compare-and-swap on the old values, and updated_at left alone (nobody changed the row).
    const set = columns.map((c, i) => `"${c}" = $${i + 2}::${cast}`).join(", ");
    const unchanged = columns.map((c, i) => `"${c}" IS NOT DISTINCT FROM $${columns.length + i + 2}::${cast}`).join(" AND ");
    const count = await prisma.$executeRawUnsafe(
      `UPDATE "${table}" SET ${set} WHERE "id" = $1::uuid AND ${unchanged}`,
      row.id,
      ...next.map(param),
      ...columns.map((c) => param(read[c])),
    );
    if (count === 1) return "rotated";
    const fresh = await prisma.$queryRawUnsafe<Row[]>(
      `SELECT "id"::text AS "id", ${columns.map((c) => `"${c}"`).join(", ")} FROM "${table}" WHERE "id" = $1::uuid`,
      row.id,
    );
    if (fresh.length === 0) return "current"; // deleted meanwhile: nothing left to rotate
    read = fresh[0]!;
  }
  return { failed: "changed concurrently on every attempt; run the rotation again" };
}

const UNKNOWN_KEY = "is sealed under a key that is neither SECRETS_KEY nor in SECRETS_KEY_PREVIOUS";

/** A `secrets` column: its entries re-sealed, those already under the current key kept as they are. */
function resealList(box: SecretBox, currentId: string, value: unknown): StoredSecret[] | "current" | { failed: string } {
  const parsed = storedSecrets.safeParse(value);
  if (!parsed.success) return { failed: "secrets is not a list of { name, value }" };
  const secrets = parsed.data;
  if (secrets.every((s) => keyIdOf(s.value) === currentId)) return "current";
  const next: StoredSecret[] = [];
  for (const s of secrets) {
    if (keyIdOf(s.value) === currentId) {
      next.push(s);
      continue;
    }
    let plain: string;
    try {
      plain = box.open(s.value);
    } catch {
      return { failed: `secret '${s.name}' ${UNKNOWN_KEY}` };
    }
    next.push({ name: s.name, value: box.seal(plain) });
  }
  return next;
}

/** A column of one sealed value (or null). */
function resealValue(box: SecretBox, currentId: string, column: string, value: unknown): string | "current" | { failed: string } {
  if (value === null) return "current";
  if (typeof value !== "string") return { failed: `${column} is not a sealed value` };
  if (keyIdOf(value) === currentId) return "current";
  try {
    return box.seal(box.open(value));
  } catch {
    return { failed: `${column} ${UNKNOWN_KEY}` };
  }
}

/** Rows of the table with a value in a sealed column that is not under the current key. */
async function countNotCurrent(prisma: PrismaClient, currentId: string, table: Table): Promise<number> {
  const sealed: { list: string } | { values: readonly string[] } = SEALED[table];
  // Ciphertext is `v1.<key id>.<payload>`; a key id is hex, so nothing in the pattern is a wildcard but %.
  const condition =
    "list" in sealed
      ? `CASE WHEN jsonb_typeof("${sealed.list}") = 'array'
           THEN EXISTS (SELECT 1 FROM jsonb_array_elements("${sealed.list}") AS e WHERE (e ->> 'value') IS NULL OR (e ->> 'value') NOT LIKE $1)
           ELSE true END`
      : sealed.values.map((c) => `("${c}" IS NOT NULL AND "${c}" NOT LIKE $1)`).join(" OR ");
  const [row] = await prisma.$queryRawUnsafe<{ count: number }[]>(`SELECT count(*)::int AS "count" FROM "${table}" WHERE ${condition}`, `v1.${currentId}.%`);
  return row?.count ?? 0;
}

/** Ciphertext is `v1.<key id>.<payload>`. */
const keyIdOf = (sealed: string) => sealed.split(".")[1] ?? "";
