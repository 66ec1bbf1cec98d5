import { createServer, type Server } from "node:http";
import { SignJWT } from "jose";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, TEST_JWT_SECRET, type TestApp } from "../support/app.js";
import { closeNow, listenLocally } from "../support/local-server.js";
import { accessTokenOf, addProvider, authorize, OAUTH_ENV, pathOf } from "../support/oauth.js";
import { type OAuthServer, startOAuthServer } from "../support/oauth-server.js";

/**
 * A provider is the workspace's: any caller of it may change its endpoints (PATCH). A token is its
 * owner's alone, so what it is sent with (the code that makes it, its refresh token) goes only to the
 * endpoints the provider had when its owner began to authorize: a change made since, by anyone,
 * must not send it to a server of their choosing. Alice is the workspace's API key, Mallory a
 * bearer token of the same workspace.
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
  t.app.core.deps.secrets.open((await t.app.db.prisma.oAuthToken.findUniqueOrThrow({ where: { id: tokenId } })).refreshToken!);

const sentElsewhere = (value: string) => received.filter((body) => Object.values(Object.fromEntries(new URLSearchParams(body))).includes(value));

it("refreshes a token at the token endpoint it was issued by, not at one the provider was changed to since", async () => {
  await addProvider(t, idp, ws.apiKey, "refreshed");
  const { callback } = await authorize(t, idp, ws.apiKey, "refreshed", ["openid"]);
  const refreshToken = await refreshTokenOf(callback.token_id);
  await repoint("refreshed", { token_url: `${elsewhereUrl}/token` });

  // Due for its refresh (30 s left): handed out refreshed by the provider that issued it.
  const grants = idp.grants.filter((g) => g === "refresh_token").length;
  await accessTokenOf(t, ws.apiKey, "refreshed", ["openid"]);
  expect(idp.grants.filter((g) => g === "refresh_token").length).toBe(grants + 1);
  expect(sentElsewhere(refreshToken)).toEqual([]);
  expect(received).toEqual([]);
});

it("revokes a deleted provider's tokens at the revocation endpoint they were issued under", async () => {
  await addProvider(t, idp, ws.apiKey, "deleted", { revocation_url: `${idp.issuer}/token/revocation` });
  const { callback } = await authorize(t, idp, ws.apiKey, "deleted", ["openid"]);
  const refreshToken = await refreshTokenOf(callback.token_id);
  await repoint("deleted", { revocation_url: `${elsewhereUrl}/revoke` });

  // The deletion answers once the revocations are done.
  const revocations = idp.revocations.length;
  const deleted = await t.request("DELETE", "/v2/auth/providers/deleted", { headers: await mallory() });
  expect(deleted.status, deleted.text).toBe(200);
  expect(idp.revocations.slice(revocations)).toEqual(["refresh_token"]);
  expect(sentElsewhere(refreshToken)).toEqual([]);
  expect(received).toEqual([]);
});

it("exchanges a flow's code at the token endpoint of when the flow began", async () => {
  await addProvider(t, idp, ws.apiKey, "flowing");
  const started = await t.request("POST", "/v2/auth/authenticate", { key: ws.apiKey, body: { provider: "flowing", scopes: ["openid"] } });
  expect(started.status, started.text).toBe(200);
  const back = await idp.follow(started.body.url);
  await repoint("flowing", { token_url: `${elsewhereUrl}/token`, revocation_url: `${elsewhereUrl}/revoke` });

  const code = back.searchParams.get("code")!;
  const callback = await t.request("GET", pathOf(back));
  expect(callback.status, callback.text).toBe(200);
  expect(sentElsewhere(code)).toEqual([]);

  // The token it made is the flow's: refreshed there too.
  await accessTokenOf(t, ws.apiKey, "flowing", ["openid"]);
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
