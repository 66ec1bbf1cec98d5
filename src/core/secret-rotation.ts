import { z } from "zod";
import type { PrismaClient } from "../db/client.js";
import type { SecretBox, StoredSecret } from "./secrets.js";

/** The tables whose `secrets` column holds [{ name, value: ciphertext }]. */
const TABLES = ["deployments", "revisions"] as const;
type Table = (typeof TABLES)[number];

export interface TableReport {
  scanned: number;
  /** Rows whose secrets were re-sealed under the current key. */
  rotated: number;
}

export interface RotationReport {
  deployments: TableReport;
  revisions: TableReport;
  /** Rows left as they were: a value no configured key opens, or a column that is not a secrets list. */
  failed: { table: Table; id: string; reason: string }[];
}

const storedSecrets = z.array(z.object({ name: z.string(), value: z.string() }));

/** Attempts per row when a concurrent write changes it between read and update. */
const ATTEMPTS = 3;

/**
 * Re-seals every stored secret value under the box's current key (the box also holds the previous
 * keys, to open what they sealed). Values already under the current key are left alone, so a second
 * run rotates nothing. A row is written whole or not at all, and only if nobody changed it since it
 * was read; a value that no key opens is reported and its row left untouched: nothing is lost.
 */
export async function rotateSecrets(
  prisma: PrismaClient,
  box: SecretBox,
  options: { batchSize?: number } = {},
): Promise<RotationReport> {
  const report: RotationReport = {
    deployments: { scanned: 0, rotated: 0 },
    revisions: { scanned: 0, rotated: 0 },
    failed: [],
  };
  // SecretBox does not expose its key id; it is the second field of anything it seals.
  const currentId = keyIdOf(box.seal(""));
  for (const table of TABLES) {
    await rotateTable(prisma, box, currentId, table, options.batchSize ?? 200, report);
  }
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
  let after = "00000000-0000-0000-0000-000000000000";
  for (;;) {
    const rows = await prisma.$queryRawUnsafe<{ id: string; secrets: unknown }[]>(
      `SELECT "id"::text AS "id", "secrets" FROM "${table}" WHERE "id" > $1::uuid ORDER BY "id" LIMIT $2`,
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

async function rotateRow(
  prisma: PrismaClient,
  box: SecretBox,
  currentId: string,
  table: Table,
  row: { id: string; secrets: unknown },
): Promise<Outcome> {
  let secrets = row.secrets;
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    const parsed = storedSecrets.safeParse(secrets);
    if (!parsed.success) return { failed: "secrets is not a list of { name, value }" };
    const resealed = reseal(box, currentId, parsed.data);
    if (typeof resealed === "object" && "failed" in resealed) return resealed;
    if (resealed === "current") return "current";
    // Raw SQL: a compare-and-swap on the old value, and updated_at left alone (nobody changed the deployment).
    const count = await prisma.$executeRawUnsafe(
      `UPDATE "${table}" SET "secrets" = $1::jsonb WHERE "id" = $2::uuid AND "secrets" = $3::jsonb`,
      JSON.stringify(resealed),
      row.id,
      JSON.stringify(secrets),
    );
    if (count === 1) return "rotated";
    const fresh = await prisma.$queryRawUnsafe<{ secrets: unknown }[]>(
      `SELECT "secrets" FROM "${table}" WHERE "id" = $1::uuid`,
      row.id,
    );
    if (fresh.length === 0) return "current"; // deleted meanwhile: nothing left to rotate
    secrets = fresh[0]!.secrets;
  }
  return { failed: "changed concurrently on every attempt; run the rotation again" };
}

function reseal(box: SecretBox, currentId: string, secrets: StoredSecret[]): StoredSecret[] | "current" | { failed: string } {
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
      return { failed: `secret '${s.name}' is sealed under a key that is neither SECRETS_KEY nor in SECRETS_KEY_PREVIOUS` };
    }
    next.push({ name: s.name, value: box.seal(plain) });
  }
  return next;
}

/** Ciphertext is `v1.<key id>.<payload>`. */
const keyIdOf = (sealed: string) => sealed.split(".")[1] ?? "";
