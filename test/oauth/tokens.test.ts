import { SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, TEST_JWT_SECRET, type TestApp } from "../support/app.js";
import { accessTokenOf, addProvider, authorize, OAUTH_ENV, storeToken, TOKEN_ANSWERS } from "../support/oauth.js";
import { type OAuthServer, startOAuthServer } from "../support/oauth-server.js";

/**
 * The token vault against a real provider: refresh before expiry, revocation on delete (RFC 7009),
 * the token endpoints, the workspace-wide Slack pair, and that only a token's owner sees or changes it.
 */

let t: TestApp;
/** Access tokens live 30 s: within the refresh margin, so every hand-out refreshes first. */
let shortLived: OAuthServer;
let ws: NewWorkspace;

beforeAll(async () => {
  shortLived = await startOAuthServer({ accessTokenTtl: 30 });
  t = await startTestApp({ ...OAUTH_ENV, PIPELINE_WORKER: "off" });
  ws = await t.workspace();
  await addProvider(t, shortLived, ws.apiKey, "idp", { revocation_url: `${shortLived.issuer}/token/revocation` });
});
afterAll(async () => {
  await t?.close();
  await shortLived?.close();
});

const bearer = (workspaceId: string, sub: string) =>
  new SignJWT({ tenant_id: workspaceId, sub }).setProtectedHeader({ alg: "HS256" }).setExpirationTime("5m").sign(new TextEncoder().encode(TEST_JWT_SECRET));

/** What the provider says of a refresh token now: a refresh with it, straight at its token endpoint. */
async function providerRefreshes(providerId: string, workspaceId: string, refreshToken: string): Promise<string> {
  const provider = await t.app.db.prisma.oAuthProvider.findFirstOrThrow({ where: { workspaceId, providerId } });
  const res = await fetch(provider.tokenUrl, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ grant_type: "refresh_token", refresh_token: refreshToken, client_id: provider.clientId, client_secret: t.app.deps.secrets.open(provider.clientSecret!) }),
  });
  const body = (await res.json()) as { error?: string; access_token?: string };
  if (body.access_token) t.guard.secret(body.access_token);
  return body.error ?? "ok";
}

describe("refresh", () => {
  it("refreshes a token about to expire on the read that hands it out, and the connections follow", async () => {
    const { callback } = await authorize(t, shortLived, ws.apiKey, "idp", ["openid", "repo"]);
    const tokenId = callback.token_id as string;
    const before = await t.app.db.prisma.oAuthToken.findUniqueOrThrow({ where: { id: tokenId } });
    const connection = await t.request("POST", "/v2/auth/agents/refresher/connections", { key: ws.apiKey, body: { oauth_token_id: tokenId } });
    expect(connection.status).toBe(201);

    const grantsBefore = shortLived.grants.filter((g) => g === "refresh_token").length;
    const first = await accessTokenOf(t, ws.apiKey, "idp", ["repo"]);
    const second = await accessTokenOf(t, ws.apiKey, "idp", ["repo"]);
    expect(second).not.toBe(first);
    expect(shortLived.grants.filter((g) => g === "refresh_token").length).toBe(grantsBefore + 2);

    const after = await t.app.db.prisma.oAuthToken.findUniqueOrThrow({ where: { id: tokenId } });
    // Rotated: the provider issued a new refresh token each time, sealed again.
    expect(after.refreshToken).not.toBe(before.refreshToken);
    expect(after.expiresAt!.getTime()).toBeGreaterThan(before.expiresAt!.getTime());
    const listed = (await t.request("GET", "/v2/auth/agents/refresher/connections", { key: ws.apiKey })).body.data[0];
    expect(listed.expires_at).toBe(after.expiresAt!.toISOString());
    // The old refresh token is spent at the provider.
    t.guard.secret(t.app.deps.secrets.open(before.refreshToken!));
    expect(await providerRefreshes("idp", ws.workspaceId, t.app.deps.secrets.open(before.refreshToken!))).toBe("invalid_grant");
  });

  it("answers token_expired with a new flow when the token expired and the provider refuses its refresh token", async () => {
    const mine = await t.workspace();
    await addProvider(t, shortLived, mine.apiKey, "idp");
    const { callback } = await authorize(t, shortLived, mine.apiKey, "idp", ["openid"]);
    const row = await t.app.db.prisma.oAuthToken.findUniqueOrThrow({ where: { id: callback.token_id } });
    // The user revokes the grant at the provider (here: its refresh token), and time passes.
    const refresh = t.guard.secret(t.app.deps.secrets.open(row.refreshToken!));
    const provider = await t.app.db.prisma.oAuthProvider.findFirstOrThrow({ where: { workspaceId: mine.workspaceId } });
    const revoked = await fetch(`${shortLived.issuer}/token/revocation`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ token: refresh, client_id: provider.clientId, client_secret: t.app.deps.secrets.open(provider.clientSecret!) }),
    });
    expect(revoked.status).toBe(200);
    await t.app.db.prisma.oAuthToken.update({ where: { id: row.id }, data: { expiresAt: new Date(Date.now() - 1000) } });

    const res = await t.request("POST", "/v2/auth/authenticate", { key: mine.apiKey, body: { provider: "idp", scopes: ["openid"] } });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ status: "token_expired", token: null, url: expect.stringContaining(`${shortLived.issuer}/auth?`), auth_id: expect.any(String) });
  });
});

describe("Idempotency-Key on authenticate", () => {
  it("never keeps a handed-out token: nothing is stored, and a retry after the token is deleted does not get it back", async () => {
    const mine = await t.workspace();
    const token = await storeToken(t, mine.apiKey);
    const authenticate = () =>
      t.request("POST", "/v2/auth/authenticate", { key: mine.apiKey, body: { provider: "github", scopes: [] }, headers: { "idempotency-key": "hand-out" } });

    const first = await authenticate();
    expect(first.body).toMatchObject({ status: "completed", token: expect.any(String) });
    t.guard.secret(first.body.token, { shownIn: TOKEN_ANSWERS });
    expect(first.headers.get("cache-control")).toBe("no-store");
    expect(await t.app.db.prisma.idempotencyKey.count({ where: { workspaceId: mine.workspaceId } })).toBe(0);

    expect((await t.request("DELETE", `/v2/auth/tokens/${token.id}`, { key: mine.apiKey })).status).toBe(204);
    const again = await authenticate();
    expect(again.status, again.text).toBe(200);
    expect(again.headers.get("idempotent-replayed")).toBeNull();
    expect(again.body).toMatchObject({ status: "pending", token: null });
  });
});

describe("revocation on delete", () => {
  it("revokes the token at the provider, then forgets it and its connections", async () => {
    const mine = await t.workspace();
    await addProvider(t, shortLived, mine.apiKey, "idp", { revocation_url: `${shortLived.issuer}/token/revocation` });
    const { callback } = await authorize(t, shortLived, mine.apiKey, "idp", ["openid"]);
    const row = await t.app.db.prisma.oAuthToken.findUniqueOrThrow({ where: { id: callback.token_id } });
    const refresh = t.guard.secret(t.app.deps.secrets.open(row.refreshToken!));
    await t.request("POST", "/v2/auth/agents/revoked/connections", { key: mine.apiKey, body: { oauth_token_id: row.id } });

    const revocations = shortLived.revocations.length;
    const res = await t.request("DELETE", `/v2/auth/tokens/${row.id}`, { key: mine.apiKey });
    expect(res.status).toBe(204);
    expect(shortLived.revocations.slice(revocations)).toEqual(["refresh_token"]);
    expect(await providerRefreshes("idp", mine.workspaceId, refresh)).toBe("invalid_grant");
    expect((await t.request("GET", "/v2/auth/tokens", { key: mine.apiKey })).body).toEqual([]);
    expect((await t.request("GET", "/v2/auth/agents/revoked/connections", { key: mine.apiKey })).body).toEqual({ data: [] });
    expect((await t.request("DELETE", `/v2/auth/tokens/${row.id}`, { key: mine.apiKey })).status).toBe(404);
  });

  it("still forgets the token when the provider is down, and logs that it could not revoke", async () => {
    const mine = await t.workspace();
    await addProvider(t, shortLived, mine.apiKey, "idp", { revocation_url: `${shortLived.issuer}/token/revocation` });
    const { callback } = await authorize(t, shortLived, mine.apiKey, "idp", ["openid"]);
    await shortLived.pause();
    try {
      expect((await t.request("DELETE", `/v2/auth/tokens/${callback.token_id}`, { key: mine.apiKey })).status).toBe(204);
    } finally {
      await shortLived.resume();
    }
    expect(t.guard.logLines.some((l) => l.includes("could not revoke a token") && l.includes(callback.token_id))).toBe(true);
    expect(await t.app.db.prisma.oAuthToken.count({ where: { id: callback.token_id } })).toBe(0);
  });
});

describe("the token endpoints", () => {
  it("lists, relabels, checks, makes default and deletes per provider", async () => {
    const mine = await t.workspace();
    const a = await storeToken(t, mine.apiKey, { providerId: "github" });
    const b = await storeToken(t, mine.apiKey, { providerId: "github", label: "second" });
    await storeToken(t, mine.apiKey, { providerId: "gitlab" });
    const list = (await t.request("GET", "/v2/auth/tokens?provider_id=github", { key: mine.apiKey })).body;
    expect(list.map((x: { id: string; is_default: boolean }) => [x.id, x.is_default])).toEqual([[b.id, true], [a.id, false]]);
    expect((await t.request("GET", "/v2/auth/tokens", { key: mine.apiKey })).body).toHaveLength(3);
    expect((await t.request("GET", "/v2/auth/tokens?provider_id=", { key: mine.apiKey })).body).toHaveLength(3);

    const relabelled = await t.request("PATCH", `/v2/auth/tokens/${a.id}/metadata`, { key: mine.apiKey, body: { provider_account_label: "work", is_default: true } });
    expect(relabelled.status).toBe(200);
    expect(relabelled.body).toMatchObject({ id: a.id, provider_account_label: "work", is_default: true });
    const after = (await t.request("GET", "/v2/auth/tokens?provider_id=github", { key: mine.apiKey })).body;
    expect(after.map((x: { is_default: boolean }) => x.is_default)).toEqual([false, true]);

    expect((await t.request("GET", "/v2/auth/tokens/exists?provider_id=github", { key: mine.apiKey })).body).toEqual({ has_token: true });
    const deleted = await t.request("DELETE", "/v2/auth/tokens?provider_id=github", { key: mine.apiKey });
    expect(deleted.body).toEqual({ provider_id: "github", deleted: 2 });
    expect((await t.request("GET", "/v2/auth/tokens/exists?provider_id=github", { key: mine.apiKey })).body).toEqual({ has_token: false });
    expect((await t.request("GET", "/v2/auth/tokens", { key: mine.apiKey })).body).toHaveLength(1);

    const missing = await t.request("GET", "/v2/auth/tokens/exists", { key: mine.apiKey });
    expect(missing.status).toBe(422);
    expect(missing.body.detail).toEqual([expect.objectContaining({ loc: ["query", "provider_id"], type: "missing" })]);
    for (const id of ["not-a-token", "00000000-0000-4000-8000-000000000000"]) {
      expect((await t.request("PATCH", `/v2/auth/tokens/${id}/metadata`, { key: mine.apiKey, body: {} })).status).toBe(404);
      expect((await t.request("DELETE", `/v2/auth/tokens/${id}`, { key: mine.apiKey })).body).toEqual({ detail: `OAuth token ID ${id} not found.` });
    }
  });

  it("keeps each user's tokens to that user, within one workspace", async () => {
    const mine = await t.workspace();
    const alice = `Bearer ${await bearer(mine.workspaceId, "alice")}`;
    const bob = `Bearer ${await bearer(mine.workspaceId, "bob")}`;
    const aliceToken = await storeToken(t, "", { tenant: await t.app.core.auth.authenticate({ authorization: alice }) });
    const as = (authorization: string) => ({ headers: { authorization } });

    expect((await t.request("GET", "/v2/auth/tokens", as(alice))).body.map((x: { id: string }) => x.id)).toEqual([aliceToken.id]);
    expect((await t.request("GET", "/v2/auth/tokens", as(bob))).body).toEqual([]);
    expect((await t.request("GET", "/v2/auth/tokens/exists?provider_id=github", as(bob))).body).toEqual({ has_token: false });
    expect((await t.request("PATCH", `/v2/auth/tokens/${aliceToken.id}/metadata`, { ...as(bob), body: { provider_account_label: "mine now" } })).status).toBe(404);
    expect((await t.request("DELETE", `/v2/auth/tokens/${aliceToken.id}`, as(bob))).status).toBe(404);
    expect((await t.request("DELETE", "/v2/auth/tokens?provider_id=github", as(bob))).body.deleted).toBe(0);
    // Bob cannot have Alice's token handed to him, by id or by naming her.
    const byId = await t.request("POST", "/v2/auth/authenticate", { ...as(bob), body: { provider: "github", scopes: [], token_id: aliceToken.id } });
    expect(byId.status).toBe(404);
    const byName = await t.request("POST", "/v2/auth/authenticate", { ...as(bob), body: { provider: "github", scopes: [], user_id: "alice" } });
    expect(byName.status).toBe(403);
    expect(byName.body.detail).toMatch(/^user_id names another user/);

    const own = await t.request("POST", "/v2/auth/authenticate", { ...as(alice), body: { provider: "github", scopes: ["repo"], user_id: "alice" } });
    expect(own.body).toMatchObject({ status: "completed", user_id: "alice", token: expect.any(String) });
    t.guard.secret(own.body.token, { shownIn: TOKEN_ANSWERS });
    expect((await t.app.db.prisma.oAuthToken.findUniqueOrThrow({ where: { id: aliceToken.id } })).providerAccountLabel).toBe("acme-bot");
  });

  it("checks and revokes the workspace's Slack tokens, everyone's", async () => {
    const mine = await t.workspace();
    const tenant = await t.app.core.auth.authenticate({ apiKey: mine.apiKey });
    await t.app.core.oauthProviders.create(tenant, {
      provider_id: "slack", name: "Slack", client_id: "1.2", client_secret: t.guard.secret(), provider_type: "slack",
      auth_url: "https://slack.example/oauth/v2/authorize", token_url: "https://slack.example/api/oauth.v2.access",
    });
    expect((await t.request("GET", "/v2/auth/tokens/workspace/slack/exists", { key: mine.apiKey })).body).toEqual({ has_token: false });
    const carol = await t.app.core.auth.authenticate({ authorization: `Bearer ${await bearer(mine.workspaceId, "carol")}` });
    await storeToken(t, "", { providerId: "slack", tenant: carol });
    await storeToken(t, mine.apiKey, { providerId: "github" });
    expect((await t.request("GET", "/v2/auth/tokens/workspace/slack/exists", { key: mine.apiKey })).body).toEqual({ has_token: true });
    // Another workspace's Slack tokens are its own business.
    expect((await t.request("GET", "/v2/auth/tokens/workspace/slack/exists", { key: ws.apiKey })).body).toEqual({ has_token: false });
    expect((await t.request("DELETE", "/v2/auth/tokens/workspace/slack", { key: mine.apiKey })).body).toEqual({ deleted: 1 });
    expect((await t.request("GET", "/v2/auth/tokens/workspace/slack/exists", { key: mine.apiKey })).body).toEqual({ has_token: false });
    expect((await t.request("GET", "/v2/auth/tokens", { key: mine.apiKey })).body).toHaveLength(1);
  });
});
