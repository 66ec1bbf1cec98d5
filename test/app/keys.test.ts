import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { existsSync, rmSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, inject, it } from "vitest";
import { buildApp } from "../../src/app.js";
import { loadConfig } from "../../src/config.js";
import { hashApiKey } from "../../src/core/auth.js";
import { createWorkspace } from "../../src/core/workspaces.js";
import { createLogger } from "../../src/logger.js";
import { createTestDatabase, seededDataDir, startTestApp, TEST_SECRETS_KEY, type TestApp } from "../support/app.js";
import { adminQuery, withDatabase } from "../support/global-setup.js";
import { waitFor } from "../support/wait.js";
import { endOf, subscribeSse, subscribeWs, wsClient } from "../graphql/live.js";
import { createDeployment } from "../graphql/support.js";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const run = promisify(execFile);
const apps: TestApp[] = [];
const dirs: string[] = [];
afterAll(async () => {
  for (const app of apps) await app.close();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe("API keys", { timeout: 180_000 }, () => {
  it("are created (hash only, the value once), listed and revoked by the core", async () => {
    const t = await startTestApp();
    apps.push(t);
    const ws = await t.workspace();
    const { key, summary } = await t.app.core.apiKeys.create({ workspaceId: ws.workspaceId, name: "ci" });
    expect(key).toMatch(/^dcp_/);
    const row = await t.app.db.prisma.apiKey.findUniqueOrThrow({ where: { id: summary.id } });
    expect(row.keyHash).toBe(hashApiKey(key));
    expect(JSON.stringify(row)).not.toContain(key);
    expect((await t.request("GET", "/v2/listeners", { key })).status).toBe(200);
    const listed = (await t.app.core.apiKeys.list()).find((k) => k.id === summary.id)!;
    expect(listed).toMatchObject({ name: "ci", prefix: key.slice(0, 8), workspaceId: ws.workspaceId, revokedAt: null });

    // A prefix is literal: LIKE's wildcards in it match nothing but themselves, also with the "…" list shows.
    // Each one below matches the key as a pattern and never literally: `_` stands where the key has a letter
    // ("dcp_…"'s c), as `${key.slice(0, 5)}_` did not when the key's sixth character was itself a `_`.
    for (const wild of ["%%%%%%", "______", `${key.slice(0, 4)}%%`, `d_p${key.slice(3, 6)}`, "%%%%%%…", `${key.slice(0, 4)}%%…`]) {
      await expect(t.app.core.apiKeys.revoke(wild), wild).rejects.toMatchObject({ code: "NOT_FOUND" });
    }
    expect((await t.request("GET", "/v2/listeners", { key })).status).toBe(200);
    // Bad values are told plainly, by name.
    await expect(t.app.core.apiKeys.create({ workspaceId: "not-a-uuid" })).rejects.toMatchObject({ code: "VALIDATION", message: expect.stringMatching(/^workspaceId: /) });
    await expect(t.app.core.apiKeys.create({ workspaceId: ws.workspaceId, name: "" })).rejects.toMatchObject({ code: "VALIDATION", message: expect.stringMatching(/^name: /) });

    // Cached by the authenticator after that request: revocation still takes effect at once.
    await t.app.core.apiKeys.revoke(summary.id);
    const refused = await t.request("GET", "/v2/listeners", { key });
    expect(refused.status).toBe(401);
    expect(refused.body.detail).toMatch(/revoked/);
    expect((await t.app.core.apiKeys.list()).find((k) => k.id === summary.id)!.revokedAt).toBeInstanceOf(Date);
  });

  it("revoked on one replica stop working on every replica at once (PostgreSQL)", async (ctx) => {
    if (!inject("pgTemplate")) ctx.skip("needs PostgreSQL (TEST_DATABASE_URL): embedded PGlite is one process");
    const db = await createTestDatabase();
    const a = await startTestApp({}, db);
    const b = await startTestApp({}, db);
    apps.push(a, b);
    const ws = await a.workspace();
    const { key, summary } = await a.app.core.apiKeys.create({ workspaceId: ws.workspaceId });
    expect((await b.request("GET", "/v2/listeners", { key })).status).toBe(200);
    // What the key has open on B ends too: its graphql-ws socket (4401) and its SSE stream.
    const { id } = await createDeployment(b, key);
    const live = `subscription($id: ID!) { deploymentStatusChanged(deploymentId: $id) { status } }`;
    const client = wsClient(await b.app.start(), key);
    try {
      const sub = subscribeWs(client, live, { id });
      // Its end is awaited below, after the HTTP check: a rejection meanwhile is not unhandled.
      sub.done.catch(() => {});
      const sse = subscribeSse(b, key, live, { id });
      await waitFor(() => sub.messages.length > 0 && sse.messages.length > 0, Boolean, { what: "the key's subscriptions on B" });

      await a.app.core.apiKeys.revoke(summary.id);
      await expect.poll(async () => (await b.request("GET", "/v2/listeners", { key })).status, { timeout: 30_000 }).toBe(401);
      expect(await endOf(sub.done, "B closing the key's socket")).toEqual({ code: 4401, reason: "This API key has been revoked." });
      expect(await endOf(sse.done, "B ending the key's SSE stream")).toBe("completed");
      expect(sse.messages.at(-1)).toEqual({ errors: [expect.objectContaining({ message: "This API key has been revoked.", extensions: { code: "UNAUTHENTICATED" } })] });
    } finally {
      await client.dispose();
    }
  });

  it("npm run keys -- create|list|revoke", async () => {
    // On PGlite, a data directory whose database is migrated and empty, as a first start leaves it.
    const dataDir = seededDataDir("dcp-keys-");
    dirs.push(dataDir);
    const db = await createTestDatabase();
    const settings: Record<string, string> = { DATA_DIR: dataDir, SECRETS_KEY: TEST_SECRETS_KEY, LOG_LEVEL: "warn", ...("url" in db ? { DATABASE_URL: db.url } : {}) };
    const env: NodeJS.ProcessEnv = { ...process.env, ...settings };
    if (!("url" in db)) delete env.DATABASE_URL;
    const keys = (...args: string[]) => run("npm", ["run", "-s", "keys", "--", ...args], { cwd: ROOT, env });
    // No workspace yet: said plainly.
    await expect(keys("create")).rejects.toMatchObject({ code: 1, stderr: expect.stringContaining("no workspace yet") });
    await expect(keys("frobnicate")).rejects.toMatchObject({ code: 2, stderr: expect.stringContaining("usage:") });
    await expect(keys("create", "--workspace", "not-a-uuid")).rejects.toMatchObject({ code: 2, stderr: expect.stringMatching(/^workspaceId: .*\nusage:/s) });
    // A DATA_DIR with no database (mistyped, say) is said so, and left as it was: no database made there.
    if (!("url" in db)) {
      const nowhere = join(dataDir, "mistyped");
      const elsewhere = (...args: string[]) => run("npm", ["run", "-s", "keys", "--", ...args], { cwd: ROOT, env: { ...env, DATA_DIR: nowhere } });
      await expect(elsewhere("list")).rejects.toMatchObject({ code: 1, stderr: expect.stringContaining(`There is no database in DATA_DIR ${nowhere}`) });
      expect(existsSync(nowhere)).toBe(false);
    } else {
      // The same for a PostgreSQL database the service has never run on: refused, and left empty.
      const template = inject("pgTemplate")!;
      const empty = `dcp_keys_empty_${randomUUID().replace(/-/g, "").slice(0, 12)}`;
      await adminQuery(template.adminUrl, `CREATE DATABASE ${empty}`);
      const emptyUrl = withDatabase(template.adminUrl, empty);
      const elsewhere = (...args: string[]) => run("npm", ["run", "-s", "keys", "--", ...args], { cwd: ROOT, env: { ...env, DATABASE_URL: emptyUrl } });
      await expect(elsewhere("list")).rejects.toMatchObject({ code: 1, stderr: expect.stringContaining("holds no control plane database") });
      const tables = await adminQuery(emptyUrl, `SELECT count(*)::int AS n FROM information_schema.tables WHERE table_schema = 'public'`);
      expect(tables).toEqual([{ n: 0 }]);
      await adminQuery(template.adminUrl, `DROP DATABASE ${empty}`);
    }

    // A workspace, as the first start makes.
    const app = await buildApp(loadConfig({ ...settings, PIPELINE_WORKER: "off", METRICS_PORT: "off" }), { logger: createLogger("silent") });
    const ws = await createWorkspace(app.db.prisma, { name: "keys" });
    await app.stop();

    const created = await keys("create", "--workspace", ws.workspaceId, "--name", "deploy-bot");
    const key = created.stdout.trim();
    expect(key).toMatch(/^dcp_[A-Za-z0-9_-]{32}$/);
    expect(created.stderr).toContain("not shown again");

    const listed = await keys("list");
    expect(listed.stdout.split("\n")[0]).toMatch(/^ID\s+PREFIX\s+WORKSPACE\s+NAME\s+CREATED\s+STATUS$/);
    const line = listed.stdout.split("\n").find((l) => l.includes("deploy-bot"))!;
    expect(line).toContain(`${key.slice(0, 8)}…`);
    expect(line).toContain("active");
    expect(listed.stdout).not.toContain(key);

    // The prefix as list shows it, "…" and all, pasted into revoke.
    const shown = line.split(/\s+/)[1]!;
    expect(shown).toBe(`${key.slice(0, 8)}…`);
    const revoked = await keys("revoke", shown);
    expect(revoked.stdout).toMatch(/^revoked [0-9a-f-]{36}/);
    expect((await keys("list")).stdout.split("\n").find((l) => l.includes("deploy-bot"))).toMatch(/revoked \d{4}-/);
  });
});
