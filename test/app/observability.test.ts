import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { loadConfig } from "../../src/config.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { subscribeSse, subscribeWs, wsClient } from "../graphql/live.js";
import { waitFor } from "../support/wait.js";
import { createDeployment, gqlOk } from "../graphql/support.js";

let t: TestApp;
let url: string;
let ws: NewWorkspace;

beforeAll(async () => {
  t = await startTestApp({ PIPELINE_STEP_MS: "10", RATE_LIMIT_PER_MINUTE: "0" });
  url = await t.app.start();
  ws = await t.workspace();
});
afterAll(() => t.close());

const scrape = async () => {
  const res = await fetch(t.app.metricsUrl!);
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toMatch(/^text\/plain/);
  return res.text();
};

/** The value of one sample (`name{labels} value`), every label given matching; 0 when absent. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number {
  for (const line of text.split("\n")) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (!Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) continue;
    return Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return 0;
}

async function eventually(check: () => Promise<boolean>, what: string, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const accessLines = () =>
  t.guard.logLines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.component === "http" && l.msg === "request");

describe("metrics", () => {
  it("are served on METRICS_PORT, not on the API's port", async () => {
    expect(t.app.metricsUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
    expect(new URL(t.app.metricsUrl!).port).not.toBe(new URL(url).port);
    expect((await fetch(`${url}/metrics`)).status).toBe(404);
    expect((await fetch(t.app.metricsUrl!.replace("/metrics", "/other"))).status).toBe(404);
  });

  it("count HTTP requests by route pattern, method and status, with a duration histogram", async () => {
    const before = await scrape();
    const labels = { route: "/v2/deployments/:deployment_id", method: "GET", status: "404" };
    const res = await fetch(`${url}/v2/deployments/00000000-0000-4000-8000-000000000000`, { headers: { "x-api-key": ws.apiKey } });
    expect(res.status).toBe(404);
    const after = await scrape();
    expect(sample(after, "dcp_http_requests_total", labels)).toBe(sample(before, "dcp_http_requests_total", labels) + 1);
    expect(sample(after, "dcp_http_request_duration_seconds_count", labels)).toBeGreaterThanOrEqual(1);
    // Never the URL itself: one series per route, whatever the id.
    expect(after).not.toContain("00000000-0000-4000-8000-000000000000");
  });

  it("count GraphQL operations by name, type and outcome, open subscriptions by transport, revisions by status and step durations", async () => {
    await gqlOk(t, ws.apiKey, "query Viewer { deployments(first: 1) { totalCount } }");
    const d = await createDeployment(t, ws.apiKey);
    const client = wsClient(url, ws.apiKey);
    const query = "subscription Watch($id: ID!) { revisionStatusChanged(revisionId: $id) { status } }";
    try {
      const overWs = subscribeWs(client, query, { id: d.revisionId });
      const overSse = subscribeSse(t, ws.apiKey, query, { id: d.revisionId });
      await overWs.done;
      await overSse.done;
      // The worker records a step's duration after its transition commits, and a subscription is
      // counted closed after its stream ends: both may come a moment after the subscribers are done.
      const text = await waitFor(
        scrape,
        (s) =>
          sample(s, "dcp_pipeline_step_duration_seconds_count", { status: "DEPLOYING", outcome: "ok" }) >= 1 &&
          sample(s, "dcp_graphql_subscriptions_open", { transport: "websocket" }) === 0 &&
          sample(s, "dcp_graphql_subscriptions_open", { transport: "sse" }) === 0,
        { what: "the DEPLOYING step's duration recorded and both subscriptions counted closed" },
      );
      expect(sample(text, "dcp_graphql_operations_total", { operation: "Viewer", type: "query", outcome: "ok" })).toBeGreaterThanOrEqual(1);
      expect(sample(text, "dcp_graphql_operations_total", { operation: "Watch", type: "subscription", outcome: "ok" })).toBeGreaterThanOrEqual(2);
      expect(sample(text, "dcp_revisions_entered_status_total", { status: "DEPLOYED" })).toBeGreaterThanOrEqual(1);
      expect(sample(text, "dcp_revisions_entered_status_total", { status: "BUILDING" })).toBeGreaterThanOrEqual(1);
      expect(sample(text, "dcp_pipeline_step_duration_seconds_count", { status: "DEPLOYING", outcome: "ok" })).toBeGreaterThanOrEqual(1);
      expect(sample(text, "dcp_db_pool_connections", { state: "total" })).toBeGreaterThanOrEqual(1);
      expect(text).toContain("# TYPE dcp_event_bus_lag_seconds histogram");
      // Both completed: none open.
      expect(sample(text, "dcp_graphql_subscriptions_open", { transport: "websocket" })).toBe(0);
      expect(sample(text, "dcp_graphql_subscriptions_open", { transport: "sse" })).toBe(0);
    } finally {
      await client.dispose();
    }
  });

  it("count subscriptions open while they are open, per transport", async () => {
    await t.app.worker!.stop();
    const d = await createDeployment(t, ws.apiKey);
    const client = wsClient(url, ws.apiKey);
    const query = "subscription($id: ID!) { revisionStatusChanged(revisionId: $id) { status } }";
    try {
      const overWs = subscribeWs(client, query, { id: d.revisionId });
      // Over the real port, as a browser would: closing the connection is what ends it.
      const abort = new AbortController();
      const sse = await fetch(`${url}/graphql`, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "text/event-stream", "x-api-key": ws.apiKey },
        body: JSON.stringify({ query, variables: { id: d.revisionId } }),
        signal: abort.signal,
      });
      expect(sse.headers.get("content-type")).toMatch(/^text\/event-stream/);
      const reader = sse.body!.pipeThrough(new TextDecoderStream()).getReader();
      let received = "";
      while (!received.includes("CREATING")) received += (await reader.read()).value ?? "";
      await waitFor(() => overWs.messages.length === 1, Boolean, { what: "the graphql-ws subscription's first message" });
      const text = await scrape();
      expect(sample(text, "dcp_graphql_subscriptions_open", { transport: "websocket" })).toBe(1);
      expect(sample(text, "dcp_graphql_subscriptions_open", { transport: "sse" })).toBe(1);
      overWs.dispose();
      abort.abort();
      await reader.cancel().catch(() => {});
      await eventually(async () => {
        const now = await scrape();
        return sample(now, "dcp_graphql_subscriptions_open", { transport: "websocket" }) === 0 && sample(now, "dcp_graphql_subscriptions_open", { transport: "sse" }) === 0;
      }, "both subscriptions counted closed");
    } finally {
      await client.dispose();
      t.app.worker!.start();
    }
  });

  it("METRICS_PORT takes a port, 0 for any free one, or off", () => {
    expect(loadConfig({}).metricsPort).toBe(9464);
    expect(loadConfig({ METRICS_PORT: "0" }).metricsPort).toBe(0);
    expect(loadConfig({ METRICS_PORT: "off" }).metricsPort).toBeNull();
    expect(() => loadConfig({ METRICS_PORT: "metrics" })).toThrow(/METRICS_PORT/);
  });
});

describe("access log", () => {
  it("writes one JSON line per request with the route pattern, status, duration, request id, workspace and key id, never the key", async () => {
    const given = "trace-abc.123";
    const res = await t.request("GET", "/v2/deployments?limit=1", { key: ws.apiKey, headers: { "x-request-id": given } });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-request-id")).toBe(given);
    const line = accessLines().find((l) => l.request_id === given);
    const keyId = (await t.app.db.prisma.apiKey.findFirstOrThrow({ where: { workspaceId: ws.workspaceId } })).id;
    expect(line).toMatchObject({ level: 30, method: "GET", route: "/v2/deployments", status: 200, workspace_id: ws.workspaceId, key_id: keyId });
    expect(typeof line!.duration_ms).toBe("number");
    expect(JSON.stringify(t.guard.logLines)).not.toContain(ws.apiKey);
  });

  it("makes a request id when none (or a malformed one) is given, and returns it", async () => {
    const none = await t.request("GET", "/healthz");
    expect(none.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    const bad = await t.request("GET", "/healthz", { headers: { "x-request-id": `x${"y".repeat(300)}` } });
    expect(bad.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    const spaces = await t.request("GET", "/healthz", { headers: { "x-request-id": "a b" } });
    expect(spaces.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    expect(accessLines().some((l) => l.request_id === none.headers.get("x-request-id") && l.route === "/healthz")).toBe(true);
  });

  it("names a GraphQL operation and its caller", async () => {
    const res = await t.request("POST", "/graphql", { key: ws.apiKey, body: { query: "query Named { deployments(first: 1) { totalCount } }" }, headers: { "x-request-id": "gql-1" } });
    expect(res.status).toBe(200);
    expect(accessLines().find((l) => l.request_id === "gql-1")).toMatchObject({ route: "/graphql", operation_name: "Named", workspace_id: ws.workspaceId, status: 200 });
  });

  it("never logs the query string of an upload or OAuth callback", async () => {
    await t.request("PUT", "/uploads/00000000-0000-4000-8000-000000000000/source.tar.gz?expires=1&signature=sig-SECRET-VALUE", { rawBody: "x", headers: { "x-request-id": "up-1" } });
    await t.request("GET", "/v2/auth/callback/github?code=code-SECRET-VALUE&state=state-SECRET-VALUE", { headers: { "x-request-id": "cb-1" } });
    const lines = accessLines().filter((l) => l.request_id === "up-1" || l.request_id === "cb-1");
    expect(lines.map((l) => l.route)).toEqual(["/uploads/:deployment_id/:file", "/v2/auth/callback/:provider_id"]);
    expect(t.guard.logLines.join("\n")).not.toContain("SECRET-VALUE");
  });

  it("logs a client's mistake (a subscription to an unknown revision) below error level, without a stack", async () => {
    const from = t.guard.logLines.length;
    const unknown = Buffer.from("Revision:00000000-0000-4000-8000-000000000000").toString("base64");
    const client = wsClient(url, ws.apiKey);
    try {
      const sub = subscribeWs(client, "subscription($id: ID!) { revisionStatusChanged(revisionId: $id) { status } }", { id: unknown });
      await sub.done.catch(() => {});
      const sse = subscribeSse(t, ws.apiKey, "subscription($id: ID!) { revisionStatusChanged(revisionId: $id) { status } }", { id: unknown });
      await sse.done;
      const errorsShown = [...sub.messages, ...sse.messages].flatMap((m) => m.errors ?? []);
      expect(errorsShown.length).toBeGreaterThanOrEqual(1);
    } finally {
      await client.dispose();
    }
    const lines = t.guard.logLines.slice(from).map((l) => JSON.parse(l) as { level: number; err?: unknown; msg: string });
    expect(lines.filter((l) => l.level >= 50)).toEqual([]);
    expect(lines.filter((l) => l.err)).toEqual([]);
  });
});
