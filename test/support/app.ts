import { randomUUID } from "node:crypto";
import { cpSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { inject } from "vitest";
import { type App, type BuildOptions, buildApp } from "../../src/app.js";
import { loadConfig } from "../../src/config.js";
import { type Database, openDatabase } from "../../src/db/client.js";
import { createWorkspace, type NewWorkspace } from "../../src/core/workspaces.js";
import { createLogger } from "../../src/logger.js";
import { adminQuery, withDatabase } from "./global-setup.js";
import { LeakGuard } from "./leak-guard.js";
import { lendPglite } from "./pglite-pool.js";
import { contractViolation } from "./openapi-contract.js";

export const TEST_SECRETS_KEY = Buffer.alloc(32, 7).toString("base64");
export const TEST_JWT_SECRET = "test-jwt-secret-that-is-at-least-32-characters";

let snapshot: Blob | null = null;

/** A database of its own for one test file: a copy of the migrated template, or the PGlite snapshot. */
export async function createTestDatabase(): Promise<{ url: string } | { snapshot: Blob }> {
  const template = inject("pgTemplate");
  if (template) {
    const name = `dcp_t_${process.ppid}_${randomUUID().replace(/-/g, "").slice(0, 12)}`;
    await adminQuery(template.adminUrl, `CREATE DATABASE ${name} TEMPLATE ${template.name}`);
    return { url: withDatabase(template.adminUrl, name) };
  }
  snapshot ??= new Blob([readFileSync(inject("pgliteSnapshotPath")!)]);
  return { snapshot };
}

/**
 * A new DATA_DIR (under the system's temporary folder, named from `prefix`) for a server, script or
 * app of its own on the embedded database. In a PGlite run its database (DATA_DIR/pglite) is already
 * there, migrated: a copy of the one global-setup prepared, so that the first start opens it instead
 * of running initdb and every migration (3 s of CPU on a quiet machine, several times that on a busy
 * one). For tests whose subject is not that first start; test/app/startup.test.ts starts on an empty
 * folder. In a PostgreSQL run there is no prepared database and the folder is empty, as on a first start.
 */
export function seededDataDir(prefix = "dcp-seeded-"): string {
  const dataDir = mkdtempSync(join(tmpdir(), prefix));
  const prepared = inject("pgliteDataDir");
  if (prepared) cpSync(prepared, dataDir, { recursive: true });
  return dataDir;
}

/**
 * Runs `scenario` (a server process of its own, started with `env`) on the backend this run tests:
 * PGlite in a plain run, in a data directory seeded with the migrated database (the server's first
 * start skips initdb and migrations); PostgreSQL when TEST_DATABASE_URL is set, in a database of its
 * own. `open` opens that database beside the server. The data directory is removed afterwards.
 */
export async function onThisRunsBackend(prefix: string, scenario: (env: Record<string, string>, open: () => Promise<Database>) => Promise<void>): Promise<void> {
  const postgres = process.env.TEST_DATABASE_URL ? await createTestDatabase() : null;
  if (postgres && !("url" in postgres)) throw new Error("expected a PostgreSQL database");
  const dataDir = postgres ? mkdtempSync(join(tmpdir(), prefix)) : seededDataDir(prefix);
  try {
    if (postgres) await scenario({ DATABASE_URL: postgres.url, DATA_DIR: dataDir }, () => openDatabase({ kind: "postgres", url: postgres.url }));
    else await scenario({ DATA_DIR: dataDir }, () => openDatabase({ kind: "pglite", dataDir: `${dataDir}/pglite` }));
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/** The backend this run tests, as test names say it. */
export const THIS_RUNS_BACKEND = process.env.TEST_DATABASE_URL ? "PostgreSQL" : "PGlite";

export interface TestApp {
  /** Its fetch is watched by the guard (a server started with app.start() is not). */
  app: App;
  /**
   * Sees every log line (at trace level, unless options gave a logger of their own) and every request
   * and answer through app.fetch; the secret values of request bodies are registered as they pass.
   */
  guard: LeakGuard;
  /** A new organisation with one workspace and a key bound to it. */
  workspace(options?: { orgWide?: boolean }): Promise<NewWorkspace>;
  /** Calls the app through app.fetch, with JSON in and out. */
  request(method: string, path: string, options?: RequestOptions): Promise<TestResponse>;
  /** Fails when a registered secret showed in a log line, an answer or (in plain) a database row. */
  assertNoLeaks(): Promise<void>;
  /** Checks for leaks (so every test file does), then stops the app. */
  close(): Promise<void>;
}

export interface RequestOptions {
  key?: string;
  body?: unknown;
  /** Sent as is, for malformed-body tests (bytes for bodies that are not UTF-8). */
  rawBody?: string | Uint8Array<ArrayBuffer>;
  headers?: Record<string, string>;
}

export interface TestResponse {
  status: number;
  // Response bodies are whatever the API returns; tests assert on their shape.
  body: any;
  headers: Headers;
  text: string;
}

export interface TestAppOptions extends Omit<BuildOptions, "pgliteSnapshot" | "pgliteLease"> {
  /**
   * Register the secrets of the bodies the app accepts (default). The fuzzers turn it off: their
   * values come from a small dictionary shared by every field ("internal_container"), so a value
   * sent as a secret in one body shows in another field's answer by design; they guard the secret of
   * their fixtures instead.
   */
  registerSecrets?: boolean;
}

/**
 * Builds the app as main.ts does, on a database of its own (or `database`, to run two instances on
 * one PostgreSQL), with a short pipeline step, its logs at trace level into a leak guard, and its
 * fetch watched by that guard: during the whole suite, no answer or log line may hold a secret.
 */
export async function startTestApp(
  env: Record<string, string | undefined> = {},
  database?: { url: string } | { snapshot: Blob },
  { registerSecrets = true, ...options }: TestAppOptions = {},
): Promise<TestApp> {
  const db = database ?? (await createTestDatabase());
  const config = loadConfig({
    DATABASE_URL: "url" in db ? db.url : "memory://",
    DATA_DIR: mkdtempSync(join(tmpdir(), "dcp-data-")),
    SECRETS_KEY: TEST_SECRETS_KEY,
    JWT_SECRET: TEST_JWT_SECRET,
    LOG_LEVEL: "trace",
    PIPELINE_STEP_MS: "20",
    PORT: "0",
    METRICS_PORT: "0",
    ...env,
  });
  const guard = new LeakGuard();
  // A database of the app's own on PGlite is a lent one (pglite-pool.ts): as new, but opened once per worker.
  const lease = !database && "snapshot" in db ? await lendPglite(db.snapshot) : undefined;
  const app = await buildApp(config, {
    logger: createLogger(config.logLevel, guard.destination),
    ...options,
    ...(lease ? { pgliteLease: lease } : { pgliteSnapshot: "snapshot" in db ? db.snapshot : undefined }),
  }).catch(async (err: unknown) => {
    await lease?.giveBack();
    throw err;
  });
  app.fetch = watched(app.fetch, guard, registerSecrets);
  const assertNoLeaks = () => guard.assertNoLeaks(app.db.sql);
  return {
    app,
    guard,
    workspace: (options) => createWorkspace(app.db.prisma, { name: `ws-${randomUUID().slice(0, 8)}`, ...options }),
    request: (method, path, options) => request(app, method, path, options),
    assertNoLeaks,
    async close() {
      try {
        await assertNoLeaks();
      } finally {
        await app.stop();
      }
    },
  };
}

/** Streams are left alone: reading a copy to its end would wait for the stream to end. */
const STREAMING = /^(text\/event-stream|multipart\/)/;

/**
 * app.fetch, with every answer recorded, and the secrets of every JSON request body the service
 * accepted registered: the values it stores. (A refused body's secrets are not stored; that a 422 does
 * not echo them is proven in test/reliability/secrets-end-to-end.test.ts.)
 */
function watched(fetch: App["fetch"], guard: LeakGuard, registerSecrets: boolean): App["fetch"] {
  return async (request) => {
    const json = registerSecrets && request.body && request.headers.get("content-type")?.includes("json");
    const body = json ? await request.clone().text() : null;
    const response = await fetch(request);
    if (body && response.ok) guard.secretsIn(body);
    const { pathname } = new URL(request.url);
    const where = `${request.method} ${pathname} -> ${response.status}`;
    const streaming = STREAMING.test(response.headers.get("content-type") ?? "");
    const text = streaming || !response.body ? "" : await response.clone().text();
    guard.recordResponse(where, response.headers, text);
    // Every answer matches what openapi.json documents for it (test/support/openapi-contract.ts).
    if (!streaming) {
      const violation = contractViolation(request.method, pathname, response.status, response.headers.get("content-type"), text);
      if (violation) throw new Error(`the answer does not match openapi.json: ${violation}`);
    }
    return response;
  };
}

export async function request(app: App, method: string, path: string, options: RequestOptions = {}): Promise<TestResponse> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.key) headers["x-api-key"] = options.key;
  let body: string | Uint8Array<ArrayBuffer> | undefined = options.rawBody;
  if (options.body !== undefined) {
    body = JSON.stringify(options.body);
    headers["content-type"] = "application/json";
  }
  const response = await app.fetch(new Request(`http://test${path}`, { method, headers, body }));
  const text = await response.text();
  let parsed: unknown = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = text;
  }
  return { status: response.status, body: parsed, headers: response.headers, text };
}
