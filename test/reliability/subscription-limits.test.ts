import { type ClientRequest, request } from "node:http";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { endOf, subscribeSse, subscribeWs, wsClient } from "../graphql/live.js";
import { createDeployment } from "../graphql/support.js";
import { waitFor } from "../support/wait.js";

/**
 * SUBSCRIPTIONS_PER_CALLER: how many live subscriptions one caller may hold open on a replica, over
 * graphql-ws and SSE together. Each open one holds memory and a feed's place; the rate limit bounds
 * how fast a caller opens them, not how many it keeps.
 */

const REVISION_STATUS = /* GraphQL */ `subscription($id: ID!) { revisionStatusChanged(revisionId: $id) { status } }`;
const LOG = /* GraphQL */ `subscription($id: ID!) { revisionLogAppended(revisionId: $id, kind: BUILD, tail: 0) { message } }`;
const FLOW = /* GraphQL */ `subscription($id: ID!) { oauthFlowStatusChanged(flowId: $id) { status } }`;
const TOO_MANY = expect.objectContaining({ message: "At most 3 live subscriptions per caller are open on this server; end one first.", extensions: expect.objectContaining({ code: "TOO_MANY_SUBSCRIPTIONS" }) });

let t: TestApp;
let url: string;
let ws: NewWorkspace;
/** The revision's global id, and its REST ids. */
let revisionId: string;
let rest: { deploymentId: string; revisionId: string };

beforeAll(async () => {
  t = await startTestApp({ SUBSCRIPTIONS_PER_CALLER: "3", RATE_LIMIT_PER_MINUTE: "0", PIPELINE_WORKER: "off" });
  url = await t.app.start();
  ws = await t.workspace();
  // With the pipeline off its revision stays CREATING: subscriptions to it stay open.
  const d = await createDeployment(t, ws.apiKey);
  revisionId = d.revisionId;
  rest = { deploymentId: d.uuid, revisionId: Buffer.from(d.revisionId, "base64").toString().split(":")[1]! };
});
afterAll(() => t.close());

/** An SSE subscription over a real connection, resolved once its first result has arrived. */
function sseOverHttp(key: string, query: string, variables: Record<string, unknown>): Promise<{ req: ClientRequest; status: number }> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}/graphql`, { method: "POST", headers: { accept: "text/event-stream", "content-type": "application/json", "x-api-key": key } });
    req.on("response", (res) => {
      let seen = "";
      res.on("data", (chunk: Buffer) => {
        seen += chunk.toString("utf8");
        if (seen.includes("event: next")) resolve({ req, status: res.statusCode! });
      });
      res.on("error", () => undefined);
    });
    req.on("error", reject);
    req.end(JSON.stringify({ query, variables }));
  });
}

/** yoga's SSE keep-alive ping: every 12 s (every 300 ms where NODE_ENV is test, as vitest sets it). */
const SSE_PING_MS = 12_000;

describe("SUBSCRIPTIONS_PER_CALLER", () => {
  it("refuses a caller's subscription past the limit, over graphql-ws and SSE together; an ended one frees its place", async () => {
    const client = wsClient(url, ws.apiKey);
    try {
      const open = [subscribeWs(client, REVISION_STATUS, { id: revisionId }), subscribeWs(client, LOG, { id: revisionId })];
      await waitFor(() => open[0]!.messages.length, (n) => n === 1, { what: "the first subscription's status" });
      const sse = subscribeSse(t, ws.apiKey, REVISION_STATUS, { id: revisionId });
      await waitFor(() => sse.messages.length, (n) => n === 1, { what: "the SSE subscription's status" });

      // A fourth, whatever its transport or field: refused, and nothing else ends.
      const overWs = subscribeWs(client, REVISION_STATUS, { id: revisionId });
      expect(await endOf(overWs.done, "the fourth subscription's refusal")).toBe("completed");
      expect(overWs.messages).toEqual([{ errors: [TOO_MANY] }]);
      const overSse = subscribeSse(t, ws.apiKey, LOG, { id: revisionId });
      await overSse.done;
      expect(overSse.status()).toBe(429);
      expect(overSse.messages).toEqual([{ errors: [TOO_MANY] }]);

      // Another caller (a second key of the same workspace) has places of its own.
      const other = await t.app.core.apiKeys.create({ workspaceId: ws.workspaceId, name: "other" });
      const theirs = subscribeSse(t, other.key, REVISION_STATUS, { id: revisionId });
      await waitFor(() => theirs.messages.length, (n) => n === 1, { what: "another caller's subscription" });
      theirs.close();

      // One ended by its client (graphql-ws complete): its place is free again.
      open[0]!.dispose();
      await waitFor(
        async () => {
          const retry = subscribeWs(client, REVISION_STATUS, { id: revisionId });
          const [answer] = await waitFor(() => retry.messages, (m) => m.length === 1, { what: "an answer" });
          if (!answer!.errors) open.push(retry);
          return !answer!.errors;
        },
        Boolean,
        { what: "a place freed by the ended subscription" },
      );

      // And those that end by themselves (the revision's final status) free theirs.
      const interrupted = await t.request("POST", `/v2/deployments/${rest.deploymentId}/revisions/${rest.revisionId}/interrupt`, { key: ws.apiKey });
      expect(interrupted.status).toBe(200);
      await Promise.all([...open.slice(1).map((s) => s.done), sse.done]);
      const after = [1, 2, 3].map(() => subscribeSse(t, ws.apiKey, REVISION_STATUS, { id: revisionId }));
      await Promise.all(after.map((s) => s.done));
      expect(after.map((s) => s.messages.map((m) => m.errors?.[0]?.extensions?.code ?? m.data?.revisionStatusChanged?.status))).toEqual([
        ["INTERRUPTED"],
        ["INTERRUPTED"],
        ["INTERRUPTED"],
      ]);
    } finally {
      await client.dispose();
    }
  });

  it("refuses an OAuth flow subscription past the limit too, before the flow is looked up", async () => {
    // Three open subscriptions, then one to a flow that does not exist: the quota answers first.
    const d = await createDeployment(t, ws.apiKey);
    const open = [1, 2, 3].map(() => subscribeSse(t, ws.apiKey, REVISION_STATUS, { id: d.revisionId }));
    try {
      await waitFor(() => open.every((s) => s.messages.length === 1), Boolean, { what: "three open subscriptions" });
      const flow = subscribeSse(t, ws.apiKey, FLOW, { id: Buffer.from("OAuthFlow:00000000-0000-4000-8000-000000000001").toString("base64") });
      await flow.done;
      expect(flow.messages).toEqual([{ errors: [TOO_MANY] }]);
    } finally {
      for (const s of open) s.close();
    }
  });

  it("frees an SSE subscriber's place as soon as its client disconnects, not at its stream's next keep-alive ping", async () => {
    // The ping as in production (yoga reads NODE_ENV as each SSE answer starts), and then never: its
    // interval is stretched to an hour, so that a place freed only when a ping is written is never
    // freed here, however slow the machine, and one freed at once is, within waitFor's deadline.
    const nodeEnv = process.env.NODE_ENV;
    process.env.NODE_ENV = "development";
    const setInterval = globalThis.setInterval;
    const pings = vi
      .spyOn(globalThis, "setInterval")
      .mockImplementation(((handler: () => void, ms?: number) => setInterval(handler, ms === SSE_PING_MS ? 3_600_000 : ms)) as typeof globalThis.setInterval);
    const d = await createDeployment(t, ws.apiKey);
    // A caller of its own: its places are all free.
    const { key } = await t.app.core.apiKeys.create({ workspaceId: ws.workspaceId, name: "disconnecting" });
    let clients: { req: ClientRequest; status: number }[] = [];
    try {
      clients = await Promise.all([1, 2, 3].map(() => sseOverHttp(key, REVISION_STATUS, { id: d.revisionId })));
      expect(clients.map((c) => c.status)).toEqual([200, 200, 200]);
      expect(pings.mock.calls.filter(([, ms]) => ms === SSE_PING_MS)).toHaveLength(3);
      const full = subscribeSse(t, key, REVISION_STATUS, { id: d.revisionId });
      await full.done;
      expect(full.status()).toBe(429);

      for (const client of clients) client.req.destroy();
      const retries: ReturnType<typeof subscribeSse>[] = [];
      await waitFor(
        async () => {
          const retry = subscribeSse(t, key, REVISION_STATUS, { id: d.revisionId });
          retries.push(retry);
          await waitFor(() => retry.messages.length, (n) => n === 1, { what: "an answer" });
          return retry.status();
        },
        (status) => status === 200,
        { what: "a place freed by a client that disconnected, with no keep-alive ping written" },
      );
      for (const retry of retries) retry.close();
    } finally {
      process.env.NODE_ENV = nodeEnv;
      pings.mockRestore();
      for (const client of clients) client.req.destroy();
    }
  });

  it("holds no place for a subscription asked for with an Accept no stream answers: 406 saying why, and nothing left open", async () => {
    const caller = await t.app.core.apiKeys.create({ workspaceId: ws.workspaceId, name: "accept" });
    // A revision of its own, still CREATING (the pipeline is off): its subscriptions stay open.
    const { revisionId } = await createDeployment(t, ws.apiKey);
    const body = JSON.stringify({ query: REVISION_STATUS, variables: { id: revisionId } });
    for (const accept of ["application/json", "application/graphql-response+json", "multipart/mixed"]) {
      for (let i = 0; i < 4; i++) {
        const res = await t.app.fetch(new Request("http://test/graphql", { method: "POST", headers: { accept, "content-type": "application/json", "x-api-key": caller.key }, body }));
        expect(res.status, accept).toBe(406);
        expect(await res.json(), accept).toEqual({
          errors: [expect.objectContaining({ message: expect.stringMatching(/text\/event-stream.*graphql-ws/), extensions: expect.objectContaining({ code: "NOT_ACCEPTABLE" }) })],
        });
      }
    }
    // Its three places are all free.
    const open = [0, 1, 2].map(() => subscribeSse(t, caller.key, REVISION_STATUS, { id: revisionId }));
    try {
      for (const sub of open) await waitFor(() => sub.messages.length, (n) => n === 1, { what: "a subscription within the caller's places" });
      expect(open.map((sub) => sub.messages[0])).toEqual(open.map(() => ({ data: { revisionStatusChanged: { status: "CREATING" } } })));
    } finally {
      for (const sub of open) sub.close();
    }
  });
});
