import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Database, openDatabase } from "../../src/db/client.js";
import { migrate, readMigrations } from "../../src/db/migrate.js";
import { skipDatabaseIndependent } from "../support/database-independent.js";

/**
 * The migration that gives agent_connections.oauth_token_id its foreign key to oauth_tokens, on a
 * database that already holds connections: those naming a token that no longer exists (a connection
 * created while its token was deleted) are deleted; the others stay, and go with their token from then on.
 */
const MIGRATION = "20261127210000_agent_connections_token_foreign_key";

describe.skipIf(skipDatabaseIndependent)("the agent connections' foreign key to their token, on existing rows", () => {
  let db: Database;
  const ws = randomUUID();
  const token = randomUUID();
  const [kept, dangling] = [randomUUID(), randomUUID()];

  beforeAll(async () => {
    db = await openDatabase({ kind: "pglite", dataDir: null });
    const all = await readMigrations();
    const at = all.findIndex((m) => m.name === MIGRATION);
    expect(at).toBeGreaterThan(0);
    await migrate(db.sql, all.slice(0, at));
    const org = randomUUID();
    const provider = randomUUID();
    await db.sql.query(`INSERT INTO organizations (id, name) VALUES ($1, 'org')`, [org]);
    await db.sql.query(`INSERT INTO workspaces (id, organization_id, name) VALUES ($1, $2, 'ws')`, [ws, org]);
    await db.sql.query(
      `INSERT INTO oauth_providers (id, workspace_id, organization_id, provider_id, name, client_id, auth_url, token_url)
       VALUES ($1, $2, $3, 'gh', 'GitHub', 'client', 'https://gh.example/a', 'https://gh.example/t')`,
      [provider, ws, org],
    );
    await db.sql.query(`INSERT INTO oauth_tokens (id, workspace_id, oauth_provider_id, provider_id, owner, access_token) VALUES ($1, $2, $3, 'gh', 'api_key:k', 'sealed')`, [
      token,
      ws,
      provider,
    ]);
    for (const [id, tokenId] of [
      [kept, token],
      [dangling, randomUUID()],
    ]) {
      await db.sql.query(
        `INSERT INTO agent_connections (id, workspace_id, agent_id, oauth_token_id, provider_id, created_by) VALUES ($1, $2, 'bot', $3, 'gh', 'api_key:k')`,
        [id, ws, tokenId],
      );
    }
    expect(await migrate(db.sql)).toContain(MIGRATION);
  });
  afterAll(() => db?.close());

  const connections = async () => (await db.sql.query<{ id: string }>(`SELECT id FROM agent_connections ORDER BY id`)).map((r) => r.id);

  it("deletes the connections whose token is gone, and keeps the others", async () => {
    expect(await connections()).toEqual([kept]);
  });

  it("refuses a connection to a token that does not exist, and deletes a token's connections with it", async () => {
    await expect(
      db.sql.query(`INSERT INTO agent_connections (id, workspace_id, agent_id, oauth_token_id, provider_id, created_by) VALUES ($1, $2, 'bot2', $3, 'gh', 'x')`, [
        randomUUID(),
        ws,
        randomUUID(),
      ]),
    ).rejects.toMatchObject({ code: "23503" });
    await db.sql.query(`DELETE FROM oauth_tokens WHERE id = $1`, [token]);
    expect(await connections()).toEqual([]);
  });
});
