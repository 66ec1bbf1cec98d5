import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { created, deploymentBody } from "../support/fixtures.js";

/**
 * GraphQL's answers as a listening server sends them: a whole answer goes as bytes with its length
 * (built piece by piece for long lists, src/graphql/answer-bytes.ts), in the media type, status and
 * headers yoga chose for it; a stream (SSE) still streams.
 */

let t: TestApp;
let ws: NewWorkspace;
let url: string;

const PAGE = "query Page($first: Int!) { deployments(first: $first) { edges { node { uuid name status } } pageInfo { hasNextPage } } }";

beforeAll(async () => {
  t = await startTestApp({ PIPELINE_WORKER: "off", RATE_LIMIT_PER_MINUTE: "0" });
  url = await t.app.start();
  ws = await t.workspace();
  // More deployments than the length from which a list is written in runs of elements.
  for (let i = 0; i < 20; i++) await created(t, ws.apiKey, "/v2/deployments", deploymentBody({ name: `page-${String(i).padStart(2, "0")}-é🚀` }));
});
afterAll(() => t.close());

const UNSUPPORTED_TYPE = "A GraphQL request over POST is sent as application/json (or application/graphql+json, application/graphql with the document alone, or a form: application/x-www-form-urlencoded).";

const post = (body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${url}/graphql`, { method: "POST", headers: { "x-api-key": ws.apiKey, "content-type": "application/json", ...headers }, body: JSON.stringify(body) });

describe("a whole answer over HTTP", () => {
  it("is the page's JSON with its length in bytes, in the media type asked for", async () => {
    for (const [accept, type] of [
      ["application/graphql-response+json", "application/graphql-response+json; charset=utf-8"],
      ["application/json", "application/json; charset=utf-8"],
    ]) {
      const res = await post({ query: PAGE, variables: { first: 20 } }, { accept: accept! });
      const bytes = Buffer.from(await res.arrayBuffer());
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toBe(type);
      expect(res.headers.get("content-length")).toBe(String(bytes.length));
      expect(res.headers.get("transfer-encoding")).toBeNull();
      const { data } = JSON.parse(bytes.toString("utf8"));
      expect(data.deployments.edges).toHaveLength(20);
      expect(data.deployments.edges.map((e: { node: { name: string } }) => e.node.name)).toContain("page-07-é🚀");
    }
  });

  it("reads a POST body of every type GraphQL takes, in UTF-8, and refuses one that is not UTF-8 with 400", async () => {
    const query = `{ deployments(first: 1) { edges { node { name } } } }`;
    const bodies: [string, string][] = [
      ["application/json", JSON.stringify({ query })],
      ["application/json; charset=utf-8", JSON.stringify({ query })],
      ["application/graphql+json", JSON.stringify({ query })],
      ["application/graphql", query],
      ["application/x-www-form-urlencoded", new URLSearchParams({ query }).toString()],
    ];
    for (const [type, body] of bodies) {
      const headers = { "x-api-key": ws.apiKey, "content-type": type, accept: "application/graphql-response+json" };
      const res = await fetch(`${url}/graphql`, { method: "POST", headers, body });
      expect(res.status, type).toBe(200);
      expect((await res.json()).data.deployments.edges[0].node.name, type).toMatch(/^page-\d\d-é🚀$/);
      // The same body with a byte that is not UTF-8 in a string (Latin-1's é).
      const bad = Buffer.from(body.replace("deployments", "d\u00e9ployments"), "latin1");
      const refused = await fetch(`${url}/graphql`, { method: "POST", headers, body: bad });
      expect(refused.status, type).toBe(400);
      expect(await refused.json(), type).toEqual({ errors: [{ message: "The body is not valid UTF-8.", extensions: { code: "BAD_REQUEST" } }] });
    }
  });

  it("answers a POST whose body is of no type GraphQL reads with 415 and a GraphQL error saying which it reads", async () => {
    for (const type of ["text/plain", "application/xml", "multipart/form-data; boundary=x"]) {
      const res = await fetch(`${url}/graphql`, {
        method: "POST",
        headers: { "x-api-key": ws.apiKey, "content-type": type, accept: "application/graphql-response+json" },
        body: JSON.stringify({ query: "{ viewer { __typename } }" }),
      });
      expect(res.status, type).toBe(415);
      expect(await res.json(), type).toEqual({ errors: [{ message: UNSUPPORTED_TYPE, extensions: { code: "BAD_REQUEST" } }] });
    }
  });

  it("answers another method with 405, the methods allowed, and a GraphQL error, changing nothing", async () => {
    for (const method of ["PUT", "PATCH", "DELETE"]) {
      const res = await fetch(`${url}/graphql`, {
        method,
        headers: { "x-api-key": ws.apiKey, "content-type": "application/json", accept: "application/graphql-response+json" },
        body: JSON.stringify({ query: `mutation { deploymentDelete(id: "x") { __typename } }` }),
      });
      expect(res.status, method).toBe(405);
      expect(res.headers.get("allow")).toBe("GET, POST");
      expect(await res.json()).toEqual({ errors: [{ message: `GraphQL is served over GET and POST, not ${method}.`, extensions: { code: "METHOD_NOT_ALLOWED" } }] });
    }
  });

  it("keeps an error's status and its shape", async () => {
    const res = await post({ query: "query { deployments(first: 1) { nope } }" }, { accept: "application/graphql-response+json" });
    const text = await res.text();
    expect(res.status).toBe(400);
    expect(res.headers.get("content-length")).toBe(String(Buffer.byteLength(text)));
    expect(JSON.parse(text).errors[0].extensions.code).toBe("GRAPHQL_VALIDATION_FAILED");
  });

  it("while a query asked for as an event stream still streams", async () => {
    const res = await post({ query: PAGE, variables: { first: 20 } }, { accept: "text/event-stream" });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const text = await res.text();
    const next = text.split("\n").find((line) => line.startsWith("data: {"));
    expect(JSON.parse(next!.slice("data: ".length)).data.deployments.edges).toHaveLength(20);
  });
});

describe("from a browser on another origin (CORS)", () => {
  it("lets a dashboard elsewhere call with its key, shares no credentials, and lets it read Retry-After and X-Request-Id", async () => {
    const origin = "https://dashboard.example";
    const preflight = await fetch(`${url}/graphql`, {
      method: "OPTIONS",
      headers: { origin, "access-control-request-method": "POST", "access-control-request-headers": "x-api-key,content-type" },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get("access-control-allow-origin")).toBe(origin);
    // Credentials here are headers (X-Api-Key, Authorization), never cookies: a browser has none to send along.
    expect(preflight.headers.get("access-control-allow-credentials")).toBeNull();
    const res = await post({ query: "{ __typename }" }, { origin });
    expect(res.status).toBe(200);
    expect(res.headers.get("access-control-allow-origin")).toBe(origin);
    expect(res.headers.get("access-control-allow-credentials")).toBeNull();
    expect(res.headers.get("access-control-expose-headers")?.split(/,\s*/)).toEqual(expect.arrayContaining(["Retry-After", "X-Request-Id"]));
  });
});
