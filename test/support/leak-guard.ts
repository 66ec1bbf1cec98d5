import { randomUUID } from "node:crypto";
import type { Sql } from "../../src/db/client.js";

/** What sealed secret values look like at rest (SecretBox: `v1.<key id>.<base64 iv|tag|data>`). */
export const CIPHERTEXT = /^v1\.[0-9a-f]{8}\.[A-Za-z0-9+/]+={0,2}$/;

/**
 * Values registered from request bodies must look like secrets: a fuzzer's short or repetitive
 * strings ("a", "true", twelve spaces) turn up in other answers by chance.
 */
const looksSecret = (value: string) => value.length >= 12 && new Set(value).size >= 6;

/**
 * Watches everything a test file's app lets out (every log line at trace level, every response's
 * headers and body) and what it keeps (every row of every table), and fails when a registered
 * secret's plain value appears in any of them. Every test app has one (test/support/app.ts): the
 * secret values of every request body it is sent are registered as they pass.
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

  /**
   * Registers the secret values a request body carries: the `value` of every entry of every
   * `secrets` list, at any depth (REST bodies, GraphQL variables). A value that also appears
   * elsewhere in the same body is left out: an echo of that other field would not be a leak.
   */
  secretsIn(body: string): void {
    let parsed: unknown;
    try {
      parsed = JSON.parse(body);
    } catch {
      return;
    }
    for (const value of secretValues(parsed)) {
      if (!looksSecret(value)) continue;
      const quoted = JSON.stringify(value);
      if (body.indexOf(quoted) !== body.lastIndexOf(quoted)) continue;
      this.secrets.add(value);
    }
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

/** The `value` strings of the entries of every `secrets` array in a JSON value. */
function secretValues(root: unknown): string[] {
  const found: string[] = [];
  const stack: unknown[] = [root];
  while (stack.length > 0) {
    const node = stack.pop();
    if (Array.isArray(node)) stack.push(...node);
    else if (node !== null && typeof node === "object") {
      for (const [key, value] of Object.entries(node)) {
        if (key === "secrets" && Array.isArray(value)) {
          for (const entry of value) {
            const secret = (entry as { value?: unknown } | null)?.value;
            if (typeof secret === "string") found.push(secret);
          }
        }
        stack.push(value);
      }
    }
  }
  return found;
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
