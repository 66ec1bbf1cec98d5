import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { inject } from "vitest";
import { type App, type BuildOptions, buildApp } from "../../src/app.js";
import { loadConfig } from "../../src/config.js";
import { createWorkspace, type NewWorkspace } from "../../src/core/workspaces.js";
import { adminQuery, withDatabase } from "./global-setup.js";

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

export interface TestApp {
  app: App;
  /** A new organisation with one workspace and a key bound to it. */
  workspace(options?: { orgWide?: boolean }): Promise<NewWorkspace>;
  /** Calls the app through app.fetch, with JSON in and out. */
  request(method: string, path: string, options?: RequestOptions): Promise<TestResponse>;
  close(): Promise<void>;
}

export interface RequestOptions {
  key?: string;
  body?: unknown;
  /** Sent as is, for malformed-body tests. */
  rawBody?: string;
  headers?: Record<string, string>;
}

export interface TestResponse {
  status: number;
  // Response bodies are whatever the API returns; tests assert on their shape.
  body: any;
  headers: Headers;
  text: string;
}

/**
 * Builds the app as main.ts does, on a database of its own (or `database`, to run two instances on
 * one PostgreSQL), with a short pipeline step and silent logs unless env says otherwise.
 */
export async function startTestApp(
  env: Record<string, string | undefined> = {},
  database?: { url: string } | { snapshot: Blob },
  options: Omit<BuildOptions, "pgliteSnapshot"> = {},
): Promise<TestApp> {
  const db = database ?? (await createTestDatabase());
  const config = loadConfig({
    DATABASE_URL: "url" in db ? db.url : "memory://",
    DATA_DIR: mkdtempSync(join(tmpdir(), "dcp-data-")),
    SECRETS_KEY: TEST_SECRETS_KEY,
    JWT_SECRET: TEST_JWT_SECRET,
    LOG_LEVEL: "silent",
    PIPELINE_STEP_MS: "20",
    PORT: "0",
    ...env,
  });
  const app = await buildApp(config, { ...options, pgliteSnapshot: "snapshot" in db ? db.snapshot : undefined });
  return {
    app,
    workspace: (options) => createWorkspace(app.db.prisma, { name: `ws-${randomUUID().slice(0, 8)}`, ...options }),
    request: (method, path, options) => request(app, method, path, options),
    close: () => app.stop(),
  };
}

export async function request(app: App, method: string, path: string, options: RequestOptions = {}): Promise<TestResponse> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.key) headers["x-api-key"] = options.key;
  let body: string | undefined = options.rawBody;
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
