import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rotateSecrets } from "../../src/core/secret-rotation.js";
import { SecretBox } from "../../src/core/secrets.js";
import { createWorkspace, type NewWorkspace } from "../../src/core/workspaces.js";
import { type Database, openDatabase, type PrismaClient } from "../../src/db/client.js";
import { migrate } from "../../src/db/migrate.js";
import { CIPHERTEXT } from "../support/leak-guard.js";
import { type TestApp, seededDataDir, startTestApp } from "../support/app.js";

const run = promisify(execFile);

const OLD = Buffer.alloc(32, 11);
const NEW = Buffer.alloc(32, 12);
const UNKNOWN = Buffer.alloc(32, 13);
const oldBox = new SecretBox(OLD);
const newOnly = new SecretBox(NEW);
const keyId = (sealed: string) => sealed.split(".")[1];
/** As JSON column input (an interface has no index signature, an inferred object type does). */
const json = (secrets: { name: string; value: string }[]) => secrets.map(({ name, value }) => ({ name, value }));
const NEW_ID = keyId(newOnly.seal(""));
const OLD_ID = keyId(oldBox.seal(""));

let t: TestApp;
let ws: NewWorkspace;

beforeAll(async () => {
  // The service after a key change: SECRETS_KEY is the new key, the old one is still given.
  t = await startTestApp({ SECRETS_KEY: NEW.toString("base64"), SECRETS_KEY_PREVIOUS: OLD.toString("base64") });
  ws = await t.workspace();
});
afterAll(async () => {
  await t.close();
});

interface Seeded {
  deploymentId: string;
  revisionIds: string[];
  plain: { name: string; value: string }[];
}

/** A deployment and two revisions whose secrets were sealed by `box`, as an earlier key left them. */
async function seed(prisma: PrismaClient, workspaceId: string, box: SecretBox, count = 2): Promise<Seeded> {
  const plain = Array.from({ length: count }, (_, i) => ({ name: `SECRET_${i}`, value: t.guard.secret() }));
  const deployment = await prisma.deployment.create({
    data: {
      workspaceId,
      name: `d-${randomUUID().slice(0, 8)}`,
      displayName: "d",
      source: "internal_container",
      status: "READY",
      sourceConfig: {},
      secrets: json(box.sealAll(plain)),
      secretReferences: [],
      tracerSessionId: randomUUID(),
      url: "https://d.example",
      imageVersion: "1",
      deploymentTier: "SERVERLESS_S",
      computeTier: "SERVERLESS_S",
      databaseTier: "SERVERLESS_S",
    },
  });
  const revisionIds: string[] = [];
  for (let i = 0; i < 2; i++) {
    const revision = await prisma.revision.create({
      data: {
        deploymentId: deployment.id,
        workspaceId,
        status: "DEPLOYED",
        source: "internal_container",
        sourceConfig: {},
        sourceRevisionConfig: {},
        secrets: json(box.sealAll(plain)),
        secretReferences: [],
      },
    });
    revisionIds.push(revision.id);
  }
  return { deploymentId: deployment.id, revisionIds, plain };
}

async function storedSecrets(prisma: PrismaClient, s: Seeded) {
  const deployment = await prisma.deployment.findUniqueOrThrow({ where: { id: s.deploymentId } });
  const revisions = await prisma.revision.findMany({ where: { id: { in: s.revisionIds } }, orderBy: { id: "asc" } });
  return [deployment, ...revisions].map((row) => ({
    updatedAt: row.updatedAt.getTime(),
    secrets: row.secrets as { name: string; value: string }[],
  }));
}

describe("secrets key rotation", () => {
  it("the service opens values sealed under a previous key", async () => {
    const sealed = oldBox.seal("opened-with-previous");
    expect(t.app.core.deps.secrets.open(sealed)).toBe("opened-with-previous");
    expect(keyId(t.app.core.deps.secrets.seal("x"))).toBe(NEW_ID);
  });

  it("re-seals every stored value under the current key without loss, and leaves updated_at alone", async () => {
    const prisma = t.app.db.prisma;
    const seeded = [await seed(prisma, ws.workspaceId, oldBox), await seed(prisma, ws.workspaceId, oldBox, 3)];
    const before = await Promise.all(seeded.map((s) => storedSecrets(prisma, s)));
    for (const rows of before) for (const row of rows) for (const s of row.secrets) expect(keyId(s.value)).toBe(OLD_ID);

    const report = await rotateSecrets(prisma, t.app.core.deps.secrets, { batchSize: 2 });
    expect(report.failed).toEqual([]);
    expect(report.deployments.rotated).toBeGreaterThanOrEqual(2);
    expect(report.revisions.rotated).toBeGreaterThanOrEqual(4);

    for (const [i, s] of seeded.entries()) {
      const after = await storedSecrets(prisma, s);
      expect(after.map((r) => r.updatedAt)).toEqual(before[i]!.map((r) => r.updatedAt));
      for (const row of after) {
        expect(row.secrets.map((x) => x.name)).toEqual(s.plain.map((p) => p.name));
        for (const [j, x] of row.secrets.entries()) {
          expect(x.value).toMatch(CIPHERTEXT);
          expect(keyId(x.value)).toBe(NEW_ID);
          // Only the new key is needed from now on.
          expect(newOnly.open(x.value)).toBe(s.plain[j]!.value);
        }
      }
    }

    const again = await rotateSecrets(prisma, t.app.core.deps.secrets);
    expect(again.deployments.rotated + again.revisions.rotated).toBe(0);
    expect(again.deployments.scanned).toBe(report.deployments.scanned);
  });

  it("re-seals only the old values of a row that mixes keys", async () => {
    const prisma = t.app.db.prisma;
    const s = await seed(prisma, ws.workspaceId, oldBox);
    const current = newOnly.seal("already-new");
    const mixed = [...oldBox.sealAll(s.plain), { name: "NEW_ONE", value: current }];
    await prisma.deployment.update({ where: { id: s.deploymentId }, data: { secrets: json(mixed) } });
    await rotateSecrets(prisma, t.app.core.deps.secrets);
    const [deployment] = await storedSecrets(prisma, s);
    expect(deployment!.secrets.map((x) => keyId(x.value))).toEqual([NEW_ID, NEW_ID, NEW_ID]);
    expect(deployment!.secrets[2]!.value).toBe(current);
    expect(deployment!.secrets.slice(0, 2).map((x) => newOnly.open(x.value))).toEqual(s.plain.map((p) => p.value));
  });

  it("reports a value no configured key opens and leaves its row exactly as it was", async () => {
    const prisma = t.app.db.prisma;
    const lost = await seed(prisma, ws.workspaceId, new SecretBox(UNKNOWN));
    const fine = await seed(prisma, ws.workspaceId, oldBox);
    const before = await storedSecrets(prisma, lost);
    const report = await rotateSecrets(prisma, t.app.core.deps.secrets);
    expect(report.failed).toEqual(
      expect.arrayContaining([
        { table: "deployments", id: lost.deploymentId, reason: expect.stringContaining("SECRETS_KEY_PREVIOUS") },
        ...lost.revisionIds.map((id) => ({ table: "revisions", id, reason: expect.any(String) })),
      ]),
    );
    expect(report.failed).toHaveLength(3);
    expect(await storedSecrets(prisma, lost)).toEqual(before);
    for (const row of await storedSecrets(prisma, fine)) for (const x of row.secrets) expect(keyId(x.value)).toBe(NEW_ID);
    await prisma.deployment.delete({ where: { id: lost.deploymentId } });
  });

  it("`npm run secrets:rotate` rotates a database from the environment's keys; exit 1 names what it could not open", async () => {
    // On PostgreSQL the app's own database (the script runs beside a live service); on PGlite a data
    // directory of its own (seeded, migrated), opened only while the script is not running (one process owns it).
    const dataDir = seededDataDir("dcp-rotate-");
    const pgUrl = t.app.config.database.kind === "postgres" ? t.app.config.database.url : null;
    const withDb = async <T>(fn: (db: Database) => Promise<T>): Promise<T> => {
      if (pgUrl) return fn(t.app.db);
      const db = await openDatabase({ kind: "pglite", dataDir: join(dataDir, "pglite") });
      try {
        return await fn(db);
      } finally {
        await db.close();
      }
    };
    const rotate = async () => {
      const env = {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        DATA_DIR: dataDir,
        SECRETS_KEY: NEW.toString("base64"),
        SECRETS_KEY_PREVIOUS: OLD.toString("base64"),
        ...(pgUrl ? { DATABASE_URL: pgUrl } : {}),
      };
      const result = await run("npm", ["run", "--silent", "secrets:rotate"], { env }).then(
        ({ stdout }) => ({ code: 0, stdout }),
        (err: { code: number; stdout: string }) => ({ code: err.code, stdout: err.stdout }),
      );
      t.guard.record("secrets:rotate output", result.stdout);
      return { code: result.code, summary: JSON.parse(result.stdout.trim().split("\n").at(-1)!) };
    };

    const { good, lost } = await withDb(async (db) => {
      if (!pgUrl) await migrate(db.sql);
      const owner = pgUrl ? ws : await createWorkspace(db.prisma);
      return {
        good: await seed(db.prisma, owner.workspaceId, oldBox),
        lost: await seed(db.prisma, owner.workspaceId, new SecretBox(UNKNOWN)),
      };
    });
    const lostBefore = await withDb((db) => storedSecrets(db.prisma, lost));

    const first = await rotate();
    expect(first.code).toBe(1);
    expect(first.summary.msg).toContain("could not be rotated");
    expect(first.summary.failed.map((f: { id: string }) => f.id).sort()).toEqual([lost.deploymentId, ...lost.revisionIds].sort());
    await withDb(async (db) => {
      for (const row of await storedSecrets(db.prisma, good)) {
        expect(row.secrets.map((x) => newOnly.open(x.value))).toEqual(good.plain.map((p) => p.value));
      }
      expect(await storedSecrets(db.prisma, lost)).toEqual(lostBefore);
      await db.prisma.deployment.delete({ where: { id: lost.deploymentId } });
    });

    const second = await rotate();
    expect(second.code).toBe(0);
    expect(second.summary.msg).toBe("every stored secret is sealed under the current key");
    expect(second.summary.failed).toEqual([]);
    expect(second.summary.deployments.rotated).toBe(0);
  }, 180_000);
});
