import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { existsSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildApp } from "../../src/app.js";
import { loadConfig } from "../../src/config.js";
import { rotateSecrets } from "../../src/core/secret-rotation.js";
import { SecretBox } from "../../src/core/secrets.js";
import { createWorkspace, type NewWorkspace } from "../../src/core/workspaces.js";
import { type Database, openDatabase, type PrismaClient } from "../../src/db/client.js";
import { LOCK_FILE } from "../../src/db/data-dir-lock.js";
import { migrate } from "../../src/db/migrate.js";
import { createLogger } from "../../src/logger.js";
import { skipDatabaseIndependent } from "../support/database-independent.js";
import { CIPHERTEXT } from "../support/leak-guard.js";
import { type TestApp, seededDataDir, startTestApp, TEST_JWT_SECRET } from "../support/app.js";

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

interface SeededOAuth {
  providerId: string;
  tokenId: string;
  flowId: string;
  plain: { clientSecret: string; accessToken: string; refreshToken: string; codeVerifier: string };
}

/** An OAuth provider, a token and a flow whose sealed columns `box` sealed, as an earlier key left them. */
async function seedOAuth(prisma: PrismaClient, owner: NewWorkspace, box: SecretBox): Promise<SeededOAuth> {
  const plain = { clientSecret: t.guard.secret(), accessToken: t.guard.secret(), refreshToken: t.guard.secret(), codeVerifier: t.guard.secret() };
  const slug = `p-${randomUUID().slice(0, 8)}`;
  const provider = await prisma.oAuthProvider.create({
    data: {
      workspaceId: owner.workspaceId,
      organizationId: owner.organizationId,
      providerId: slug,
      name: slug,
      clientId: "client",
      clientSecret: box.seal(plain.clientSecret),
      authUrl: "https://provider.example/authorize",
      tokenUrl: "https://provider.example/token",
    },
  });
  const token = await prisma.oAuthToken.create({
    data: {
      workspaceId: owner.workspaceId,
      oauthProviderId: provider.id,
      providerId: slug,
      owner: "user:someone",
      accessToken: box.seal(plain.accessToken),
      refreshToken: box.seal(plain.refreshToken),
      tokenUrl: provider.tokenUrl,
    },
  });
  const flow = await prisma.oAuthFlow.create({
    data: {
      workspaceId: owner.workspaceId,
      oauthProviderId: provider.id,
      owner: "user:someone",
      stateHash: randomUUID(),
      codeVerifier: box.seal(plain.codeVerifier),
      redirectUri: "https://dcp.example/v2/auth/callback",
      tokenUrl: provider.tokenUrl,
      status: "pending",
      expiresAt: new Date(Date.now() + 600_000),
    },
  });
  return { providerId: provider.id, tokenId: token.id, flowId: flow.id, plain };
}

/** The seeded rows' sealed columns and updated_at, as stored. */
async function storedOAuth(prisma: PrismaClient, s: SeededOAuth) {
  const provider = await prisma.oAuthProvider.findUniqueOrThrow({ where: { id: s.providerId } });
  const token = await prisma.oAuthToken.findUniqueOrThrow({ where: { id: s.tokenId } });
  const flow = await prisma.oAuthFlow.findUniqueOrThrow({ where: { id: s.flowId } });
  return {
    sealed: { clientSecret: provider.clientSecret!, accessToken: token.accessToken, refreshToken: token.refreshToken!, codeVerifier: flow.codeVerifier! },
    updatedAt: [provider.updatedAt, token.updatedAt, flow.updatedAt].map((d) => d.getTime()),
  };
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
    expect(t.app.deps.secrets.open(sealed)).toBe("opened-with-previous");
    expect(keyId(t.app.deps.secrets.seal("x"))).toBe(NEW_ID);
  });

  it("re-seals every stored value under the current key without loss, and leaves updated_at alone", async () => {
    const prisma = t.app.db.prisma;
    const seeded = [await seed(prisma, ws.workspaceId, oldBox), await seed(prisma, ws.workspaceId, oldBox, 3)];
    const before = await Promise.all(seeded.map((s) => storedSecrets(prisma, s)));
    for (const rows of before) for (const row of rows) for (const s of row.secrets) expect(keyId(s.value)).toBe(OLD_ID);

    const report = await rotateSecrets(prisma, t.app.deps.secrets, { batchSize: 2 });
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

    const again = await rotateSecrets(prisma, t.app.deps.secrets);
    expect(again.deployments.rotated + again.revisions.rotated).toBe(0);
    expect(again.deployments.scanned).toBe(report.deployments.scanned);
  });

  it("re-seals only the old values of a row that mixes keys", async () => {
    const prisma = t.app.db.prisma;
    const s = await seed(prisma, ws.workspaceId, oldBox);
    const current = newOnly.seal("already-new");
    const mixed = [...oldBox.sealAll(s.plain), { name: "NEW_ONE", value: current }];
    await prisma.deployment.update({ where: { id: s.deploymentId }, data: { secrets: json(mixed) } });
    await rotateSecrets(prisma, t.app.deps.secrets);
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
    const report = await rotateSecrets(prisma, t.app.deps.secrets);
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

  it("re-seals OAuth client secrets, tokens and PKCE verifiers, and leaves updated_at alone", async () => {
    const prisma = t.app.db.prisma;
    const seeded = [await seedOAuth(prisma, ws, oldBox), await seedOAuth(prisma, ws, oldBox)];
    const before = await Promise.all(seeded.map((s) => storedOAuth(prisma, s)));
    for (const b of before) for (const v of Object.values(b.sealed)) expect(keyId(v)).toBe(OLD_ID);

    const report = await rotateSecrets(prisma, t.app.deps.secrets, { batchSize: 1 });
    expect(report.failed).toEqual([]);
    expect(report.oauth_providers.rotated).toBeGreaterThanOrEqual(2);
    expect(report.oauth_tokens.rotated).toBeGreaterThanOrEqual(2);
    expect(report.oauth_flows.rotated).toBeGreaterThanOrEqual(2);
    expect(report.remaining).toEqual({ deployments: 0, revisions: 0, oauth_providers: 0, oauth_tokens: 0, oauth_flows: 0 });
    for (const [i, s] of seeded.entries()) {
      const after = await storedOAuth(prisma, s);
      expect(after.updatedAt).toEqual(before[i]!.updatedAt);
      for (const v of Object.values(after.sealed)) {
        expect(v).toMatch(CIPHERTEXT);
        expect(keyId(v)).toBe(NEW_ID);
      }
      // Only the new key is needed from now on.
      expect(Object.fromEntries(Object.entries(after.sealed).map(([k, v]) => [k, newOnly.open(v)]))).toEqual(s.plain);
    }

    const again = await rotateSecrets(prisma, t.app.deps.secrets);
    expect(again.oauth_providers.rotated + again.oauth_tokens.rotated + again.oauth_flows.rotated).toBe(0);
    expect(again.oauth_tokens.scanned).toBe(report.oauth_tokens.scanned);
  });

  it("reports an OAuth value no configured key opens, by table and column, and leaves its row exactly as it was", async () => {
    const prisma = t.app.db.prisma;
    const lost = await seedOAuth(prisma, ws, oldBox);
    // A token whose refresh token alone is under an unknown key: its access token is not re-sealed either (a row is written whole or not at all).
    await prisma.oAuthToken.update({ where: { id: lost.tokenId }, data: { refreshToken: new SecretBox(UNKNOWN).seal(lost.plain.refreshToken) } });
    const before = await storedOAuth(prisma, lost);
    const report = await rotateSecrets(prisma, t.app.deps.secrets);
    expect(report.failed).toEqual([{ table: "oauth_tokens", id: lost.tokenId, reason: expect.stringMatching(/^refresh_token is sealed under a key .*SECRETS_KEY_PREVIOUS/) }]);
    expect(report.remaining).toMatchObject({ oauth_tokens: 1, oauth_providers: 0, oauth_flows: 0 });
    const after = await storedOAuth(prisma, lost);
    expect(after.sealed.accessToken).toBe(before.sealed.accessToken);
    expect(after.sealed.refreshToken).toBe(before.sealed.refreshToken);
    expect(keyId(after.sealed.clientSecret)).toBe(NEW_ID);
    expect(keyId(after.sealed.codeVerifier)).toBe(NEW_ID);
    await prisma.oAuthProvider.delete({ where: { id: lost.providerId } });
  });

  it("does not claim every value is under the current key when one was sealed under another behind its scan", async () => {
    const prisma = t.app.db.prisma;
    await seedOAuth(prisma, ws, oldBox);
    const other = await createWorkspace(prisma);
    // A replica still on the old key stores a provider while the rotation reads that table, with an id
    // the scan has gone past (the lowest): the rotation cannot have re-sealed it, and must say so.
    let written = false;
    const writing = new Proxy(prisma, {
      get(target, prop, receiver) {
        const value = Reflect.get(target, prop, receiver);
        if (prop !== "$queryRawUnsafe") return typeof value === "function" ? value.bind(target) : value;
        return async (query: string, ...values: unknown[]) => {
          const rows = await target.$queryRawUnsafe(query, ...values);
          if (!written && /FROM "oauth_providers" WHERE "id" > /.test(query)) {
            written = true;
            await target.$executeRawUnsafe(
              `INSERT INTO "oauth_providers" ("id", "workspace_id", "organization_id", "provider_id", "name", "client_id", "client_secret", "auth_url", "token_url")
               VALUES ('00000000-0000-0000-0000-000000000001', $1::uuid, $2::uuid, 'late', 'late', 'client', $3, 'https://p.example/a', 'https://p.example/t')`,
              other.workspaceId,
              other.organizationId,
              oldBox.seal(t.guard.secret()),
            );
          }
          return rows;
        };
      },
    });
    const report = await rotateSecrets(writing, t.app.deps.secrets);
    expect(written).toBe(true);
    expect(report.failed).toEqual([]);
    expect(report.remaining.oauth_providers).toBe(1);
    // Run again (every replica on the new key by then): it is re-sealed.
    const again = await rotateSecrets(prisma, t.app.deps.secrets);
    expect(again.oauth_providers.rotated).toBe(1);
    expect(Object.values(again.remaining)).toEqual([0, 0, 0, 0, 0]);
    await prisma.organization.delete({ where: { id: other.organizationId } });
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

    const { good, lost, goodOAuth, lostOAuth } = await withDb(async (db) => {
      if (!pgUrl) await migrate(db.sql);
      const owner = pgUrl ? ws : await createWorkspace(db.prisma);
      return {
        good: await seed(db.prisma, owner.workspaceId, oldBox),
        lost: await seed(db.prisma, owner.workspaceId, new SecretBox(UNKNOWN)),
        goodOAuth: await seedOAuth(db.prisma, owner, oldBox),
        lostOAuth: await seedOAuth(db.prisma, owner, new SecretBox(UNKNOWN)),
      };
    });
    const lostBefore = await withDb(async (db) => ({ secrets: await storedSecrets(db.prisma, lost), oauth: await storedOAuth(db.prisma, lostOAuth) }));

    const first = await rotate();
    expect(first.code).toBe(1);
    expect(first.summary.msg).toContain("could not be rotated");
    expect(first.summary.failed.map((f: { id: string }) => f.id).sort()).toEqual(
      [lost.deploymentId, ...lost.revisionIds, lostOAuth.providerId, lostOAuth.tokenId, lostOAuth.flowId].sort(),
    );
    await withDb(async (db) => {
      for (const row of await storedSecrets(db.prisma, good)) {
        expect(row.secrets.map((x) => newOnly.open(x.value))).toEqual(good.plain.map((p) => p.value));
      }
      const oauth = await storedOAuth(db.prisma, goodOAuth);
      expect(Object.fromEntries(Object.entries(oauth.sealed).map(([k, v]) => [k, newOnly.open(v)]))).toEqual(goodOAuth.plain);
      expect({ secrets: await storedSecrets(db.prisma, lost), oauth: await storedOAuth(db.prisma, lostOAuth) }).toEqual(lostBefore);
      await db.prisma.deployment.delete({ where: { id: lost.deploymentId } });
      await db.prisma.oAuthProvider.delete({ where: { id: lostOAuth.providerId } });
    });

    const second = await rotate();
    expect(second.code).toBe(0);
    expect(second.summary.msg).toBe("every stored secret is sealed under the current key");
    expect(second.summary.failed).toEqual([]);
    expect(second.summary.deployments.rotated).toBe(0);
    expect(second.summary.oauth_tokens.rotated).toBe(0);
    expect(second.summary.remaining).toEqual({ deployments: 0, revisions: 0, oauth_providers: 0, oauth_tokens: 0, oauth_flows: 0 });
    rmSync(dataDir, { recursive: true, force: true });
  }, 180_000);
});

describe.skipIf(skipDatabaseIndependent)("`npm run secrets:rotate` on the embedded database", () => {
  it("refuses while a service has the DATA_DIR, naming it, and rotates once it has stopped", async () => {
    // In a PostgreSQL run the folder is empty: the service's first start initialises it.
    const dataDir = seededDataDir("dcp-rotate-lock-");
    try {
      const settings = { DATA_DIR: dataDir, SECRETS_KEY: NEW.toString("base64"), SECRETS_KEY_PREVIOUS: OLD.toString("base64") };
      const service = await buildApp(loadConfig({ ...settings, JWT_SECRET: TEST_JWT_SECRET, PIPELINE_WORKER: "off", METRICS_PORT: "off" }), {
        logger: createLogger("silent"),
      });
      let stopped = false;
      try {
        const owner = await createWorkspace(service.db.prisma);
        const s = await seed(service.db.prisma, owner.workspaceId, oldBox);
        const o = await seedOAuth(service.db.prisma, owner, oldBox);
        const before = { secrets: await storedSecrets(service.db.prisma, s), oauth: await storedOAuth(service.db.prisma, o) };
        const env = { PATH: process.env.PATH, HOME: process.env.HOME, ...settings };
        const rotate = () =>
          run("npm", ["run", "--silent", "secrets:rotate"], { env }).then(
            ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
            (err: { code: number; stdout: string; stderr: string }) => ({ code: err.code, stdout: err.stdout, stderr: err.stderr }),
          );

        const refused = await rotate();
        expect(refused.code).toBe(1);
        expect(refused.stderr).toContain(`DATA_DIR ${dataDir} is in use by process ${process.pid} (control plane server)`);
        expect(refused.stderr).not.toMatch(/Aborted|RuntimeError|\n\s+at /);
        expect(refused.stdout).toBe("");
        // The service's database is as it was, and still serves.
        expect({ secrets: await storedSecrets(service.db.prisma, s), oauth: await storedOAuth(service.db.prisma, o) }).toEqual(before);
        expect(JSON.parse(readLock(dataDir)).pid).toBe(process.pid);

        await service.stop();
        stopped = true;
        const done = await rotate();
        expect(done.code, done.stderr).toBe(0);
        const summary = JSON.parse(done.stdout.trim().split("\n").at(-1)!);
        expect(summary.msg).toBe("every stored secret is sealed under the current key");
        expect(summary).toMatchObject({ deployments: { rotated: 1 }, revisions: { rotated: 2 }, oauth_providers: { rotated: 1 }, oauth_tokens: { rotated: 1 }, oauth_flows: { rotated: 1 } });
        // The script let the folder go again.
        expect(existsSync(join(dataDir, LOCK_FILE))).toBe(false);
      } finally {
        if (!stopped) await service.stop();
      }
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 180_000);
});

const readLock = (dataDir: string) => readFileSync(join(dataDir, LOCK_FILE), "utf8");

describe.skipIf(skipDatabaseIndependent)("`npm run secrets:rotate`'s arguments and key", () => {
  const rotate = (args: string[], env: Record<string, string>) =>
    run("npm", ["run", "--silent", "secrets:rotate", "--", ...args], { env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env } }).then(
      ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
      (err: { code: number; stdout: string; stderr: string }) => ({ code: err.code, stdout: err.stdout, stderr: err.stderr }),
    );

  it("takes no arguments: --help tells its usage, anything else is refused with it, and nothing runs", async () => {
    const dataDir = seededDataDir("dcp-rotate-args-");
    try {
      const env = { DATA_DIR: dataDir, SECRETS_KEY: NEW.toString("base64") };
      const help = await rotate(["--help"], env);
      expect(help).toMatchObject({ code: 0, stdout: "" });
      expect(help.stderr).toMatch(/^usage: npm run secrets:rotate\n/);
      for (const args of [["--dry-run"], ["bogus"]]) {
        const refused = await rotate(args, env);
        expect(refused.code, args.join(" ")).toBe(2);
        expect(refused.stderr, args.join(" ")).toContain("usage: npm run secrets:rotate");
      }
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 60_000);

  it("never makes a key of its own: without SECRETS_KEY it needs the DATA_DIR's key, and refuses where there is none", async () => {
    const dataDir = seededDataDir("dcp-rotate-nokey-");
    try {
      const refused = await rotate([], { DATA_DIR: dataDir, SECRETS_KEY_PREVIOUS: OLD.toString("base64") });
      expect(refused.code).toBe(2);
      expect(refused.stderr).toContain(`SECRETS_KEY is not set and ${join(dataDir, "secrets.key")} does not exist`);
      expect(existsSync(join(dataDir, "secrets.key"))).toBe(false);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 60_000);
});
