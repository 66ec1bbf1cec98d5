import { createServer, type Server } from "node:http";
import { SignJWT } from "jose";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, TEST_JWT_SECRET, type TestApp } from "../support/app.js";
import { closeNow, listenLocally } from "../support/local-server.js";
import { accessTokenOf, addProvider, authorize, OAUTH_ENV, pathOf, TOKEN_ANSWERS } from "../support/oauth.js";
import { type OAuthServer, startOAuthServer } from "../support/oauth-server.js";

/**
 * A provider is the workspace's: any caller of it may change its endpoints (PATCH). A token is its
 * owner's alone, and a grant (a flow's code, a token's refresh token) is sent, with the provider's
 * client credentials, only to the endpoints it began under, and only while the provider still has
 * them: a change made since, by anyone, must send it nowhere (not to the new endpoint, nor the current
 * client secret to the old one). Alice is the workspace's API key, Mallory a bearer token of the
 * same workspace.
 */

let t: TestApp;
/** Access tokens live 30 s: within the refresh margin, so every hand-out refreshes first. */
let idp: OAuthServer;
let ws: NewWorkspace;
/** A server of Mallory's: it records every body sent to it. */
let elsewhere: Server;
let elsewhereUrl = "";
const received: string[] = [];

beforeAll(async () => {
  idp = await startOAuthServer({ accessTokenTtl: 30 });
  t = await startTestApp({ ...OAUTH_ENV, PIPELINE_WORKER: "off" });
  ws = await t.workspace();
  elsewhere = createServer((req, res) => {
    let body = "";
    req.on("data", (chunk: Buffer) => (body += chunk.toString()));
    req.on("end", () => {
      received.push(body);
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  elsewhereUrl = await listenLocally(elsewhere);
});
afterAll(async () => {
  await t?.close();
  await idp?.close();
  if (elsewhere) await closeNow(elsewhere);
});

const mallory = async () => ({
  authorization: `Bearer ${await new SignJWT({ tenant_id: ws.workspaceId, sub: "mallory" })
    .setProtectedHeader({ alg: "HS256" })
    .setExpirationTime("5m")
    .sign(new TextEncoder().encode(TEST_JWT_SECRET))}`,
});

async function repoint(providerId: string, body: Record<string, string>) {
  const patched = await t.request("PATCH", `/v2/auth/providers/${providerId}`, { headers: await mallory(), body });
  expect(patched.status, patched.text).toBe(200);
  // The answer shows the token endpoint (never the revocation endpoint, an extension it does not show).
  if (body.token_url) expect(patched.body.token_url).toBe(body.token_url);
}

const refreshTokenOf = async (tokenId: string) =>
  t.app.deps.secrets.open((await t.app.db.prisma.oAuthToken.findUniqueOrThrow({ where: { id: tokenId } })).refreshToken!);

const sentElsewhere = (value: string) => received.filter((body) => Object.values(Object.fromEntries(new URLSearchParams(body))).includes(value));

it("refreshes a token no more once the provider's token endpoint has changed: the user authorizes again", async () => {
  await addProvider(t, idp, ws.apiKey, "refreshed");
  const { callback } = await authorize(t, idp, ws.apiKey, "refreshed", ["openid"]);
  const refreshToken = await refreshTokenOf(callback.token_id);
  await repoint("refreshed", { token_url: `${elsewhereUrl}/token` });

  // Expired: its refresh is due, and is sent neither to the new endpoint nor to the old one.
  await t.app.db.prisma.oAuthToken.update({ where: { id: callback.token_id }, data: { expiresAt: new Date(Date.now() - 1000) } });
  const grants = idp.grants.filter((g) => g === "refresh_token").length;
  const res = await t.request("POST", "/v2/auth/authenticate", { key: ws.apiKey, body: { provider: "refreshed", scopes: ["openid"] } });
  expect(res.status, res.text).toBe(200);
  expect(res.body.status).toBe("token_expired");
  expect(idp.grants.filter((g) => g === "refresh_token").length).toBe(grants);
  expect(sentElsewhere(refreshToken)).toEqual([]);
  expect(received).toEqual([]);
});

it("refreshes a token no more once the provider's revocation endpoint has changed either (a refused answer is revoked there)", async () => {
  await addProvider(t, idp, ws.apiKey, "revoking", { revocation_url: `${idp.issuer}/token/revocation` });
  const { callback } = await authorize(t, idp, ws.apiKey, "revoking", ["openid"]);
  await repoint("revoking", { revocation_url: `${elsewhereUrl}/revoke` });
  await t.app.db.prisma.oAuthToken.update({ where: { id: callback.token_id }, data: { expiresAt: new Date(Date.now() - 1000) } });
  const grants = idp.grants.filter((g) => g === "refresh_token").length;
  const res = await t.request("POST", "/v2/auth/authenticate", { key: ws.apiKey, body: { provider: "revoking", scopes: ["openid"] } });
  expect(res.body.status, res.text).toBe("token_expired");
  expect(idp.grants.filter((g) => g === "refresh_token").length).toBe(grants);
  expect(received).toEqual([]);
});

it("revokes a deleted provider's tokens only at the revocation endpoint they were issued under, and only if it still has it", async () => {
  await addProvider(t, idp, ws.apiKey, "deleted", { revocation_url: `${idp.issuer}/token/revocation` });
  const { callback } = await authorize(t, idp, ws.apiKey, "deleted", ["openid"]);
  const refreshToken = await refreshTokenOf(callback.token_id);
  await repoint("deleted", { revocation_url: `${elsewhereUrl}/revoke` });

  // The deletion answers once the revocations are done: none was sent.
  const revocations = idp.revocations.length;
  const deleted = await t.request("DELETE", "/v2/auth/providers/deleted", { headers: await mallory() });
  expect(deleted.status, deleted.text).toBe(200);
  expect(deleted.body).toMatchObject({ deleted_tokens: 1 });
  expect(idp.revocations.length).toBe(revocations);
  expect(sentElsewhere(refreshToken)).toEqual([]);
  expect(received).toEqual([]);

  // Unchanged, it is revoked there.
  await addProvider(t, idp, ws.apiKey, "kept", { revocation_url: `${idp.issuer}/token/revocation` });
  await authorize(t, idp, ws.apiKey, "kept", ["openid"]);
  expect((await t.request("DELETE", "/v2/auth/providers/kept", { key: ws.apiKey })).status).toBe(200);
  expect(idp.revocations.slice(revocations)).toEqual(["refresh_token"]);
});

it("exchanges a flow's code nowhere once the token endpoint has changed since the flow began, even changed back with a new secret", async () => {
  await addProvider(t, idp, ws.apiKey, "flowing");
  const started = await t.request("POST", "/v2/auth/authenticate", { key: ws.apiKey, body: { provider: "flowing", scopes: ["openid"] } });
  expect(started.status, started.text).toBe(200);
  const back = await idp.follow(started.body.url);
  await repoint("flowing", { token_url: `${elsewhereUrl}/token` });

  const code = back.searchParams.get("code")!;
  const callback = await t.request("GET", pathOf(back));
  expect(callback.status, callback.text).toBe(400);
  expect(callback.body.detail).toMatch(/token or revocation endpoint changed since this authorization began/);
  expect(sentElsewhere(code)).toEqual([]);

  // A flow begun under Mallory's endpoint, which an administrator then repairs with a new secret:
  // the new secret is not sent to Mallory's endpoint when that flow's code comes back.
  const hers = await t.request("POST", "/v2/auth/authenticate", { headers: await mallory(), body: { provider: "flowing", scopes: ["openid"] } });
  expect(hers.status, hers.text).toBe(200);
  const state = new URL(hers.body.url).searchParams.get("state")!;
  const secret = t.guard.secret();
  const repaired = await t.request("PATCH", "/v2/auth/providers/flowing", { key: ws.apiKey, body: { token_url: `${idp.issuer}/token`, client_secret: secret } });
  expect(repaired.status, repaired.text).toBe(200);
  const finalized = await t.request("POST", "/v2/auth/callback/flowing", { headers: await mallory(), body: { code: "from-mallory", state } });
  expect(finalized.status, finalized.text).toBe(400);
  expect(sentElsewhere(secret)).toEqual([]);
  expect(received).toEqual([]);
});

it("uses a provider's new endpoints for tokens its owners authorize after the change", async () => {
  await addProvider(t, idp, ws.apiKey, "moved");
  // The same provider under another name of this machine: a move an administrator would make.
  const moved = idp.issuer.replace("127.0.0.1", "localhost");
  await repoint("moved", { token_url: `${moved}/token` });
  const { callback } = await authorize(t, idp, ws.apiKey, "moved", ["openid"]);
  const grants = idp.grants.filter((g) => g === "refresh_token").length;
  await accessTokenOf(t, ws.apiKey, "moved", ["openid"]);
  expect(idp.grants.filter((g) => g === "refresh_token").length).toBe(grants + 1);
  const token = await t.app.db.prisma.oAuthToken.findUniqueOrThrow({ where: { id: callback.token_id } });
  expect(token.tokenUrl).toBe(`${moved}/token`);
});

// A provider configured by hand names no issuer: its authorization endpoint's origin stands in, and
// an answer's `iss` (and an ID token's) is checked against it. A grant is checked against the one it
// began under: moving auth_url to another name of the same server breaks neither a flow in progress
// nor a token's refresh (which a provider that rotates refresh tokens would otherwise have spent).
it("checks a grant's answers against the issuer it began under, whatever auth_url has become since", async () => {
  await addProvider(t, idp, ws.apiKey, "renamed");
  const { callback } = await authorize(t, idp, ws.apiKey, "renamed", ["openid"]);
  const started = await t.request("POST", "/v2/auth/authenticate", { key: ws.apiKey, body: { provider: "renamed", scopes: ["openid"], force_new: true } });
  expect(started.status, started.text).toBe(200);
  const back = await idp.follow(started.body.url);
  const moved = idp.issuer.replace("127.0.0.1", "localhost");
  const patched = await t.request("PATCH", "/v2/auth/providers/renamed", { key: ws.apiKey, body: { auth_url: `${moved}/auth` } });
  expect(patched.status, patched.text).toBe(200);

  const completed = await t.request("GET", pathOf(back));
  expect(completed.status, completed.text).toBe(200);
  await t.app.db.prisma.oAuthToken.update({ where: { id: callback.token_id }, data: { expiresAt: new Date(Date.now() - 1000) } });
  const refreshed = await t.request("POST", "/v2/auth/authenticate", { key: ws.apiKey, body: { provider: "renamed", scopes: ["openid"], token_id: callback.token_id } });
  expect(refreshed.body.status, refreshed.text).toBe("completed");
  t.guard.secret(refreshed.body.token, { shownIn: TOKEN_ANSWERS });
});
