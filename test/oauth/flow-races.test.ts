import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, type TestApp, type TestResponse } from "../support/app.js";
import { addProvider, authorize, OAUTH_ENV, pathOf, TOKEN_ANSWERS } from "../support/oauth.js";
import { type OAuthServer, startOAuthServer, type EndpointHold } from "../support/oauth-server.js";
import { waitFor } from "../support/wait.js";

/**
 * What else may happen to a flow while its code is at the provider's token endpoint (held there by
 * the test provider until the test lets it answer): the callback that claimed the flow, and the
 * exchange's outcome alone, decide it.
 */

let t: TestApp;
let server: OAuthServer;
let ws: NewWorkspace;
const holds: EndpointHold[] = [];

beforeAll(async () => {
  server = await startOAuthServer();
  t = await startTestApp({ ...OAUTH_ENV, PIPELINE_WORKER: "off" });
  ws = await t.workspace();
  await addProvider(t, server, ws.apiKey, "idp");
  await addProvider(t, server, ws.apiKey, "revocable", { revocation_url: `${server.issuer}/token/revocation` });
});
// A test that failed half-way must not leave the provider holding the next test's exchange.
afterEach(() => {
  for (const hold of holds.splice(0)) hold.release();
});
afterAll(async () => {
  await t?.close();
  await server?.close();
});

const tokenCount = () => t.app.db.prisma.oAuthToken.count();
const storedStatus = async (id: string) => (await t.app.db.prisma.oAuthFlow.findUniqueOrThrow({ where: { id } })).status;
const wait = (authId: string, timeout: number) => t.request("GET", `/v2/auth/wait/${authId}?timeout=${timeout}`, { key: ws.apiKey });

interface Exchanging {
  authId: string;
  state: string;
  hold: EndpointHold;
  /** The callback whose code is at the token endpoint. */
  callback: Promise<TestResponse>;
  /** A waiter parked before that callback came. */
  waiting: Promise<TestResponse>;
}

/** A flow whose callback has claimed it and whose code exchange is held at the provider. */
async function exchanging(tamper: (back: URL) => void = () => {}, provider = "idp"): Promise<Exchanging> {
  const started = await t.request("POST", "/v2/auth/authenticate", { key: ws.apiKey, body: { provider, scopes: ["repo"], force_new: true } });
  expect(started.body.status, started.text).toBe("pending");
  const authId = started.body.auth_id as string;
  const back = await server.follow(started.body.url);
  tamper(back);
  const waiting = wait(authId, 60);
  const hold = server.holdTokenEndpoint();
  holds.push(hold);
  const callback = t.request("GET", pathOf(back));
  await waitFor(() => hold.arrived, (n) => n >= 1, { what: "the code exchange to reach the token endpoint" });
  expect(await storedStatus(authId)).toBe("exchanging");
  return { authId, state: back.searchParams.get("state")!, hold, callback, waiting };
}

const refusal = (state: string) => `/v2/auth/callback/idp?state=${encodeURIComponent(state)}&error=access_denied&error_description=late`;

describe("an error callback while another callback exchanges the code", () => {
  it("is refused as already used and changes nothing: the exchange completes the flow", async () => {
    const before = await tokenCount();
    const f = await exchanging();
    const refused = await t.request("GET", refusal(f.state));
    expect(refused.status).toBe(400);
    expect(refused.body.detail).toMatch(new RegExp(`^Authorization ${f.authId} has already been used \\(state is single use\\)`));
    expect(await storedStatus(f.authId)).toBe("exchanging");
    expect((await wait(f.authId, 0)).body).toEqual({ status: "pending", token: null });

    f.hold.release();
    const done = await f.callback;
    expect(done.status, done.text).toBe(200);
    expect(done.body).toMatchObject({ status: "completed", auth_id: f.authId });
    const waited = await f.waiting;
    expect(waited.status, waited.text).toBe(200);
    expect(waited.body).toEqual({ status: "completed", token: expect.any(String) });
    t.guard.secret(waited.body.token, { shownIn: TOKEN_ANSWERS });
    expect(await tokenCount()).toBe(before + 1);
  });

  it("is refused as already used: the exchange's own failure is what the flow says", async () => {
    const before = await tokenCount();
    // A code the provider never issued: the exchange ends in its refusal (invalid_grant).
    const f = await exchanging((back) => back.searchParams.set("code", "not-a-code"));
    const refused = await t.request("GET", refusal(f.state));
    expect(refused.status).toBe(400);
    expect(refused.body.detail).toMatch(/has already been used/);

    f.hold.release();
    const failed = await f.callback;
    expect(failed.status).toBe(400);
    expect(failed.body.detail).toMatch(/the provider refused \(invalid_grant/);
    const waited = await f.waiting;
    expect(waited.status).toBe(400);
    expect(waited.body.detail).toMatch(new RegExp(`^Authorization ${f.authId} failed: .*invalid_grant`));
    expect(waited.body.detail).not.toMatch(/access_denied/);
    expect(await tokenCount()).toBe(before);
  });
});

describe("a flow whose time runs out while its code is exchanged", () => {
  it("is pending until the exchange ends, then completed: the callback came in time", async () => {
    const before = await tokenCount();
    const f = await exchanging();
    // The flow's lifetime ends while the provider has not answered yet.
    await t.app.db.prisma.oAuthFlow.update({ where: { id: f.authId }, data: { expiresAt: new Date(Date.now() - 1) } });
    expect((await wait(f.authId, 0)).body).toEqual({ status: "pending", token: null });
    // A waiter that comes now waits for the exchange, too.
    const late = wait(f.authId, 60);

    f.hold.release();
    const done = await f.callback;
    expect(done.status, done.text).toBe(200);
    for (const waiting of [f.waiting, late]) {
      const waited = await waiting;
      expect(waited.status, waited.text).toBe(200);
      expect(waited.body).toEqual({ status: "completed", token: expect.any(String) });
      t.guard.secret(waited.body.token, { shownIn: TOKEN_ANSWERS });
    }
    expect(await tokenCount()).toBe(before + 1);
  });

  it("has expired once the exchange outlasted any request to the provider, and a later answer stores nothing", async () => {
    const before = await tokenCount();
    const revoked = server.revocations.length;
    const f = await exchanging(undefined, "revocable");
    // As if the process exchanging the code had died long ago: the flow must not stay pending.
    await t.app.db.prisma.oAuthFlow.update({ where: { id: f.authId }, data: { expiresAt: new Date(Date.now() - 3600_000) } });
    const expired = await wait(f.authId, 0);
    expect(expired.status).toBe(400);
    expect(expired.body.detail).toMatch(new RegExp(`^Authorization ${f.authId} expired at `));

    f.hold.release();
    const late = await f.callback;
    expect(late.status).toBe(400);
    expect(late.body.detail).toMatch(new RegExp(`^Authorization ${f.authId} expired at `));
    expect(await tokenCount()).toBe(before);
    expect(await storedStatus(f.authId)).toBe("expired");
    // The tokens the provider issued all the same are kept by no one: they are revoked there.
    expect(server.revocations.slice(revoked)).toEqual(["refresh_token"]);
    const waited = await f.waiting;
    expect(waited.status).toBe(400);
    expect(waited.body.detail).toMatch(/expired/);
  });
});

describe("a provider deleted while a code of its is exchanged", () => {
  it("ends the callback in a 400 that says so, stores nothing and revokes what the provider issued", async () => {
    await addProvider(t, server, ws.apiKey, "doomed", { revocation_url: `${server.issuer}/token/revocation` });
    const before = await tokenCount();
    const f = await exchanging(undefined, "doomed");
    const deleted = await t.request("DELETE", "/v2/auth/providers/doomed", { key: ws.apiKey });
    expect(deleted.status, deleted.text).toBe(200);
    const revoked = server.revocations.length;

    f.hold.release();
    const late = await f.callback;
    expect(late.status, late.text).toBe(400);
    expect(late.body.detail).toMatch(/^The OAuth provider 'doomed' was deleted while the authorization code was exchanged: nothing was kept/);
    expect(await tokenCount()).toBe(before);
    expect(server.revocations.slice(revoked)).toEqual(["refresh_token"]);
    // The flow went with its provider: a waiter learns that it no longer exists.
    expect((await wait(f.authId, 0)).body).toEqual({ status: "not_found", token: null });
  });
});

describe("a provider deleted while a token of its is handed out", () => {
  /** A provider with a token of the caller's, due for its refresh (it expires within the refresh margin). */
  async function dueToken(providerId: string) {
    await addProvider(t, server, ws.apiKey, providerId);
    const { callback } = await authorize(t, server, ws.apiKey, providerId, ["openid"]);
    await t.app.db.prisma.oAuthToken.update({ where: { id: callback.token_id }, data: { expiresAt: new Date(Date.now() + 20_000) } });
    return callback.token_id as string;
  }
  const handOut = (providerId: string) => t.request("POST", "/v2/auth/authenticate", { key: ws.apiKey, body: { provider: providerId, scopes: ["openid"] } });
  const deleteProvider = async (providerId: string) => {
    const deleted = await t.request("DELETE", `/v2/auth/providers/${providerId}`, { key: ws.apiKey });
    expect(deleted.status, deleted.text).toBe(200);
    expect(deleted.body).toMatchObject({ deleted: true, deleted_tokens: 1 });
  };

  it("answers 404 for the provider when it went after the token was picked, before the refresh", async () => {
    const tokenId = await dueToken("gone-before");
    const grants = server.grants.length;
    // authenticate has picked the token; the DELETE (and its tokens) commits before the refresh reads the provider.
    const vault = t.app.core.oauthTokens;
    const pick = vault.pick.bind(vault);
    const spy = vi.spyOn(vault, "pick").mockImplementationOnce(async (...args) => {
      const picked = await pick(...args);
      await deleteProvider("gone-before");
      return picked;
    });
    try {
      const res = await handOut("gone-before");
      expect(res.status, res.text).toBe(404);
      expect(res.body).toEqual({ detail: "Provider ID gone-before not found." });
    } finally {
      spy.mockRestore();
    }
    expect(server.grants.slice(grants)).toEqual([]);
    expect(await t.app.db.prisma.oAuthToken.count({ where: { id: tokenId } })).toBe(0);
    expect(await t.app.db.prisma.oAuthFlow.count({ where: { provider: { providerId: "gone-before" } } })).toBe(0);
  });

  it("answers 404 for the provider when it went while the refresh was at the provider, and hands out nothing", async () => {
    const tokenId = await dueToken("gone-during");
    const hold = server.holdTokenEndpoint();
    holds.push(hold);
    const answer = handOut("gone-during");
    await waitFor(() => hold.arrived, (n) => n >= 1, { what: "the refresh to reach the token endpoint" });
    await deleteProvider("gone-during");
    hold.release();

    const res = await answer;
    expect(res.status, res.text).toBe(404);
    expect(res.body).toEqual({ detail: "Provider ID gone-during not found." });
    expect(await t.app.db.prisma.oAuthToken.count({ where: { id: tokenId } })).toBe(0);
  });
});
