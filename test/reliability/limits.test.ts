import { request as httpRequest } from "node:http";
import { randomUUID } from "node:crypto";
import { SignJWT, UnsecuredJWT } from "jose";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { loadConfig } from "../../src/config.js";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { TokenBuckets } from "../../src/middleware/caller-limits.js";
import { TEST_JWT_SECRET, type TestApp, startTestApp } from "../support/app.js";
import { waitFor } from "../support/wait.js";

const listener = (computeId: string, extra: Record<string, unknown> = {}) => ({
  compute_type: "k8s",
  compute_id: computeId,
  compute_config: { k8s_namespaces: ["agents"] },
  version: "1.0.0",
  ...extra,
});

/**
 * One HTTP request over a real socket: with the Content-Length Node computes, or, chunked, written in
 * two parts with Transfer-Encoding: chunked and no length declared.
 */
function post(url: string, path: string, body: string, headers: Record<string, string> = {}, { chunked = false } = {}) {
  return new Promise<{ status: number; headers: Record<string, string | string[] | undefined>; text: string }>(
    (resolve, reject) => {
      const req = httpRequest(`${url}${path}`, { method: "POST", headers: { "content-type": "application/json", ...headers } }, (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (d) => (text += d));
        res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, text }));
      });
      // The server may answer 413 and close before the whole body is written.
      req.on("error", reject);
      if (chunked) {
        req.write(body.slice(0, body.length >> 1));
        req.end(body.slice(body.length >> 1));
      } else {
        req.end(body);
      }
    },
  );
}

describe("settings", () => {
  it("reads the limits and previous keys, with defaults, and names bad values", () => {
    const defaults = loadConfig({ DATABASE_URL: "memory://" });
    expect(defaults.limits).toEqual({ maxBodyBytes: 1_048_576, ratePerMinute: 1200, authFailuresPerMinute: 60, subscriptionsPerCaller: 1000, requestTimeoutMs: 30_000 });
    expect(defaults.secretsKeyPrevious).toEqual([]);
    const a = Buffer.alloc(32, 1).toString("base64");
    const b = Buffer.alloc(32, 2).toString("base64");
    const set = loadConfig({
      DATABASE_URL: "memory://",
      MAX_BODY_BYTES: "2048",
      RATE_LIMIT_PER_MINUTE: "0",
      SUBSCRIPTIONS_PER_CALLER: "0",
      REQUEST_TIMEOUT_MS: "500",
      SECRETS_KEY_PREVIOUS: `${a}, ${b}`,
    });
    expect(set.limits).toEqual({ maxBodyBytes: 2048, ratePerMinute: 0, authFailuresPerMinute: 60, subscriptionsPerCaller: 0, requestTimeoutMs: 500 });
    expect(set.secretsKeyPrevious).toEqual([a, b]);
    let problems = "";
    try {
      loadConfig({ MAX_BODY_BYTES: "0", RATE_LIMIT_PER_MINUTE: "-1", SUBSCRIPTIONS_PER_CALLER: "many", REQUEST_TIMEOUT_MS: "0", SECRETS_KEY_PREVIOUS: `${a},short` });
    } catch (err) {
      problems = String(err);
    }
    for (const name of ["MAX_BODY_BYTES", "RATE_LIMIT_PER_MINUTE", "SUBSCRIPTIONS_PER_CALLER", "REQUEST_TIMEOUT_MS", "SECRETS_KEY_PREVIOUS"]) {
      expect(problems).toContain(`${name}:`);
    }
  });
});

describe("request body limit", () => {
  let t: TestApp;
  let ws: NewWorkspace;
  let url: string;
  beforeAll(async () => {
    // The rate limits are off here (and proven off below).
    t = await startTestApp({ MAX_BODY_BYTES: "1024", RATE_LIMIT_PER_MINUTE: "0", AUTH_FAILURES_PER_MINUTE: "0" });
    ws = await t.workspace();
    url = await t.app.start();
  });
  afterAll(async () => {
    await t.close();
  });

  it("answers 413 {detail} for a streamed body over the limit and creates nothing", async () => {
    const big = JSON.stringify(listener("too-big", { padding: "x".repeat(2000) }));
    const res = await t.request("POST", "/v2/listeners", { key: ws.apiKey, rawBody: big, headers: { "content-type": "application/json" } });
    expect(res.status).toBe(413);
    expect(res.body).toEqual({ detail: "Request body too large: the limit is 1024 bytes." });
    const list = await t.request("GET", "/v2/listeners", { key: ws.apiKey });
    expect(list.body.resources).toEqual([]);
  });

  it("lets a body at the limit through to the route", async () => {
    const base = JSON.stringify(listener("just-fits", { padding: "" }));
    const body = JSON.stringify(listener("just-fits", { padding: "x".repeat(1024 - base.length) }));
    expect(Buffer.byteLength(body)).toBe(1024);
    const res = await t.request("POST", "/v2/listeners", { key: ws.apiKey, rawBody: body });
    expect(res.status).toBe(201);
    expect(res.body.compute_id).toBe("just-fits");
  });

  it("refuses a declared Content-Length over the limit over HTTP, before authentication or parsing", async () => {
    const res = await post(url, "/v2/listeners", "{".repeat(5000));
    expect(res.status).toBe(413);
    expect(JSON.parse(res.text)).toEqual({ detail: expect.stringContaining("1024 bytes") });
  });

  it("counts a chunked body (no Content-Length) over HTTP as it arrives: 413 over the limit, through under it", async () => {
    const over = await post(url, "/v2/listeners", JSON.stringify(listener("chunked-too-big", { padding: "x".repeat(2000) })), { "x-api-key": ws.apiKey }, { chunked: true });
    expect(over.status).toBe(413);
    expect(JSON.parse(over.text)).toEqual({ detail: "Request body too large: the limit is 1024 bytes." });
    const under = await post(url, "/v2/listeners", JSON.stringify(listener("chunked-fits")), { "x-api-key": ws.apiKey }, { chunked: true });
    expect(under.status).toBe(201);
    expect(JSON.parse(under.text).compute_id).toBe("chunked-fits");
    const graphql = await post(url, "/graphql", JSON.stringify({ query: "{ viewer { uuid } }", padding: "y".repeat(3000) }), { "x-api-key": ws.apiKey }, { chunked: true });
    expect(graphql.status).toBe(413);
    const small = await post(url, "/graphql", JSON.stringify({ query: "{ viewer { uuid } }" }), { "x-api-key": ws.apiKey }, { chunked: true });
    expect(small.status).toBe(200);
    expect(JSON.parse(small.text)).toEqual({ data: { viewer: { uuid: ws.workspaceId } } });
  });

  it("has no rate limit with RATE_LIMIT_PER_MINUTE=0 and AUTH_FAILURES_PER_MINUTE=0 (the defaults would refuse some of these)", async () => {
    const statuses = new Set<number>();
    for (let i = 0; i < 1300; i++) statuses.add((await t.request("GET", "/v2/listeners")).status);
    expect(statuses).toEqual(new Set([401]));
  });

  it("covers /graphql too, answered as GraphQL (graphql-limits.test.ts has the rest)", async () => {
    const query = JSON.stringify({ query: `{ __typename }`, padding: "y".repeat(3000) });
    const tooLarge = { errors: [{ message: "Request body too large: the limit is 1024 bytes.", extensions: { code: "REQUEST_ENTITY_TOO_LARGE" } }] };
    const viaFetch = await t.request("POST", "/graphql", { key: ws.apiKey, rawBody: query, headers: { "content-type": "application/json" } });
    expect(viaFetch.status).toBe(413);
    expect(viaFetch.body).toEqual(tooLarge);
    const viaHttp = await post(url, "/graphql", query, { "x-api-key": ws.apiKey });
    expect(viaHttp.status).toBe(413);
    expect(JSON.parse(viaHttp.text)).toEqual(tooLarge);
  });
});

describe("rate limit", () => {
  let t: TestApp;
  let url: string;
  beforeAll(async () => {
    t = await startTestApp({ RATE_LIMIT_PER_MINUTE: "5" });
    url = await t.app.start();
  });
  afterAll(async () => {
    await t.close();
  });

  it("answers 429 {detail} with Retry-After once a key exceeds its rate, and only for that key", async () => {
    const a = await t.workspace();
    const b = await t.workspace();
    // Verified here, as by a first request (which counts against the address: see below).
    for (const ws of [a, b]) await t.app.core.auth.authenticate({ apiKey: ws.apiKey });
    for (let i = 0; i < 5; i++) expect((await t.request("GET", "/v2/listeners", { key: a.apiKey })).status).toBe(200);
    const limited = await t.request("GET", "/v2/listeners", { key: a.apiKey });
    expect(limited.status).toBe(429);
    expect(limited.body).toEqual({ detail: expect.stringContaining("5 requests at once, then 5 a minute") });
    // 5 per minute: the next token is 12 s away.
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThanOrEqual(10);
    expect(Number(limited.headers.get("retry-after"))).toBeLessThanOrEqual(12);
    expect((await t.request("POST", "/v2/listeners", { key: a.apiKey, body: listener("nope") })).status).toBe(429);
    const graphql = await t.request("POST", "/graphql", { key: a.apiKey, body: { query: "{ __typename }" } });
    expect(graphql.status).toBe(429);
    expect(graphql.headers.get("retry-after")).toMatch(/^\d+$/);
    expect(graphql.body.errors[0].extensions).toEqual({ code: "RATE_LIMITED", retryAfter: Number(graphql.headers.get("retry-after")) });
    expect((await t.request("GET", "/v2/listeners", { key: b.apiKey })).status).toBe(200);
    // Probes are never throttled.
    for (let i = 0; i < 10; i++) expect((await t.request("GET", "/healthz")).status).toBe(200);
  });

  it("limits bearer tokens by workspace and subject, whatever the token string", async () => {
    const ws = await t.workspace();
    const token = (exp: string) =>
      new SignJWT({ tenant_id: ws.workspaceId, sub: "ada" })
        .setProtectedHeader({ alg: "HS256" })
        .setExpirationTime(exp)
        .sign(new TextEncoder().encode(TEST_JWT_SECRET));
    const tokens = [await token("1h"), await token("2h"), await token("3h")];
    // Verified here, as by a first request (which counts against the address: see below).
    for (const jwt of tokens) await t.app.core.auth.authenticate({ authorization: `Bearer ${jwt}` });
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) {
      const res = await t.request("GET", "/v2/listeners", { headers: { authorization: `Bearer ${tokens[i % 3]}` } });
      statuses.push(res.status);
    }
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429]);
  });

  it("limits callers without credentials by their address", async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) {
      const res = await post(url, "/v2/listeners", "{}");
      statuses.push(res.status);
      if (res.status === 429) expect(res.headers["retry-after"]).toMatch(/^\d+$/);
    }
    expect(statuses).toEqual([401, 401, 401, 401, 401, 429]);
  });

});

/**
 * A credential is a caller of its own only once this replica has verified it: until then its requests
 * count against the client's address, as requests without credentials do. Otherwise a new made-up key
 * (or token) on each request, to anything that does not answer 401 (a /graphql body that fails to
 * parse, routes without authentication), would never be throttled. Each test has its own app: its own
 * buckets for the one address (127.0.0.1) its requests come from.
 */
describe("rate limit: credentials this replica has not verified count against the address", () => {
  let t: TestApp;
  let url: string;
  beforeEach(async () => {
    t = await startTestApp({ RATE_LIMIT_PER_MINUTE: "5", PIPELINE_WORKER: "off" });
    url = await t.app.start();
  });
  afterEach(async () => {
    await t.close();
  });

  const madeUpKey = () => `dcp_made-up-${randomUUID()}`;
  const statusesOf = (responses: Response[]) => responses.map((r) => r.status);
  /** `n` requests one after another, as `send(i)` makes them: over a socket, so from 127.0.0.1. */
  async function sequence(n: number, send: (i: number) => Promise<Response>): Promise<Response[]> {
    const responses: Response[] = [];
    for (let i = 0; i < n; i++) {
      const res = await send(i);
      // Read, so that the connection is free for the next one.
      await res.arrayBuffer();
      responses.push(res);
    }
    return responses;
  }
  const expectRateLimited = (res: Response) => {
    expect(res.status).toBe(429);
    expect(res.headers.get("retry-after")).toMatch(/^[1-9]\d*$/);
  };

  it("POST /graphql with a body that does not parse (400 before authentication) and a new made-up key each time: 429 from the 6th", async () => {
    // Unterminated JSON: refused (400) before anything authenticates the request.
    const body = `{"query": "${"x".repeat(64 * 1024)}`;
    const responses = await sequence(10, () =>
      fetch(`${url}/graphql`, { method: "POST", headers: { "content-type": "application/json", "x-api-key": madeUpKey() }, body }),
    );
    expect(statusesOf(responses)).toEqual([400, 400, 400, 400, 400, 429, 429, 429, 429, 429]);
    for (const res of responses.slice(5)) expectRateLimited(res);
  });

  it("a route without authentication (GET /openapi.json) with a new made-up key each time: 429 from the 6th", async () => {
    const responses = await sequence(10, () => fetch(`${url}/openapi.json`, { headers: { "x-api-key": madeUpKey() } }));
    expect(statusesOf(responses)).toEqual([200, 200, 200, 200, 200, 429, 429, 429, 429, 429]);
    for (const res of responses.slice(5)) expectRateLimited(res);
  });

  it("two real keys from one address each get their own 5 a minute once verified, whatever made-up keys from there spend", async () => {
    const a = await t.workspace();
    const b = await t.workspace();
    const get = (key: string, path = "/v2/listeners") => fetch(`${url}${path}`, { headers: { "x-api-key": key } });
    // Their first requests verify them: those count against the address (3 of its 5 left).
    expect(statusesOf(await sequence(1, () => get(a.apiKey)))).toEqual([200]);
    expect(statusesOf(await sequence(1, () => get(b.apiKey)))).toEqual([200]);
    // Made-up keys from the same address spend what is left of its tokens, and no more.
    const madeUp = await sequence(4, () => get(madeUpKey(), "/openapi.json"));
    expect(statusesOf(madeUp)).toEqual([200, 200, 200, 429]);
    // Neither real key is starved: each has its own 5, and only its own spending ends them.
    const first = await sequence(6, () => get(a.apiKey));
    expect(statusesOf(first)).toEqual([200, 200, 200, 200, 200, 429]);
    expectRateLimited(first[5]!);
    const second = await sequence(6, () => get(b.apiKey));
    expect(statusesOf(second)).toEqual([200, 200, 200, 200, 200, 429]);
    expectRateLimited(second[5]!);
  });

  it("bearer tokens that do not verify (unsigned, or signed with another secret; random subjects) are limited by address", async () => {
    const ws = await t.workspace();
    const forged = (i: number) => {
      const claims = { tenant_id: ws.workspaceId, sub: `forged-${randomUUID()}` };
      if (i % 2) return Promise.resolve(new UnsecuredJWT(claims).setExpirationTime("1h").encode());
      return new SignJWT(claims).setProtectedHeader({ alg: "HS256" }).setExpirationTime("1h").sign(new TextEncoder().encode(`not-${TEST_JWT_SECRET}`));
    };
    const responses = await sequence(10, async (i) => fetch(`${url}/openapi.json`, { headers: { authorization: `Bearer ${await forged(i)}` } }));
    expect(statusesOf(responses)).toEqual([200, 200, 200, 200, 200, 429, 429, 429, 429, 429]);
    for (const res of responses.slice(5)) expectRateLimited(res);
  });

  it("a forged token claiming a real caller's workspace and subject does not spend that caller's requests", async () => {
    const ws = await t.workspace();
    const claims = { tenant_id: ws.workspaceId, sub: "ada" };
    const real = await new SignJWT(claims).setProtectedHeader({ alg: "HS256" }).setExpirationTime("1h").sign(new TextEncoder().encode(TEST_JWT_SECRET));
    const forged = new UnsecuredJWT(claims).setExpirationTime("1h").encode();
    // Over app.fetch: from another address than the forger's.
    expect((await t.request("GET", "/v2/listeners", { headers: { authorization: `Bearer ${real}` } })).status).toBe(200);
    const forger = await sequence(6, () => fetch(`${url}/openapi.json`, { headers: { authorization: `Bearer ${forged}` } }));
    expect(statusesOf(forger)).toEqual([200, 200, 200, 200, 200, 429]);
    // Ada, verified, still has her own five.
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) statuses.push((await t.request("GET", "/v2/listeners", { headers: { authorization: `Bearer ${real}` } })).status);
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429]);
  });

  it("Authenticator.verified: a key looked up here and not revoked, however old its cache entry; a token verified here until its exp", async () => {
    const auth = t.app.core.auth;
    const ws = await t.workspace();
    const { key, summary } = await t.app.core.apiKeys.create({ workspaceId: ws.workspaceId });
    const later = (ms: number, read: () => boolean) => {
      const at = Date.now() + ms;
      const now = vi.spyOn(Date, "now").mockReturnValue(at);
      try {
        return read();
      } finally {
        now.mockRestore();
      }
    };
    expect(auth.verified({ apiKey: key })).toBe(false);
    await auth.authenticate({ apiKey: key });
    expect(auth.verified({ apiKey: key })).toBe(true);
    // Past the cache's 30 s: still a key verified here (the next authentication reads it again).
    expect(later(10 * 60_000, () => auth.verified({ apiKey: key }))).toBe(true);
    expect(auth.verified({ apiKey: madeUpKey() })).toBe(false);
    await expect(auth.authenticate({ apiKey: madeUpKey() })).rejects.toThrow(/Invalid API key/);
    // A resync of the bus empties the key cache; a verified key stays verified (it is re-checked, not forgotten).
    await auth.resync();
    expect(auth.verified({ apiKey: key })).toBe(true);
    // Revoked (told here): no longer.
    await t.app.core.apiKeys.revoke(summary.id);
    await waitFor(() => auth.verified({ apiKey: key }), (v) => !v, { what: "the revoked key to be forgotten" });

    const jwt = await new SignJWT({ tenant_id: ws.workspaceId, sub: "ada" })
      .setProtectedHeader({ alg: "HS256" })
      .setExpirationTime("1h")
      .sign(new TextEncoder().encode(TEST_JWT_SECRET));
    const bearer = { authorization: `Bearer ${jwt}` };
    expect(auth.verified(bearer)).toBe(false);
    await auth.authenticate(bearer);
    expect(auth.verified(bearer)).toBe(true);
    expect(auth.verified({ authorization: `bearer ${jwt}` })).toBe(true);
    expect(later(59 * 60_000, () => auth.verified(bearer))).toBe(true);
    expect(later(61 * 60_000, () => auth.verified(bearer))).toBe(false);
    expect(auth.verified({ authorization: `Bearer ${jwt}x` })).toBe(false);
    expect(auth.verified({})).toBe(false);
  });
});

describe("TokenBuckets", () => {
  it("allows a burst of perMinute, then refills evenly, and says when to retry", () => {
    let now = 1_000_000;
    const buckets = new TokenBuckets(60, () => now);
    for (let i = 0; i < 60; i++) expect(buckets.take("k").ok).toBe(true);
    expect(buckets.take("k")).toEqual({ ok: false, retryAfterSeconds: 1 });
    now += 500;
    expect(buckets.take("k").ok).toBe(false);
    now += 500;
    expect(buckets.take("k").ok).toBe(true);
    expect(buckets.take("k").ok).toBe(false);
    // A long idle time refills to the burst size, not beyond.
    now += 3_600_000;
    for (let i = 0; i < 60; i++) expect(buckets.take("k").ok).toBe(true);
    expect(buckets.take("k").ok).toBe(false);
    expect(buckets.take("other").ok).toBe(true);
  });

  it("rounds Retry-After up to whole seconds", () => {
    let now = 0;
    const buckets = new TokenBuckets(2, () => now);
    buckets.take("k");
    buckets.take("k");
    expect(buckets.take("k")).toEqual({ ok: false, retryAfterSeconds: 30 });
    now += 29_001;
    expect(buckets.take("k")).toEqual({ ok: false, retryAfterSeconds: 1 });
  });

  it("forgets idle callers, so that many callers cannot grow memory without bound", () => {
    let now = 0;
    const buckets = new TokenBuckets(60, () => now);
    for (let i = 0; i < 10_000; i++) buckets.take(`caller-${i}`);
    expect(buckets.size).toBe(10_000);
    now += 60_000;
    buckets.take("newcomer");
    expect(buckets.size).toBe(1);
  });
});
