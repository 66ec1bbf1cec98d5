import { randomUUID } from "node:crypto";
import type { Sql } from "../../src/db/client.js";
import { createLogger } from "../../src/logger.js";
import { startTestApp, type TestApp } from "./app.js";

/** What sealed secret values look like at rest (SecretBox: `v1.<key id>.<base64 iv|tag|data>`). */
export const CIPHERTEXT = /^v1\.[0-9a-f]{8}\.[A-Za-z0-9+/]+={0,2}$/;

/**
 * Watches everything a test file's app lets out (every log line at trace level, every response's
 * headers and body) and what it keeps (every row of every table), and fails when a registered
 * secret's plain value appears in any of them.
 */
export class LeakGuard {
  private readonly secrets = new Set<string>();
  readonly logLines: string[] = [];
  readonly responses: { where: string; text: string }[] = [];

  /** A pino destination that keeps every line. */
  readonly destination = { write: (line: string) => void this.logLines.push(line) };

  /** Registers a plain secret value (and returns it, to use inline in a request body). */
  secret(value: string = `s3cr3t-${randomUUID()}`): string {
    this.secrets.add(value);
    return value;
  }

  recordResponse(where: string, headers: Headers, text: string) {
    this.record(where, `${[...headers].map(([k, v]) => `${k}: ${v}`).join("\n")}\n\n${text}`);
  }

  /** Anything else that leaves the service (a script's output, a subscription's messages). */
  record(where: string, text: string) {
    this.responses.push({ where, text });
  }

  /** Every place a secret shows, in the logs and responses so far and (given sql) in the database. */
  async findLeaks(sql?: Sql): Promise<string[]> {
    const places: { where: string; text: string }[] = [
      ...this.logLines.map((text, i) => ({ where: `log line ${i + 1}`, text })),
      ...this.responses,
    ];
    if (sql) places.push(...(await databaseRows(sql)));
    const leaks: string[] = [];
    for (const secret of this.secrets) {
      const forms = new Set([secret, JSON.stringify(secret).slice(1, -1), Buffer.from(secret).toString("base64")]);
      for (const { where, text } of places) {
        if ([...forms].some((f) => text.includes(f))) leaks.push(`${where}: ${text.slice(0, 300)}`);
      }
    }
    if (sql) leaks.push(...(await plainSecretColumns(sql)));
    return leaks;
  }

  async assertNoLeaks(sql?: Sql): Promise<void> {
    const leaks = await this.findLeaks(sql);
    if (leaks.length > 0) throw new Error(`secret values leaked:\n${leaks.join("\n")}`);
  }
}

/** Every row of every table as text. */
async function databaseRows(sql: Sql): Promise<{ where: string; text: string }[]> {
  const tables = await sql.query<{ name: string }>(
    `SELECT table_name AS name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'`,
  );
  const rows: { where: string; text: string }[] = [];
  for (const { name } of tables) {
    const found = await sql.query<{ row: string }>(`SELECT t::text AS row FROM "${name.replace(/"/g, '""')}" t`);
    rows.push(...found.map((r) => ({ where: `table ${name}`, text: r.row })));
  }
  return rows;
}

/** Stored secrets lists whose values are not ciphertext. */
async function plainSecretColumns(sql: Sql): Promise<string[]> {
  const problems: string[] = [];
  for (const table of ["deployments", "revisions"]) {
    const rows = await sql.query<{ id: string; secrets: unknown }>(`SELECT id::text AS id, secrets FROM "${table}"`);
    for (const { id, secrets } of rows) {
      const values = Array.isArray(secrets) ? secrets.map((s) => (s as { value?: unknown }).value) : [secrets];
      for (const v of values) if (typeof v !== "string" || !CIPHERTEXT.test(v)) problems.push(`${table} ${id}: secrets value ${JSON.stringify(v)} is not ciphertext`);
    }
  }
  return problems;
}

export interface GuardedTestApp extends TestApp {
  guard: LeakGuard;
  /** Fails when any registered secret showed in a log line, a response or a database row. */
  assertNoLeaks(): Promise<void>;
}

/**
 * startTestApp (same database set-up and settings), with logs at trace level into the guard and
 * every response recorded. Requests made around t.request (raw sockets, app.fetch) are not seen.
 */
export async function startGuardedTestApp(env: Record<string, string | undefined> = {}): Promise<GuardedTestApp> {
  const guard = new LeakGuard();
  const t = await startTestApp({ ...env, LOG_LEVEL: "trace" }, undefined, { logger: createLogger("trace", guard.destination) });
  return {
    ...t,
    guard,
    async request(method, path, options) {
      const res = await t.request(method, path, options);
      guard.recordResponse(`${method} ${path} -> ${res.status}`, res.headers, res.text);
      return res;
    },
    assertNoLeaks: () => guard.assertNoLeaks(t.app.db.sql),
  };
}
