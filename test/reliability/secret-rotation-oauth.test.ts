import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { rotateSecrets } from "../../src/core/secret-rotation.js";
import { SecretBox } from "../../src/core/secrets.js";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import type { Sql } from "../../src/db/client.js";
import { createTestDatabase, startTestApp, type TestApp } from "../support/app.js";
import { accessTokenOf, addProvider, authorize, OAUTH_ENV, pathOf, storeToken, TOKEN_ANSWERS } from "../support/oauth.js";
import { type OAuthServer, startOAuthServer, type EndpointHold } from "../support/oauth-server.js";
import { waitFor } from "../support/wait.js";

/**
 * A key change as an operator makes it, with the OAuth secrets the service keeps: a service under the
 * old key stores a provider's client secret, tokens and a pending flow's PKCE verifier; it restarts
 * with SECRETS_KEY=<new> SECRETS_KEY_PREVIOUS=<old>, the rotation runs beside it (while it refreshes a
 * token at the provider), and it restarts with the new key alone: everything still works.
 */

const OLD = Buffer.alloc(32, 31);
const NEW = Buffer.alloc(32, 32);
const oldBox = new SecretBox(OLD);
const newOnly = new SecretBox(NEW);
const keyId = (box: SecretBox) => box.seal("").split(".")[1];

let server: OAuthServer;
let database: Awaited<ReturnType<typeof createTestDatabase>>;
/** The one service running, under whichever keys the step has come to. */
let service: TestApp;
let ws1: NewWorkspace;
let ws2: NewWorkspace;
const holds: EndpointHold[] = [];
/** What the service under the old key left, for the later steps. */
const left: { handmadeAccessToken?: string; pendingUrl?: string; pendingAuthId?: string; raced?: string } = {};

beforeAll(async () => {
  // Access tokens live 30 s: within the refresh margin, so every hand-out refreshes (refresh token and client secret).
  server = await startOAuthServer({ accessTokenTtl: 30 });
  database = await createTestDatabase();
  service = await startTestApp({ ...OAUTH_ENV, PIPELINE_WORKER: "off", SECRETS_KEY: OLD.toString("base64") }, database);
});
afterEach(() => {
  for (const hold of holds.splice(0)) hold.release();
});
afterAll(async () => {
  await service?.close();
  await server?.close();
});

/** Stops the service and starts it again on the same database under other keys (PGlite: from a snapshot of it). */
async function restart(env: Record<string, string>) {
  const next = "url" in database ? database : { snapshot: await service.app.db.snapshot!() };
  await service.close();
  service = await startTestApp({ ...OAUTH_ENV, PIPELINE_WORKER: "off", ...env }, next);
}

/** The key ids of every sealed value anywhere in the database: every column of every table, as text. */
async function keyIdsInDatabase(sql: Sql): Promise<Set<string>> {
  const tables = await sql.query<{ name: string }>(
    `SELECT table_name AS name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'`,
  );
  const ids = new Set<string>();
  for (const { name } of tables) {
    for (const { row } of await sql.query<{ row: string }>(`SELECT t::text AS row FROM "${name}" t`)) {
      for (const match of row.matchAll(/v1\.([0-9a-f]{8})\.[A-Za-z0-9+/]{20,}/g)) ids.add(match[1]!);
    }
  }
  return ids;
}

describe("OAuth secrets across a key rotation", { timeout: 120_000 }, () => {
  it("a service under the old key seals a provider's client secret, tokens and a pending flow's verifier", async () => {
    ws1 = await service.workspace();
    ws2 = await service.workspace();
    for (const ws of [ws1, ws2]) {
      await addProvider(service, server, ws.apiKey, "idp");
      await authorize(service, server, ws.apiKey, "idp", ["openid", "repo"]);
    }
    // A provider configured by hand and a token stored through core (test/support/oauth.ts).
    const handmade = await storeToken(service, ws1.apiKey, { providerId: "github" });
    left.handmadeAccessToken = service.app.deps.secrets.open(handmade.accessToken);
    // Authorized at the provider only after the restarts: its verifier is opened under the new key alone.
    const pending = await service.request("POST", "/v2/auth/authenticate", { key: ws2.apiKey, body: { provider: "idp", scopes: ["repo"], force_new: true } });
    expect(pending.body.status, pending.text).toBe("pending");
    left.pendingUrl = pending.body.url;
    left.pendingAuthId = pending.body.auth_id;

    const flow = await service.app.db.prisma.oAuthFlow.findUniqueOrThrow({ where: { id: left.pendingAuthId } });
    expect(flow.codeVerifier).not.toBeNull();
    expect(await keyIdsInDatabase(service.app.db.sql)).toEqual(new Set([keyId(oldBox)]));
  });

  it("are re-sealed by the rotation beside a replica, whose refresh at the provider meanwhile keeps the provider's new tokens", async () => {
    await restart({ SECRETS_KEY: NEW.toString("base64"), SECRETS_KEY_PREVIOUS: OLD.toString("base64") });
    const prisma = service.app.db.prisma;
    const token = await prisma.oAuthToken.findFirstOrThrow({ where: { workspaceId: ws1.workspaceId, providerId: "idp" } });
    const spent = service.guard.secret(oldBox.open(token.refreshToken!));

    // The replica refreshes the token (its access token expires within the margin); the provider is slow to answer.
    const hold = server.holdTokenEndpoint();
    holds.push(hold);
    const handedOut = service.request("POST", "/v2/auth/authenticate", { key: ws1.apiKey, body: { provider: "idp", scopes: ["repo"] } });
    await waitFor(() => hold.arrived, (n) => n >= 1, { what: "the refresh to reach the token endpoint" });
    const report = await rotateSecrets(prisma, service.app.deps.secrets, { batchSize: 2 });
    hold.release();
    const res = await handedOut;
    expect(res.status, res.text).toBe(200);
    expect(res.body.status).toBe("completed");
    service.guard.secret(res.body.token, { shownIn: TOKEN_ANSWERS });

    expect(report.failed).toEqual([]);
    // Two providers at the test server and the hand-made one; their three tokens; three flows (two completed, one pending).
    expect(report.oauth_providers).toEqual({ scanned: 3, rotated: 3 });
    expect(report.oauth_tokens).toEqual({ scanned: 3, rotated: 3 });
    expect(report.oauth_flows).toEqual({ scanned: 3, rotated: 3 });
    expect(Object.values(report.remaining).every((n) => n === 0), JSON.stringify(report.remaining)).toBe(true);
    // The refresh lost no race to the rotation: what it handed out and the provider's new refresh token are stored.
    const after = await prisma.oAuthToken.findUniqueOrThrow({ where: { id: token.id } });
    expect(newOnly.open(after.accessToken)).toBe(res.body.token);
    const kept = service.guard.secret(newOnly.open(after.refreshToken!));
    expect(kept).not.toBe(spent);
    left.raced = token.id;

    expect(await keyIdsInDatabase(service.app.db.sql)).toEqual(new Set([keyId(newOnly)]));
    const again = await rotateSecrets(prisma, service.app.deps.secrets);
    expect(again.oauth_providers.rotated + again.oauth_tokens.rotated + again.oauth_flows.rotated).toBe(0);
  });

  it("a service with only the new key hands the tokens out, refreshes them and completes the pending flow", async () => {
    await restart({ SECRETS_KEY: NEW.toString("base64") });
    // The hand-made token, as stored under the old key: its access token opens.
    const github = await service.request("POST", "/v2/auth/authenticate", { key: ws1.apiKey, body: { provider: "github", scopes: ["repo"] } });
    expect(github.status, github.text).toBe(200);
    expect(github.body).toMatchObject({ status: "completed", token: left.handmadeAccessToken });
    service.guard.secret(github.body.token, { shownIn: TOKEN_ANSWERS });

    // A refresh with the refresh token and client secret the rotation re-sealed.
    const refreshes = server.grants.filter((g) => g === "refresh_token").length;
    const token = await accessTokenOf(service, ws2.apiKey, "idp", ["repo"]);
    expect(server.grants.filter((g) => g === "refresh_token").length).toBe(refreshes + 1);
    const stored = await service.app.db.prisma.oAuthToken.findFirstOrThrow({ where: { workspaceId: ws2.workspaceId, providerId: "idp" } });
    expect(newOnly.open(stored.accessToken)).toBe(token);
    // And the one refreshed during the rotation: the refresh token it kept is the provider's live one,
    // which the provider takes (and rotates) again.
    const raced = await service.app.db.prisma.oAuthToken.findUniqueOrThrow({ where: { id: left.raced } });
    const handed = await accessTokenOf(service, ws1.apiKey, "idp", ["repo"]);
    const refreshed = await service.app.db.prisma.oAuthToken.findUniqueOrThrow({ where: { id: left.raced } });
    expect(newOnly.open(refreshed.accessToken)).toBe(handed);
    expect(refreshed.refreshToken).not.toBe(raced.refreshToken);
    service.guard.secret(newOnly.open(refreshed.refreshToken!));

    // The user consents only now: the callback opens the verifier sealed under the old key, and the client secret.
    const back = await server.follow(left.pendingUrl!);
    const callback = await service.request("GET", pathOf(back));
    expect(callback.status, callback.text).toBe(200);
    expect(callback.body).toMatchObject({ status: "completed", auth_id: left.pendingAuthId });
  });
});
