import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { REFRESH_CLAIM_MS } from "../../src/core/oauth-tokens.js";
import { createTestDatabase, startTestApp, type TestApp } from "../support/app.js";
import { addProvider, authorize, OAUTH_ENV, TOKEN_ANSWERS } from "../support/oauth.js";
import { type OAuthServer, startOAuthServer, type EndpointHold } from "../support/oauth-server.js";
import { waitFor } from "../support/wait.js";

/**
 * Hand-outs of one token due for its refresh, at the same time. The provider rotates refresh tokens
 * and takes one sent twice for a stolen one (reuse): it revokes the whole grant. So one refresh per
 * token is at the provider at a time, on one replica or across replicas; the other hand-outs wait for
 * it and hand out its result. The provider holds the refresh (holdTokenEndpoint) until they have come.
 */

let t: TestApp;
/** Access tokens live 30 s: within the refresh margin, so every hand-out refreshes first. */
let server: OAuthServer;
const holds: EndpointHold[] = [];
const replicas: TestApp[] = [];

beforeAll(async () => {
  server = await startOAuthServer({ accessTokenTtl: 30 });
  t = await startTestApp({ ...OAUTH_ENV, PIPELINE_WORKER: "off" });
});
// A test that failed half-way must not leave the provider holding the next test's refresh.
afterEach(() => {
  for (const hold of holds.splice(0)) hold.release();
  vi.restoreAllMocks();
});
afterAll(async () => {
  await Promise.all(replicas.map((r) => r.close()));
  await t?.close();
  await server?.close();
});

async function handOut(app: TestApp, key: string) {
  const res = await app.request("POST", "/v2/auth/authenticate", { key, body: { provider: "idp", scopes: ["openid"] } });
  expect(res.status, res.text).toBe(200);
  if (res.body.token) app.guard.secret(res.body.token, { shownIn: TOKEN_ANSWERS });
  return res.body as { status: string; token: string | null };
}

/** A workspace with the provider and a token of the caller's (due for its refresh, as each one is here). */
async function withToken(app: TestApp) {
  const ws = await app.workspace();
  await addProvider(app, server, ws.apiKey, "idp");
  const { callback } = await authorize(app, server, ws.apiKey, "idp", ["openid"]);
  return { key: ws.apiKey, tokenId: callback.token_id as string };
}

/** The grant is alive: once the access token has expired, a hand-out refreshes it with the stored refresh token. */
async function grantAlive(app: TestApp, key: string, tokenId: string) {
  await app.app.db.prisma.oAuthToken.update({ where: { id: tokenId }, data: { expiresAt: new Date(Date.now() - 1000) } });
  expect((await handOut(app, key)).status).toBe("completed");
}

function heldRefresh() {
  const hold = server.holdTokenEndpoint();
  holds.push(hold);
  return hold;
}

const refreshGrants = (from: number) => server.grants.slice(from).filter((g) => g.startsWith("refresh_token"));

describe("hand-outs of one token at once, on one replica", () => {
  it("send one refresh to the provider, and all hand out its result: the grant stays alive", async () => {
    const { key, tokenId } = await withToken(t);
    const asked = vi.spyOn(t.app.core.oauthTokens, "freshAccessToken");
    const grants = server.grants.length;
    const hold = heldRefresh();
    const first = handOut(t, key);
    await waitFor(() => hold.arrived, (n) => n >= 1, { what: "the first refresh to reach the token endpoint" });
    const others = [handOut(t, key), handOut(t, key)];
    await waitFor(() => asked.mock.calls.length, (n) => n >= 3, { what: "the other hand-outs to ask for the token" });
    hold.release();

    const answers = await Promise.all([first, ...others]);
    expect(answers.map((a) => a.status)).toEqual(["completed", "completed", "completed"]);
    expect(new Set(answers.map((a) => a.token)).size).toBe(1);
    expect(hold.arrived).toBe(1);
    expect(refreshGrants(grants)).toEqual(["refresh_token"]);
    await grantAlive(t, key, tokenId);
  });
});

describe("a hand-out while another replica refreshes the token", () => {
  it("waits for that refresh and hands out its result, sending nothing to the provider", async () => {
    const { key, tokenId } = await withToken(t);
    const prisma = t.app.db.prisma;
    // Another replica has claimed the token's refresh: its request is at the provider.
    await prisma.oAuthToken.update({ where: { id: tokenId }, data: { refreshClaimedUntil: new Date(Date.now() + REFRESH_CLAIM_MS) } });
    const asked = vi.spyOn(t.app.core.oauthTokens, "freshAccessToken");
    const grants = server.grants.length;
    const answer = handOut(t, key);
    await waitFor(() => asked.mock.calls.length, (n) => n >= 1, { what: "the hand-out to read the token" });
    // That replica stores what the provider answered, which ends its claim.
    const secrets = t.app.deps.secrets;
    const refreshedThere = t.guard.secret();
    await prisma.oAuthToken.update({
      where: { id: tokenId },
      data: { accessToken: secrets.seal(refreshedThere), refreshToken: secrets.seal(t.guard.secret()), expiresAt: new Date(Date.now() + 30_000), refreshClaimedUntil: null },
    });

    expect(await answer).toEqual(expect.objectContaining({ status: "completed", token: refreshedThere }));
    expect(refreshGrants(grants)).toEqual([]);
  });

  it("takes over a claim that ran out (its replica stopped mid-refresh), and ends it", async () => {
    const { key, tokenId } = await withToken(t);
    const prisma = t.app.db.prisma;
    await prisma.oAuthToken.update({ where: { id: tokenId }, data: { refreshClaimedUntil: new Date(Date.now() - 1000) } });
    const grants = server.grants.length;
    expect((await handOut(t, key)).status).toBe("completed");
    expect(refreshGrants(grants)).toEqual(["refresh_token"]);
    expect((await prisma.oAuthToken.findUniqueOrThrow({ where: { id: tokenId } })).refreshClaimedUntil).toBeNull();
    await grantAlive(t, key, tokenId);
  });

  it("gives up its claim when the provider refuses the refresh, for the next hand-out to try", async () => {
    const { key, tokenId } = await withToken(t);
    const prisma = t.app.db.prisma;
    // The refresh token is one the provider never issued, and the access token has expired.
    const secrets = t.app.deps.secrets;
    await prisma.oAuthToken.update({ where: { id: tokenId }, data: { refreshToken: secrets.seal(t.guard.secret()), expiresAt: new Date(Date.now() - 1000) } });
    expect((await handOut(t, key)).status).toBe("token_expired");
    expect((await prisma.oAuthToken.findUniqueOrThrow({ where: { id: tokenId } })).refreshClaimedUntil).toBeNull();
  });

  it("answers pending with a new flow, not token_expired, when the token is deleted while its refresh is at the provider", async () => {
    const { key, tokenId } = await withToken(t);
    const hold = heldRefresh();
    const answer = handOut(t, key);
    await waitFor(() => hold.arrived, (n) => n === 1, { what: "the refresh to reach the provider" });
    expect((await t.request("DELETE", `/v2/auth/tokens/${tokenId}`, { key })).status).toBe(204);
    hold.release();
    // No token is there any more: nothing expired, the caller has none, as if it had never had one.
    expect(await answer).toMatchObject({ status: "pending", token: null, url: expect.stringContaining(`${server.issuer}/auth?`) });
  });

  // Replicas on one PostgreSQL: the claim in the database keeps the second one's refresh from the provider.
  it.skipIf(!process.env.TEST_DATABASE_URL)("on two replicas: one refresh at the provider, both hand out its result", async () => {
    const db = await createTestDatabase();
    const a = await startTestApp({ ...OAUTH_ENV, PIPELINE_WORKER: "off" }, db);
    replicas.push(a);
    const b = await startTestApp({ ...OAUTH_ENV, PIPELINE_WORKER: "off" }, db);
    replicas.push(b);
    const { key, tokenId } = await withToken(a);
    const asked = vi.spyOn(b.app.core.oauthTokens, "freshAccessToken");
    const grants = server.grants.length;
    const hold = heldRefresh();
    const onA = handOut(a, key);
    await waitFor(() => hold.arrived, (n) => n >= 1, { what: "replica a's refresh to reach the token endpoint" });
    const onB = handOut(b, key);
    await waitFor(() => asked.mock.calls.length, (n) => n >= 1, { what: "replica b's hand-out to read the token" });
    hold.release();

    const answers = await Promise.all([onA, onB]);
    expect(answers.map((x) => x.status)).toEqual(["completed", "completed"]);
    expect(answers[1]!.token).toBe(answers[0]!.token);
    expect(hold.arrived).toBe(1);
    expect(refreshGrants(grants)).toEqual(["refresh_token"]);
    await grantAlive(b, key, tokenId);
  });
});
