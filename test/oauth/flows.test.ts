import { createServer } from "node:http";
import { SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, TEST_JWT_SECRET, type TestApp } from "../support/app.js";
import { accessTokenOf, addProvider, authorize, OAUTH_ENV, pathOf, TOKEN_ANSWERS } from "../support/oauth.js";
import { type OAuthServer, startOAuthServer } from "../support/oauth-server.js";
import { closeNow, listenLocally } from "../support/local-server.js";

/**
 * Every authorization-code flow against a real OpenID provider (oidc-provider on 127.0.0.1): the
 * consent, the callback, the code exchange with PKCE, waiting across the bus, handing the token
 * out again, and each way a flow can fail, each a clear error that stores nothing.
 */

let t: TestApp;
let server: OAuthServer;
let ws: NewWorkspace;

beforeAll(async () => {
  server = await startOAuthServer();
  t = await startTestApp({ ...OAUTH_ENV, PIPELINE_WORKER: "off" });
  ws = await t.workspace();
  await addProvider(t, server, ws.apiKey, "idp");
});
afterAll(async () => {
  await t?.close();
  await server?.close();
});

const tokenCount = async () => t.app.db.prisma.oAuthToken.count();

describe("the authorization-code flow", () => {
  it("starts with a URL to open, completes at the callback, and hands the token to the waiter", async () => {
    const started = await t.request("POST", "/v2/auth/authenticate", { key: ws.apiKey, body: { provider: "idp", scopes: ["openid", "email", "repo"] } });
    expect(started.status, started.text).toBe(200);
    expect(started.body).toMatchObject({ status: "pending", auth_id: expect.stringMatching(/^[0-9a-f-]{36}$/), token: null });
    const url = new URL(started.body.url);
    expect(`${url.origin}${url.pathname}`).toBe(`${server.issuer}/auth`);
    expect(Object.fromEntries(url.searchParams)).toMatchObject({
      response_type: "code",
      redirect_uri: "http://test/v2/auth/callback/idp",
      scope: "openid email repo",
      code_challenge_method: "S256",
      code_challenge: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
      state: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
    });

    // A waiter is parked before the user has even opened the URL.
    const waiting = t.request("GET", `/v2/auth/wait/${started.body.auth_id}?timeout=30`, { key: ws.apiKey });
    const pending = await t.request("GET", `/v2/auth/wait/${started.body.auth_id}?timeout=0`, { key: ws.apiKey });
    expect(pending.body).toEqual({ status: "pending", token: null });

    const back = await server.follow(started.body.url, { account: "alice" });
    expect(back.searchParams.get("code")).toBeTruthy();
    const callback = await t.request("GET", pathOf(back));
    expect(callback.status, callback.text).toBe(200);
    expect(callback.body).toEqual({ status: "completed", auth_id: started.body.auth_id, provider_id: "idp", token_id: expect.any(String) });

    const waited = await waiting;
    expect(waited.status, waited.text).toBe(200);
    expect(waited.body).toEqual({ status: "completed", token: expect.any(String) });
    t.guard.secret(waited.body.token, { shownIn: TOKEN_ANSWERS });
    // An answer that hands out a token (or a flow's single-use state) is kept by no cache.
    for (const answer of [started, pending, waited]) expect(answer.headers.get("cache-control")).toBe("no-store");
    expect(server.grants).toContain("authorization_code");

    // The next authenticate hands out the same token without a new flow.
    const again = await t.request("POST", "/v2/auth/authenticate", { key: ws.apiKey, body: { provider: "idp", scopes: ["repo"] } });
    expect(again.body).toMatchObject({ status: "completed", token: waited.body.token, auth_id: null, url: null });
    expect(again.body.metadata).toMatchObject({ token_id: callback.body.token_id, provider_id: "idp" });

    const listed = await t.request("GET", "/v2/auth/tokens?provider_id=idp", { key: ws.apiKey });
    expect(listed.body).toEqual([
      {
        id: callback.body.token_id,
        provider_id: "idp",
        provider_account_label: "alice@example.test",
        scopes: ["openid", "email", "repo"],
        expires_at: expect.any(String),
        is_default: true,
        created_at: expect.any(String),
        updated_at: expect.any(String),
      },
    ]);
    // Stored sealed: the row holds ciphertext, never the value handed out.
    const row = await t.app.db.prisma.oAuthToken.findUniqueOrThrow({ where: { id: callback.body.token_id } });
    expect(row.accessToken).not.toContain(waited.body.token);
    expect(row.refreshToken).toMatch(/^v1\./);
  });

  it("asks again for scopes the stored token lacks, and keeps both tokens", async () => {
    const mine = await t.workspace();
    await addProvider(t, server, mine.apiKey, "idp");
    await authorize(t, server, mine.apiKey, "idp", ["openid"]);
    const more = await t.request("POST", "/v2/auth/authenticate", { key: mine.apiKey, body: { provider: "idp", scopes: ["openid", "read:user"] } });
    expect(more.body.status).toBe("pending");
    const back = await server.follow(more.body.url);
    expect((await t.request("GET", pathOf(back))).status).toBe(200);
    const tokens = (await t.request("GET", "/v2/auth/tokens", { key: mine.apiKey })).body;
    expect(tokens.map((x: { scopes: string[]; is_default: boolean }) => [x.scopes, x.is_default])).toEqual([
      [["openid", "read:user"], true],
      [["openid"], false],
    ]);
    const token = await accessTokenOf(t, mine.apiKey, "idp", ["read:user"]);
    expect(token).toEqual(expect.any(String));
  });

  it("finalizes through POST /v2/auth/callback with the code and state, for the caller's own flow only", async () => {
    const mine = await t.workspace();
    await addProvider(t, server, mine.apiKey, "idp");
    const started = await t.request("POST", "/v2/auth/authenticate", { key: mine.apiKey, body: { provider: "idp", scopes: ["repo"] } });
    const back = await server.follow(started.body.url);
    const body = { code: back.searchParams.get("code"), state: back.searchParams.get("state") };
    const intruder = await t.workspace();
    const stolen = await t.request("POST", "/v2/auth/callback/idp", { key: intruder.apiKey, body });
    expect(stolen.status).toBe(400);
    expect(stolen.body).toEqual({ detail: expect.stringMatching(/^Unknown or already used state/) });
    const done = await t.request("POST", "/v2/auth/callback/idp", { key: mine.apiKey, body });
    expect(done.status, done.text).toBe(200);
    expect(done.body).toMatchObject({ status: "completed", auth_id: started.body.auth_id, provider_id: "idp" });
  });
});

describe("POST /v2/auth/callback/{provider_id} with a body it refuses", () => {
  it("answers 422 naming code and state without quoting them: whoever reads them can finish the flow", async () => {
    const code = `code-${"x".repeat(4096)}`;
    const state = `state-${"y".repeat(512)}`;
    const res = await t.request("POST", "/v2/auth/callback/idp", { key: ws.apiKey, body: { code, state } });
    expect(res.status).toBe(422);
    expect(res.body.detail.map((d: { loc: string[] }) => d.loc.join("."))).toEqual(["body.code", "body.state"]);
    for (const issue of res.body.detail) expect(issue).not.toHaveProperty("input");
    expect(res.text).not.toContain("x".repeat(100));
    expect(res.text).not.toContain("y".repeat(100));
  });

  it("does the same for GET's query: a code or state too long is named, not quoted", async () => {
    const res = await t.request("GET", `/v2/auth/callback/idp?code=code-${"x".repeat(4096)}&state=state-${"y".repeat(512)}`);
    expect(res.status).toBe(422);
    expect(res.body.detail.map((d: { loc: string[] }) => d.loc.join("."))).toEqual(["query.code", "query.state"]);
    for (const issue of res.body.detail) expect(issue).not.toHaveProperty("input");
    expect(res.text).not.toContain("x".repeat(100));
    expect(res.text).not.toContain("y".repeat(100));
  });
});

describe("waiting", () => {
  /** Resolves once the service has taken the caller's long-poll (authenticated it, begun to wait). */
  const waitTaken = (app: TestApp) =>
    new Promise<void>((resolve) => {
      const flows = app.app.core.oauthFlows;
      const wait = flows.wait.bind(flows);
      const spy = vi.spyOn(flows, "wait").mockImplementation((...args) => {
        spy.mockRestore();
        resolve();
        return wait(...args);
      });
    });

  it("ends a long-poll with 401 once its API key is revoked: the token it waits for is not handed out", async () => {
    const mine = await t.workspace();
    await addProvider(t, server, mine.apiKey, "idp");
    const started = await t.request("POST", "/v2/auth/authenticate", { key: mine.apiKey, body: { provider: "idp", scopes: ["openid"] } });
    const taken = waitTaken(t);
    const waiting = t.request("GET", `/v2/auth/wait/${started.body.auth_id}?timeout=600`, { key: mine.apiKey });
    await taken;
    const key = (await t.app.core.apiKeys.list()).find((k) => k.workspaceId === mine.workspaceId)!;
    await t.app.core.apiKeys.revoke(key.id);
    // The user finishes the flow in the browser meanwhile.
    const back = await t.request("GET", pathOf(await server.follow(started.body.url)));
    expect(back.status, back.text).toBe(200);
    const res = await waiting;
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ detail: "This API key has been revoked." });
  });

  it("ends a long-poll with 401 when its bearer token expires", async () => {
    const mine = await t.workspace();
    await addProvider(t, server, mine.apiKey, "idp");
    const token = await new SignJWT({ tenant_id: mine.workspaceId, sub: "waiter" })
      .setProtectedHeader({ alg: "HS256" })
      // Long enough for the flow to start on a loaded machine (JWT times are whole seconds: 4 to 5 s).
      .setExpirationTime(Math.floor(Date.now() / 1000) + 5)
      .sign(new TextEncoder().encode(TEST_JWT_SECRET));
    const headers = { authorization: `Bearer ${token}` };
    const started = await t.request("POST", "/v2/auth/authenticate", { headers, body: { provider: "idp", scopes: [] } });
    expect(started.status, started.text).toBe(200);
    const res = await t.request("GET", `/v2/auth/wait/${started.body.auth_id}?timeout=600`, { headers });
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ detail: "The bearer token has expired." });
  });

  it("ends a long-poll when the service stops, instead of holding the shutdown", async () => {
    const other = await startTestApp({ ...OAUTH_ENV, PIPELINE_WORKER: "off" });
    const mine = await other.workspace();
    await addProvider(other, server, mine.apiKey, "idp");
    const started = await other.request("POST", "/v2/auth/authenticate", { key: mine.apiKey, body: { provider: "idp", scopes: [] } });
    const waiting = other.request("GET", `/v2/auth/wait/${started.body.auth_id}?timeout=600`, { key: mine.apiKey });
    await other.close();
    expect((await waiting).body).toEqual({ status: "timeout", token: null });
  });
});

describe("a flow that fails stores nothing and says why", () => {
  async function start(key: string) {
    const res = await t.request("POST", "/v2/auth/authenticate", { key, body: { provider: "idp", scopes: ["repo"], force_new: true } });
    expect(res.body.status).toBe("pending");
    return res.body as { url: string; auth_id: string };
  }

  it("refuses a wrong state", async () => {
    const before = await tokenCount();
    const flow = await start(ws.apiKey);
    const back = await server.follow(flow.url);
    back.searchParams.set("state", "not-the-state");
    const res = await t.request("GET", pathOf(back));
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ detail: expect.stringMatching(/^Unknown or already used state/) });
    expect(await tokenCount()).toBe(before);
    // The flow itself is still waiting for its real callback.
    expect((await t.request("GET", `/v2/auth/wait/${flow.auth_id}?timeout=0`, { key: ws.apiKey })).body.status).toBe("pending");
  });

  it("refuses a replayed callback (single-use state) and a replayed code (the provider refuses it)", async () => {
    const first = await start(ws.apiKey);
    const back = await server.follow(first.url);
    expect((await t.request("GET", pathOf(back))).status).toBe(200);
    const before = await tokenCount();

    const replayed = await t.request("GET", pathOf(back));
    expect(replayed.status).toBe(400);
    expect(replayed.body.detail).toMatch(/has already been used \(state is single use\)/);

    // The same code with another flow's state: the provider refuses a code it has already exchanged.
    const second = await start(ws.apiKey);
    const secondBack = await server.follow(second.url);
    const forged = new URL(back);
    forged.searchParams.set("state", secondBack.searchParams.get("state")!);
    const res = await t.request("GET", pathOf(forged));
    expect(res.status).toBe(400);
    expect(res.body.detail).toMatch(/the provider refused \(invalid_grant/);
    expect(await tokenCount()).toBe(before);
    const waited = await t.request("GET", `/v2/auth/wait/${second.auth_id}?timeout=1`, { key: ws.apiKey });
    expect(waited.status).toBe(400);
    expect(waited.body.detail).toMatch(new RegExp(`^Authorization ${second.auth_id} failed: .*invalid_grant`));
  });

  it("refuses the callback of an expired flow", async () => {
    const before = await tokenCount();
    const flow = await start(ws.apiKey);
    const back = await server.follow(flow.url);
    // Time passes beyond the flow's lifetime.
    await t.app.db.prisma.oAuthFlow.update({ where: { id: flow.auth_id }, data: { expiresAt: new Date(Date.now() - 1000) } });
    const res = await t.request("GET", pathOf(back));
    expect(res.status).toBe(400);
    expect(res.body.detail).toMatch(new RegExp(`^Authorization ${flow.auth_id} expired at `));
    expect(await tokenCount()).toBe(before);
    const waited = await t.request("GET", `/v2/auth/wait/${flow.auth_id}`, { key: ws.apiKey });
    expect(waited.status).toBe(400);
    expect(waited.body.detail).toMatch(/expired/);
  });

  it("answers 502 when the provider is down at the code exchange", async () => {
    const before = await tokenCount();
    const flow = await start(ws.apiKey);
    const back = await server.follow(flow.url);
    await server.pause();
    try {
      const res = await t.request("GET", pathOf(back));
      expect(res.status).toBe(502);
      expect(res.body).toEqual({ detail: expect.stringMatching(/the provider did not answer/) });
    } finally {
      await server.resume();
    }
    expect(await tokenCount()).toBe(before);
  });

  it("says so when the user denies consent", async () => {
    const before = await tokenCount();
    const flow = await start(ws.apiKey);
    const back = await server.follow(flow.url, { deny: true });
    expect(back.searchParams.get("error")).toBe("access_denied");
    const res = await t.request("GET", pathOf(back));
    expect(res.status).toBe(400);
    expect(res.body.detail).toMatch(/refused the authorization \(access_denied: The user said no\.\)/);
    expect(await tokenCount()).toBe(before);
  });

  it("answers not_found for a flow that is not the caller's", async () => {
    const flow = await start(ws.apiKey);
    const other = await t.workspace();
    expect((await t.request("GET", `/v2/auth/wait/${flow.auth_id}?timeout=0`, { key: other.apiKey })).body).toEqual({ status: "not_found", token: null });
    expect((await t.request("GET", "/v2/auth/wait/not-a-flow", { key: ws.apiKey })).body).toEqual({ status: "not_found", token: null });
  });
});

describe("a long-poll that answered", () => {
  it("leaves nothing behind on the service: no listener kept on its stop signal (one a wait, for the process's life)", async () => {
    // A fresh app: Node warns of an EventTarget's 11th listener once per target, so an app that
    // already served waits might have warned before this test looked.
    const fresh = await startTestApp({ ...OAUTH_ENV, PIPELINE_WORKER: "off" });
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(`${w.name}: ${w.message}`);
    process.on("warning", onWarning);
    try {
      const mine = await fresh.workspace();
      await addProvider(fresh, server, mine.apiKey, "idp");
      const started = await fresh.request("POST", "/v2/auth/authenticate", { key: mine.apiKey, body: { provider: "idp", scopes: ["openid"] } });
      expect(started.body.status, started.text).toBe("pending");
      for (let i = 0; i < 20; i++) {
        const res = await fresh.request("GET", `/v2/auth/wait/${started.body.auth_id}?timeout=0`, { key: mine.apiKey });
        expect(res.body).toEqual({ status: "pending", token: null });
      }
      // Node emits its warnings on a later turn of the event loop.
      await new Promise((resolve) => setImmediate(resolve));
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(warnings.filter((w) => w.startsWith("MaxListenersExceededWarning"))).toEqual([]);
    } finally {
      process.off("warning", onWarning);
      await fresh.close();
    }
  });
});

describe("a provider's refusal at its token endpoint", () => {
  it("is told and kept as text the database can hold: a NUL replaced, a long description cut; the flow fails", async () => {
    let description = "";
    const provider = createServer((req, res) => {
      req.resume();
      req.on("end", () => res.writeHead(400, { "content-type": "application/json" }).end(JSON.stringify({ error: "invalid_grant", error_description: description })));
    });
    const base = await listenLocally(provider);
    try {
      const mine = await t.workspace();
      const created = await t.request("POST", "/v2/auth/providers", {
        key: mine.apiKey,
        body: { provider_id: "refusing", name: "Refusing", client_id: "c", client_secret: t.guard.secret(), auth_url: `${base}/auth`, token_url: `${base}/token` },
      });
      expect(created.status, created.text).toBe(200);
      const refusals: [sent: string, told: string][] = [
        ["x\u0000y", "x\uFFFDy"],
        ["z".repeat(100_000), `${"z".repeat(1024)}… (98976 more characters left out)`],
      ];
      for (const [sent, told] of refusals) {
        description = sent;
        const started = await t.request("POST", "/v2/auth/authenticate", { key: mine.apiKey, body: { provider: "refusing", scopes: ["a"] } });
        expect(started.status, started.text).toBe(200);
        const state = new URL(started.body.url).searchParams.get("state")!;
        const res = await t.request("GET", `/v2/auth/callback/refusing?code=c&state=${state}`);
        expect(res.status, res.text).toBe(400);
        expect(res.body.detail).toBe(`Could not exchange the authorization code at provider 'refusing': the provider refused (invalid_grant: ${told}).`);
        const waited = await t.request("GET", `/v2/auth/wait/${started.body.auth_id}?timeout=0`, { key: mine.apiKey });
        expect(waited.status, waited.text).toBe(400);
        expect(waited.body.detail).toContain(`failed: Could not exchange the authorization code at provider 'refusing': the provider refused (invalid_grant: ${told}).`);
      }
    } finally {
      await closeNow(provider);
    }
  });
});
