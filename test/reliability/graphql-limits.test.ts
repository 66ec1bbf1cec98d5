import { request as httpRequest } from "node:http";
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it, onTestFinished, vi } from "vitest";
import { type TestApp, type TestResponse, startTestApp } from "../support/app.js";

/**
 * The limits that answer a request before its route (the caller's rate, an address's failed
 * authentications, the body size) answer a GraphQL request as GraphQL: `{"errors":[{message,
 * extensions:{code, retryAfter}}]}`, in the media type yoga answers its own errors in for that
 * Accept, with the status and Retry-After REST gets. REST keeps its `{detail}`, word for word.
 */

const QUERY = { query: "{ __typename }" };
const JSON_UTF8 = "application/json; charset=utf-8";
const GRAPHQL_RESPONSE_UTF8 = "application/graphql-response+json; charset=utf-8";
const REST_JSON = "application/json";

/** A GraphQL body of one error, with what a 429 says. */
const rateLimited = (message: string, retryAfter: string | null) => ({
  errors: [{ message, extensions: { code: "RATE_LIMITED", retryAfter: Number(retryAfter) } }],
});

/** The results of an event stream (SSE), in order. */
const streamed = (res: TestResponse) => [...res.text.matchAll(/^event: next\ndata: (.*)$/gm)].map((m) => JSON.parse(m[1]!) as unknown);

describe("past the caller's rate (RATE_LIMIT_PER_MINUTE), and past the body limit", () => {
  let t: TestApp;
  let url: string;
  beforeAll(async () => {
    t = await startTestApp({ RATE_LIMIT_PER_MINUTE: "2", AUTH_FAILURES_PER_MINUTE: "0", MAX_BODY_BYTES: "1024", PIPELINE_WORKER: "off" });
    url = await t.app.start();
  });
  afterAll(() => t.close());

  /**
   * A new workspace whose key this replica has verified, as its first request would have: its requests
   * draw on a bucket of their own (a key not verified yet counts against its address's).
   */
  async function verifiedWorkspace() {
    const ws = await t.workspace();
    await t.app.core.auth.authenticate({ apiKey: ws.apiKey });
    return ws;
  }

  /** A new key whose minute's two requests are spent. */
  async function spentKey(): Promise<string> {
    const ws = await verifiedWorkspace();
    for (let i = 0; i < 2; i++) expect((await t.request("GET", "/v2/listeners", { key: ws.apiKey })).status).toBe(200);
    return ws.apiKey;
  }

  const rateMessage = (retryAfter: string | null) => `Rate limit exceeded: 2 requests at once, then 2 a minute. Retry after ${retryAfter} s.`;

  it("POST /graphql: 429 with Retry-After and a RATE_LIMITED error carrying retryAfter, as application/json without an Accept", async () => {
    const key = await spentKey();
    const res = await t.request("POST", "/graphql", { key, body: QUERY });
    expect(res.status).toBe(429);
    const retryAfter = res.headers.get("retry-after");
    // 2 a minute: the next token is about 30 s away.
    expect(Number(retryAfter)).toBeGreaterThanOrEqual(28);
    expect(Number(retryAfter)).toBeLessThanOrEqual(30);
    expect(res.headers.get("content-type")).toBe(JSON_UTF8);
    expect(res.body).toEqual(rateLimited(rateMessage(retryAfter), retryAfter));
  });

  it("from a browser on another origin: with GraphQL's CORS headers, so that a dashboard can read the 429 and its Retry-After", async () => {
    const key = await spentKey();
    const origin = "https://dashboard.example";
    const res = await t.request("POST", "/graphql", { key, body: QUERY, headers: { origin } });
    expect(res.status).toBe(429);
    expect(res.headers.get("access-control-allow-origin")).toBe(origin);
    expect(res.headers.get("access-control-allow-credentials")).toBeNull();
    expect(res.headers.get("access-control-expose-headers")?.split(/,\s*/)).toEqual(expect.arrayContaining(["Retry-After", "X-Request-Id"]));
    // REST has no CORS: its clients are scripts and command-line tools.
    const rest = await t.request("GET", "/v2/listeners", { key, headers: { origin } });
    expect(rest.status).toBe(429);
    expect(rest.headers.get("access-control-allow-origin")).toBeNull();
  });

  it("GET /graphql and Accept: application/graphql-response+json: the same, in that media type", async () => {
    const key = await spentKey();
    const res = await t.request("GET", `/graphql?query=${encodeURIComponent("{ __typename }")}`, { key, headers: { accept: "application/graphql-response+json" } });
    expect(res.status).toBe(429);
    const retryAfter = res.headers.get("retry-after");
    expect(retryAfter).toMatch(/^[1-9]\d*$/);
    expect(res.headers.get("content-type")).toBe(GRAPHQL_RESPONSE_UTF8);
    expect(res.body).toEqual(rateLimited(rateMessage(retryAfter), retryAfter));
  });

  it("a subscription asked as an event stream (SSE): 429 with Retry-After, the error as the stream's one result, then complete", async () => {
    const key = await spentKey();
    const res = await t.request("POST", "/graphql", {
      key,
      body: { query: `subscription { revisionStatusChanged(revisionId: "${randomUUID()}") { status } }` },
      headers: { accept: "text/event-stream" },
    });
    expect(res.status).toBe(429);
    const retryAfter = res.headers.get("retry-after");
    expect(retryAfter).toMatch(/^[1-9]\d*$/);
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    expect(streamed(res)).toEqual([rateLimited(rateMessage(retryAfter), retryAfter)]);
    expect(res.text).toMatch(/event: complete\ndata:\n\n$/);
  });

  it("answers in the media type yoga answers its own refusals (401) in, for every Accept; keeps 429 where yoga would say 406", async () => {
    const key = await spentKey();
    // Made-up keys count against their address (rateLimitKey), 2 a minute here: yoga's own answers come
    // from an app without a rate limit.
    const unlimited = await startTestApp({ RATE_LIMIT_PER_MINUTE: "0", AUTH_FAILURES_PER_MINUTE: "0", PIPELINE_WORKER: "off" });
    onTestFinished(() => unlimited.close());
    const accepts = [
      undefined,
      "*/*",
      "application/json",
      "application/graphql-response+json",
      "application/graphql-response+json, application/json",
      "application/json, application/graphql-response+json;q=0.9",
      "application/*",
      "text/event-stream",
      "text/event-stream, application/json",
      "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
      "application/graphql-response+json; charset=latin1, application/json",
    ];
    for (const accept of accepts) {
      const headers: Record<string, string> = accept === undefined ? {} : { accept };
      // A made-up key: yoga answers it, 401.
      const yoga = await unlimited.request("POST", "/graphql", { key: `dcp_made-up-${randomUUID()}`, body: QUERY, headers });
      expect(yoga.status, accept).toBe(401);
      const limited = await t.request("POST", "/graphql", { key, body: QUERY, headers });
      expect(limited.status, accept).toBe(429);
      expect(limited.headers.get("content-type"), accept).toBe(yoga.headers.get("content-type"));
      const retryAfter = limited.headers.get("retry-after");
      const results = limited.headers.get("content-type")!.startsWith("text/event-stream") ? streamed(limited) : [limited.body];
      expect(results, accept).toEqual([rateLimited(rateMessage(retryAfter), retryAfter)]);
    }
    // Nothing it can say in that media type: yoga's own errors are 406; a refusal keeps its status, in JSON.
    const yoga = await unlimited.request("POST", "/graphql", { key: `dcp_made-up-${randomUUID()}`, body: QUERY, headers: { accept: "text/plain" } });
    expect(yoga.status).toBe(406);
    const limited = await t.request("POST", "/graphql", { key, body: QUERY, headers: { accept: "text/plain" } });
    expect(limited.status).toBe(429);
    expect(limited.headers.get("content-type")).toBe(JSON_UTF8);
    expect(limited.body).toEqual(rateLimited(rateMessage(limited.headers.get("retry-after")), limited.headers.get("retry-after")));
  });

  it("REST keeps its answer: 429 {detail} with Retry-After", async () => {
    const key = await spentKey();
    const res = await t.request("GET", "/v2/listeners", { key });
    expect(res.status).toBe(429);
    const retryAfter = res.headers.get("retry-after");
    expect(retryAfter).toMatch(/^[1-9]\d*$/);
    expect(res.headers.get("content-type")).toBe(REST_JSON);
    expect(res.body).toEqual({ detail: rateMessage(retryAfter) });
  });

  const tooLarge = { errors: [{ message: "Request body too large: the limit is 1024 bytes.", extensions: { code: "REQUEST_ENTITY_TOO_LARGE" } }] };

  it("a streamed body over the limit on /graphql: 413 with a REQUEST_ENTITY_TOO_LARGE error", async () => {
    const ws = await verifiedWorkspace();
    const res = await t.request("POST", "/graphql", {
      key: ws.apiKey,
      rawBody: JSON.stringify({ ...QUERY, variables: { pad: "x".repeat(2000) } }),
      headers: { "content-type": "application/json", accept: "application/graphql-response+json, application/json" },
    });
    expect(res.status).toBe(413);
    expect(res.headers.get("content-type")).toBe(GRAPHQL_RESPONSE_UTF8);
    expect(res.headers.get("retry-after")).toBeNull();
    expect(res.body).toEqual(tooLarge);
  });

  it("a declared Content-Length over the limit on /graphql, over a socket: the same, before the body is read", async () => {
    const ws = await verifiedWorkspace();
    const res = await new Promise<{ status: number; type: string | undefined; text: string }>((resolve, reject) => {
      const req = httpRequest(`${url}/graphql`, { method: "POST", headers: { "content-type": "application/json", "x-api-key": ws.apiKey } }, (r) => {
        let text = "";
        r.setEncoding("utf8");
        r.on("data", (d) => (text += d));
        r.on("end", () => resolve({ status: r.statusCode!, type: r.headers["content-type"], text }));
      });
      req.on("error", reject);
      req.end(JSON.stringify({ ...QUERY, variables: { pad: "x".repeat(5000) } }));
    });
    expect(res.status).toBe(413);
    expect(res.type).toBe(JSON_UTF8);
    expect(JSON.parse(res.text)).toEqual(tooLarge);
  });

  it("REST keeps its 413 {detail}", async () => {
    const ws = await verifiedWorkspace();
    const res = await t.request("POST", "/v2/listeners", { key: ws.apiKey, rawBody: JSON.stringify({ pad: "x".repeat(2000) }), headers: { "content-type": "application/json" } });
    expect(res.status).toBe(413);
    expect(res.headers.get("content-type")).toBe(REST_JSON);
    expect(res.body).toEqual({ detail: "Request body too large: the limit is 1024 bytes." });
  });
});

describe("past an address's failed authentications (AUTH_FAILURES_PER_MINUTE)", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ AUTH_FAILURES_PER_MINUTE: "2", RATE_LIMIT_PER_MINUTE: "0", PIPELINE_WORKER: "off" });
  });
  afterAll(() => t.close());

  const message = (retryAfter: string | null) => `Too many failed authentications from this address: 2 at once, then 2 a minute. Retry after ${retryAfter} s.`;

  it("/graphql answers 429 with Retry-After and a RATE_LIMITED error, unauthenticated; REST keeps its {detail}", async () => {
    // app.fetch has no socket: every request here comes from one address.
    expect((await t.request("GET", "/v2/listeners", { key: `dcp_made-up-${randomUUID()}` })).status).toBe(401);
    const refused = await t.request("POST", "/graphql", { key: `dcp_made-up-${randomUUID()}`, body: QUERY });
    expect(refused.status).toBe(401);
    expect(refused.body.errors[0].extensions.code).toBe("UNAUTHENTICATED");

    const authenticate = vi.spyOn(t.app.core.auth, "authenticate");
    try {
      const ws = await t.workspace();
      const graphql = await t.request("POST", "/graphql", { key: ws.apiKey, body: QUERY, headers: { accept: "application/graphql-response+json" } });
      expect(graphql.status).toBe(429);
      const retryAfter = graphql.headers.get("retry-after");
      // Two a minute: the next attempt is about 30 s away.
      expect(Number(retryAfter)).toBeGreaterThanOrEqual(28);
      expect(Number(retryAfter)).toBeLessThanOrEqual(30);
      expect(graphql.headers.get("content-type")).toBe(GRAPHQL_RESPONSE_UTF8);
      expect(graphql.body).toEqual(rateLimited(message(retryAfter), retryAfter));

      const rest = await t.request("GET", "/v2/listeners", { key: ws.apiKey });
      expect(rest.status).toBe(429);
      expect(rest.headers.get("content-type")).toBe(REST_JSON);
      expect(rest.body).toEqual({ detail: message(rest.headers.get("retry-after")) });
      expect(authenticate).not.toHaveBeenCalled();
    } finally {
      authenticate.mockRestore();
    }
  });
});
