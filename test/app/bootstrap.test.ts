import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { rmSync } from "node:fs";
import { Writable } from "node:stream";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { type App, buildApp } from "../../src/app.js";
import { createWorkspace } from "../../src/core/workspaces.js";
import { ConfigError, loadConfig } from "../../src/config.js";
import { createLogger } from "../../src/logger.js";
import { createTestDatabase, request, seededDataDir, TEST_SECRETS_KEY } from "../support/app.js";
import { listenerBody } from "../support/fixtures.js";
import { skipDatabaseIndependent } from "../support/database-independent.js";
import { serverCommand } from "../support/server-process.js";

/**
 * A database that outlives an app, so that a second build is a restart: a database of its own on
 * PostgreSQL, or on PGlite the embedded default, a data directory on disk. Either one is migrated and
 * empty when the first build opens it: these tests are about the bootstrap settings, not about
 * initialising a database (test/app/startup.test.ts starts on an empty folder).
 */
const dataDirs: string[] = [];
afterAll(() => {
  for (const dir of dataDirs) rmSync(dir, { recursive: true, force: true });
});

async function persistentDatabase(): Promise<Record<string, string | undefined>> {
  const dataDir = seededDataDir("dcp-boot-");
  dataDirs.push(dataDir);
  const db = await createTestDatabase();
  return { DATA_DIR: dataDir, DATABASE_URL: "url" in db ? db.url : undefined };
}

interface Booted {
  app: App;
  /** Start-up's log lines, parsed. */
  lines: Record<string, unknown>[];
  get(key: string): ReturnType<typeof request>;
}

/** Builds the app as main.ts does, with a logger whose JSON lines are kept. */
async function boot(database: Record<string, string | undefined>, env: Record<string, string> = {}): Promise<Booted> {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk, _encoding, done) {
      for (const line of String(chunk).split("\n").filter(Boolean)) lines.push(JSON.parse(line));
      done();
    },
  });
  const config = loadConfig({ SECRETS_KEY: TEST_SECRETS_KEY, PIPELINE_STEP_MS: "20", LOG_LEVEL: "info", ...database, ...env });
  const app = await buildApp(config, { logger: createLogger("info", sink) });
  return { app, lines, get: (key) => request(app, "GET", "/v2/listeners", { key }) };
}

const counts = async (app: App) => ({
  organizations: await app.db.prisma.organization.count(),
  workspaces: await app.db.prisma.workspace.count(),
  keys: await app.db.prisma.apiKey.count(),
});

const addListener = (app: App, key: string, computeId: string) =>
  request(app, "POST", "/v2/listeners", { key, body: listenerBody({ compute_id: computeId }) });
const computeIds = (res: { body: { resources: { compute_id: string }[] } }) => res.body.resources.map((l) => l.compute_id);

// Each case starts the app two or three times on a persistent database.
describe("bootstrap", { timeout: 120_000 }, () => {
  it("BOOTSTRAP_API_KEY alone makes a workspace with that key, once across restarts", async () => {
    const key = `boot-${randomUUID()}`;
    const db = await persistentDatabase();
    const first = await boot(db, { BOOTSTRAP_API_KEY: key });
    expect((await first.get(key)).status).toBe(200);
    await addListener(first.app, key, "kept");
    expect(await counts(first.app)).toEqual({ organizations: 1, workspaces: 1, keys: 1 });
    // The key is provisioned, never printed: the operator already has it.
    expect(JSON.stringify(first.lines)).not.toContain(key);
    await first.app.stop();

    const second = await boot(db, { BOOTSTRAP_API_KEY: key });
    try {
      expect(await counts(second.app)).toEqual({ organizations: 1, workspaces: 1, keys: 1 });
      expect(computeIds(await second.get(key))).toEqual(["kept"]);
    } finally {
      await second.app.stop();
    }
  });

  it("BOOTSTRAP_TENANT_ID names the workspace; a second key for it joins the same workspace", async () => {
    const tenant = randomUUID();
    const key1 = `boot-${randomUUID()}`;
    const key2 = `boot-${randomUUID()}`;
    const db = await persistentDatabase();
    const first = await boot(db, { BOOTSTRAP_API_KEY: key1, BOOTSTRAP_TENANT_ID: tenant.toUpperCase() });
    expect((await first.app.db.prisma.apiKey.findFirstOrThrow()).workspaceId).toBe(tenant);
    await addListener(first.app, key1, "shared");
    expect((await request(first.app, "GET", "/v2/listeners", { key: key1, headers: { "X-Tenant-Id": tenant } })).status).toBe(200);
    await first.app.stop();

    const again = await boot(db, { BOOTSTRAP_API_KEY: key1, BOOTSTRAP_TENANT_ID: tenant });
    expect(await counts(again.app)).toEqual({ organizations: 1, workspaces: 1, keys: 1 });
    await again.app.stop();

    const second = await boot(db, { BOOTSTRAP_API_KEY: key2, BOOTSTRAP_TENANT_ID: tenant });
    try {
      expect(await counts(second.app)).toEqual({ organizations: 1, workspaces: 1, keys: 2 });
      for (const key of [key1, key2]) expect(computeIds(await second.get(key)), key).toEqual(["shared"]);
    } finally {
      await second.app.stop();
    }
  });

  it("refuses to start when BOOTSTRAP_API_KEY already belongs to another workspace than BOOTSTRAP_TENANT_ID", async () => {
    const key = `boot-${randomUUID()}`;
    const db = await persistentDatabase();
    const first = await boot(db, { BOOTSTRAP_API_KEY: key, BOOTSTRAP_TENANT_ID: randomUUID() });
    await first.app.stop();
    await expect(boot(db, { BOOTSTRAP_API_KEY: key, BOOTSTRAP_TENANT_ID: randomUUID() })).rejects.toThrow(/another workspace/);
  });

  it("BOOTSTRAP_API_KEY on an existing single-workspace data folder binds to that workspace, and says so", async () => {
    const db = await persistentDatabase();
    const first = await boot(db);
    const firstKey = first.lines.find((l) => l.api_key !== undefined)!.api_key as string;
    await addListener(first.app, firstKey, "existing");
    await first.app.stop();

    const key = `boot-${randomUUID()}`;
    const second = await boot(db, { BOOTSTRAP_API_KEY: key });
    try {
      expect(await counts(second.app)).toEqual({ organizations: 1, workspaces: 1, keys: 2 });
      expect(computeIds(await second.get(key))).toEqual(["existing"]);
      expect(second.lines).toEqual(expect.arrayContaining([expect.objectContaining({ level: 30, msg: expect.stringContaining("bound to the existing workspace") })]));
    } finally {
      await second.app.stop();
    }
  });

  it("BOOTSTRAP_API_KEY beside several workspaces, none named, makes a new one and warns loudly", async () => {
    const db = await persistentDatabase();
    const first = await boot(db);
    await createWorkspace(first.app.db.prisma, { name: "second" });
    await first.app.stop();
    const second = await boot(db, { BOOTSTRAP_API_KEY: `boot-${randomUUID()}` });
    try {
      expect(await counts(second.app)).toMatchObject({ workspaces: 3 });
      expect(second.lines).toEqual(
        expect.arrayContaining([expect.objectContaining({ level: 40, other_workspaces: 2, msg: expect.stringContaining("NEW, empty workspace") })]),
      );
    } finally {
      await second.app.stop();
    }
  });

  it("with neither set and no key in the database, creates a workspace and a key and logs the key once", async () => {
    const db = await persistentDatabase();
    const first = await boot(db);
    const created = first.lines.filter((l) => l.api_key !== undefined);
    expect(created).toEqual([
      expect.objectContaining({ level: 30, workspace_id: expect.any(String), msg: expect.stringContaining("not shown again") }),
    ]);
    const key = created[0]!.api_key as string;
    expect((await first.get(key)).status).toBe(200);
    await first.app.stop();

    const second = await boot(db);
    try {
      expect(second.lines.some((l) => l.api_key !== undefined)).toBe(false);
      expect(await counts(second.app)).toEqual({ organizations: 1, workspaces: 1, keys: 1 });
      expect((await second.get(key)).status).toBe(200);
    } finally {
      await second.app.stop();
    }
  });
});

// Settings only (the last one starts a process that stops at its settings): a PostgreSQL run would repeat
// the PGlite run's tests (support/database-independent.ts).
// Replicas share a PostgreSQL and may all start at once (an embedded database belongs to one process).
describe.skipIf(!process.env.TEST_DATABASE_URL)("bootstrap by replicas starting together", { timeout: 120_000 }, () => {
  const together = async (db: Record<string, string | undefined>, env: Record<string, string>) => {
    const started = await Promise.allSettled([boot(db, env), boot(db, env), boot(db, env)]);
    const apps = started.flatMap((s) => (s.status === "fulfilled" ? [s.value] : []));
    return { started, apps, stop: () => Promise.all(apps.map((b) => b.app.stop())) };
  };

  it("with one BOOTSTRAP_API_KEY: every replica starts, and the key has one workspace", async () => {
    const key = `boot-${randomUUID()}`;
    const { started, apps, stop } = await together(await persistentDatabase(), { BOOTSTRAP_API_KEY: key });
    try {
      expect(started.map((s) => (s.status === "rejected" ? String(s.reason) : "started"))).toEqual(["started", "started", "started"]);
      expect(await counts(apps[0]!.app)).toEqual({ organizations: 1, workspaces: 1, keys: 1 });
      for (const b of apps) expect((await b.get(key)).status).toBe(200);
    } finally {
      await stop();
    }
  });

  it("with no key configured: one of them makes the first workspace and prints its key, once", async () => {
    const { started, apps, stop } = await together(await persistentDatabase(), {});
    try {
      expect(started.map((s) => s.status)).toEqual(["fulfilled", "fulfilled", "fulfilled"]);
      expect(await counts(apps[0]!.app)).toEqual({ organizations: 1, workspaces: 1, keys: 1 });
      const printed = apps.flatMap((b) => b.lines.filter((line) => typeof line.api_key === "string"));
      expect(printed).toHaveLength(1);
      expect((await apps[0]!.get(printed[0]!.api_key as string)).status).toBe(200);
    } finally {
      await stop();
    }
  });
});

describe.skipIf(skipDatabaseIndependent)("loadConfig", () => {
  it("has embedded defaults", () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      port: 8080,
      host: "127.0.0.1",
      database: { kind: "pglite", dataDir: "./.data/pglite" },
      dataDir: "./.data",
      bootstrap: {},
      logLevel: "info",
      production: false,
    });
    expect(config.pipeline.stepMs).toBeGreaterThan(0);
  });

  it("reads DATABASE_URL as memory://, postgres:// or postgresql://", () => {
    expect(loadConfig({ DATABASE_URL: "memory://" }).database).toEqual({ kind: "pglite", dataDir: null });
    expect(loadConfig({ DATABASE_URL: "postgres://u@h:5432/d" }).database).toEqual({ kind: "postgres", url: "postgres://u@h:5432/d" });
    expect(loadConfig({ DATABASE_URL: "postgresql://h/d" }).database).toEqual({ kind: "postgres", url: "postgresql://h/d" });
    // A URL that does not parse is refused by name here, not by the driver later with its stack.
    expect(() => loadConfig({ DATABASE_URL: "postgres://[bad" })).toThrow(/DATABASE_URL: must be memory:\/\/ or a postgres:\/\/ URL/);
    expect(loadConfig({ DATA_DIR: "/var/dcp" }).database).toEqual({ kind: "pglite", dataDir: "/var/dcp/pglite" });
  });

  it("turns GraphQL introspection on outside production unless GRAPHQL_INTROSPECTION says otherwise", () => {
    expect(loadConfig({}).graphql.introspection).toBe(true);
    expect(loadConfig({ NODE_ENV: "production" }).graphql.introspection).toBe(false);
    expect(loadConfig({ NODE_ENV: "production", GRAPHQL_INTROSPECTION: "on" }).graphql.introspection).toBe(true);
    expect(loadConfig({ GRAPHQL_INTROSPECTION: "off" }).graphql.introspection).toBe(false);
    expect(() => loadConfig({ GRAPHQL_INTROSPECTION: "yes" })).toThrow(/GRAPHQL_INTROSPECTION/);
  });

  it("names every bad setting at once", () => {
    const bad = {
      PORT: "http",
      HOST: "",
      DATABASE_URL: "mysql://localhost/db",
      BOOTSTRAP_API_KEY: "short",
      BOOTSTRAP_TENANT_ID: "acme",
      JWT_SECRET: "tiny",
      SECRETS_KEY: "not-base64",
      PIPELINE_STEP_MS: "-5",
      PIPELINE_WORKER: "maybe",
      LOG_LEVEL: "loud",
      NODE_ENV: "staging",
    };
    try {
      loadConfig(bad);
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      const problems = (err as ConfigError).problems;
      expect(problems.map((p) => p.split(":")[0]).sort()).toEqual(Object.keys(bad).sort());
      expect((err as Error).message).toContain("DATABASE_URL: must be memory:// or a postgres:// URL");
      expect((err as Error).message).toContain("BOOTSTRAP_API_KEY: must be at least 16 characters");
      expect((err as Error).message).toContain("SECRETS_KEY: must be 32 bytes, base64-encoded");
    }
    expect(() => loadConfig({ PORT: "70000" })).toThrow(/PORT/);
    expect(() => loadConfig({ BOOTSTRAP_TENANT_ID: randomUUID() })).toThrow(/BOOTSTRAP_TENANT_ID: requires BOOTSTRAP_API_KEY/);
  });

  it("reads a number setting only from decimal digits: empty (read as 0, a limit turned off), hex or exponent is refused", () => {
    const numbers = ["PORT", "METRICS_PORT", "AUTH_FAILURES_PER_MINUTE", "RATE_LIMIT_PER_MINUTE", "SUBSCRIPTIONS_PER_CALLER", "PIPELINE_STEP_MS", "DATABASE_START_WAIT_MS", "MAX_BODY_BYTES"];
    for (const name of numbers) {
      for (const value of ["", " ", "0x46B4", "1e2", "1.5", "+5"]) {
        const says = name === "METRICS_PORT" ? "must be a port number, 0 \\(any free port\\) or off" : "must be a whole number in decimal digits";
        expect(() => loadConfig({ [name]: value }), `${name}=${JSON.stringify(value)}`).toThrow(new RegExp(`${name}: ${says}`));
      }
    }
    expect(loadConfig({ PORT: " 8081 ", AUTH_FAILURES_PER_MINUTE: "0", METRICS_PORT: "off" })).toMatchObject({ port: 8081, limits: { authFailuresPerMinute: 0 }, metricsPort: null });
  });

  it("takes a DEPLOYMENT_DOMAIN that is a host name, nothing else", () => {
    for (const domain of ["not a domain/x?y", "a..b", "-a.b", "a_b.c", "https://x.y"]) expect(() => loadConfig({ DEPLOYMENT_DOMAIN: domain }), domain).toThrow(/DEPLOYMENT_DOMAIN: must be a host name/);
    expect(loadConfig({ DEPLOYMENT_DOMAIN: "agents.example.com" }).deploymentDomain).toBe("agents.example.com");
  });

  it("npm start refuses a bad setting with the message on stderr and exit code 2", async () => {
    const run = promisify(execFile);
    const err = await run(...serverCommand(), {
      env: { ...process.env, PORT: "eighty", LOG_LEVEL: "loud", DATABASE_URL: "memory://" },
    }).catch((e: { code: number; stderr: string }) => e);
    expect(err).toMatchObject({ code: 2 });
    expect((err as { stderr: string }).stderr).toMatch(/Invalid configuration:\n {2}- PORT: .+\n {2}- LOG_LEVEL: /);
  });
});
