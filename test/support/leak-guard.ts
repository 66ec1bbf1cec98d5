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
  /** Issued credentials: how many responses had been recorded when each was issued. */
  private readonly issuedAt = new Map<string, number>();
  /** Secrets that some answers exist to hand out (an OAuth access token to its owner): where they may show. */
  private readonly shownIn = new Map<string, RegExp>();
  readonly logLines: string[] = [];
  readonly responses: { where: string; text: string }[] = [];

  /** A pino destination that keeps every line. */
  readonly destination = { write: (line: string) => void this.logLines.push(line) };

  /**
   * A credential the service has just issued (a push token, an upload URL's signature): the answer
   * that issued it, recorded already, may show it; nothing recorded after it, no log line and no row may.
   */
  issued(value: string): string {
    this.secrets.add(value);
    this.issuedAt.set(value, this.responses.length);
    return value;
  }

  /**
   * Registers a plain secret value (and returns it, to use inline in a request body). `shownIn`: the
   * answers (`METHOD /path -> status`) whose purpose is to hand this value out; it is a leak anywhere else.
   */
  secret(value: string = `s3cr3t-${randomUUID()}`, options: { shownIn?: RegExp } = {}): string {
    this.secrets.add(value);
    if (options.shownIn) this.shownIn.set(value, options.shownIn);
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
    const logs = this.logLines.map((text, i) => ({ where: `log line ${i + 1}`, text }));
    const rows = sql ? await databaseRows(sql) : [];
    const leaks: string[] = [];
    for (const secret of this.secrets) {
      const forms = new Set([secret, JSON.stringify(secret).slice(1, -1), Buffer.from(secret).toString("base64")]);
      const places = [...logs, ...this.responses.slice(this.issuedAt.get(secret) ?? 0), ...rows];
      const allowed = this.shownIn.get(secret);
      for (const { where, text } of places) {
        if (allowed?.test(where)) continue;
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
        // An OAuth provider's client secret, in a REST body or GraphQL variables.
        if ((key === "client_secret" || key === "clientSecret") && typeof value === "string") found.push(value);
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

/** Columns that hold one sealed secret each (null where there is none). */
const SEALED_COLUMNS: [table: string, column: string][] = [
  ["oauth_providers", "client_secret"],
  ["oauth_tokens", "access_token"],
  ["oauth_tokens", "refresh_token"],
  ["oauth_flows", "code_verifier"],
];

/** Stored secrets lists, and sealed columns, whose values are not ciphertext. */
async function plainSecretColumns(sql: Sql): Promise<string[]> {
  const problems: string[] = [];
  for (const [table, column] of SEALED_COLUMNS) {
    const rows = await sql.query<{ id: string; value: string | null }>(`SELECT id::text AS id, "${column}" AS value FROM "${table}"`);
    for (const { id, value } of rows) if (value !== null && !CIPHERTEXT.test(value)) problems.push(`${table} ${id}: ${column} is not ciphertext`);
  }
  for (const table of ["deployments", "revisions"]) {
    const rows = await sql.query<{ id: string; secrets: unknown }>(`SELECT id::text AS id, secrets FROM "${table}"`);
    for (const { id, secrets } of rows) {
      const values = Array.isArray(secrets) ? secrets.map((s) => (s as { value?: unknown }).value) : [secrets];
      for (const v of values) if (typeof v !== "string" || !CIPHERTEXT.test(v)) problems.push(`${table} ${id}: secrets value ${JSON.stringify(v)} is not ciphertext`);
    }
  }
  return problems;
}
