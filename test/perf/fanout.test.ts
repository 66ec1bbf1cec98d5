import { type ClientRequest, request } from "node:http";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { subscribeSse, subscribeWs, wsClient } from "../graphql/live.js";
import { countSql, QUIET_TIMERS } from "../graphql/sql-count.js";
import { createDeployment, restId } from "../graphql/support.js";
import type { BatchReads } from "../../src/core/batch-reads.js";
import { waitFor } from "../support/wait.js";

const REVISION_STATUS = /* GraphQL */ `subscription($id: ID!) { revisionStatusChanged(revisionId: $id) { status } }`;
// Reads the database for each message it sends (the revision's event log, through a loader).
const WITH_EVENTS = /* GraphQL */ `subscription($id: ID!) { revisionStatusChanged(revisionId: $id) { status revision { events { to } } } }`;

let t: TestApp;
let url: string;
let ws: NewWorkspace;

// No pipeline: the only change is the one each test makes.
beforeAll(async () => {
  t = await startTestApp({ PIPELINE_WORKER: "off", RATE_LIMIT_PER_MINUTE: "0" }, undefined, QUIET_TIMERS);
  url = await t.app.start();
  ws = await t.workspace();
});
afterAll(() => t.close());
// Each test counts feeds from zero: the previous test's feeds close once its clients are gone.
beforeEach(() => waitFor(() => t.app.core.watch.feedCount === 0, Boolean, { what: "earlier tests' feeds to close" }));

/** An SSE subscription over a real connection, resolved once its first result has arrived. */
function sseOverHttp(base: string, key: string, query: string, variables: Record<string, unknown>): Promise<ClientRequest> {
  return new Promise((resolve, reject) => {
    const req = request(`${base}/graphql`, {
      method: "POST",
      headers: { accept: "text/event-stream", "content-type": "application/json", "x-api-key": key },
    });
    req.on("response", (res) => {
      let seen = "";
      res.on("data", (chunk: Buffer) => {
        seen += chunk.toString("utf8");
        if (seen.includes("event: next")) resolve(req);
      });
    });
    req.on("error", reject);
    req.end(JSON.stringify({ query, variables }));
  });
}

const statuses = (messages: { data?: any }[]) => messages.map((m) => m.data?.revisionStatusChanged?.status);

/** Subscribes `n` times to one revision, interrupts it, and counts the SQL of the change and its delivery. */
async function statementsForOneChange(n: number, query = REVISION_STATUS): Promise<number> {
  const d = await createDeployment(t, ws.apiKey);
  const client = wsClient(url, ws.apiKey);
  try {
    const subs = Array.from({ length: n }, () => subscribeWs(client, query, { id: d.revisionId }));
    await waitFor(() => subs.every((s) => s.messages.length === 1), Boolean, { what: `${n} subscribers' current status` });
    const path = `/v2/deployments/${restId(d.id)}/revisions/${restId(d.revisionId)}`;
    expect((await t.request("GET", path, { key: ws.apiKey })).status).toBe(200); // the key is cached now
    const sql = countSql();
    try {
      expect((await t.request("POST", `${path}/interrupt`, { key: ws.apiKey })).status).toBe(200);
      await Promise.all(subs.map((s) => s.done));
      for (const s of subs) expect(statuses(s.messages)).toEqual(["CREATING", "INTERRUPTED"]);
      return sql.count;
    } finally {
      sql.restore();
    }
  } finally {
    await client.dispose();
  }
}

describe("subscribers of one revision share one feed", () => {
  it("a change costs the same SQL statements for 40 subscribers as for one", async () => {
    const one = await statementsForOneChange(1);
    const many = await statementsForOneChange(40);
    expect(one).toBeGreaterThan(0);
    expect(many).toBe(one);
  });

  it("subscribers asking the same of a change share its execution: fields that read the database read once", async () => {
    const one = await statementsForOneChange(1, WITH_EVENTS);
    const many = await statementsForOneChange(20, WITH_EVENTS);
    expect(many).toBe(one);
  });

  it("subscribers asking different things of the same change each get their own answer", async () => {
    const d = await createDeployment(t, ws.apiKey);
    const client = wsClient(url, ws.apiKey);
    try {
      const plain = subscribeWs(client, REVISION_STATUS, { id: d.revisionId });
      const detailed = subscribeWs(client, WITH_EVENTS, { id: d.revisionId });
      await waitFor(() => plain.messages.length === 1 && detailed.messages.length === 1, Boolean, { what: "both current statuses" });
      const path = `/v2/deployments/${restId(d.id)}/revisions/${restId(d.revisionId)}/interrupt`;
      expect((await t.request("POST", path, { key: ws.apiKey })).status).toBe(200);
      await Promise.all([plain.done, detailed.done]);
      expect(plain.messages.at(-1)).toEqual({ data: { revisionStatusChanged: { status: "INTERRUPTED" } } });
      expect(detailed.messages.at(-1)).toEqual({
        data: { revisionStatusChanged: { status: "INTERRUPTED", revision: { events: [{ to: "CREATING" }, { to: "INTERRUPTED" }] } } },
      });
    } finally {
      await client.dispose();
    }
  });

  it("a later subscriber starts from the current status; one leaving ends no other; the feed closes with the last", async () => {
    const before = t.app.core.watch.feedCount;
    const d = await createDeployment(t, ws.apiKey);
    const client = wsClient(url, ws.apiKey);
    try {
      const first = subscribeWs(client, REVISION_STATUS, { id: d.revisionId });
      await waitFor(() => first.messages.length === 1, Boolean, { what: "the first subscriber's current status" });
      expect(t.app.core.watch.feedCount).toBe(before + 1);
      const second = subscribeWs(client, REVISION_STATUS, { id: d.revisionId });
      await waitFor(() => second.messages.length === 1, Boolean, { what: "the second subscriber's current status" });
      expect(statuses(second.messages)).toEqual(["CREATING"]);
      expect(t.app.core.watch.feedCount).toBe(before + 1);

      // Another workspace finds nothing, even while the owner's feed is live.
      const intruder = await t.workspace();
      const other = wsClient(url, intruder.apiKey);
      try {
        const denied = subscribeWs(other, REVISION_STATUS, { id: d.revisionId });
        await denied.done;
        expect(denied.messages).toEqual([{ errors: [expect.objectContaining({ extensions: { code: "NOT_FOUND" } })] }]);
      } finally {
        await other.dispose();
      }

      first.dispose();
      const path = `/v2/deployments/${restId(d.id)}/revisions/${restId(d.revisionId)}/interrupt`;
      expect((await t.request("POST", path, { key: ws.apiKey })).status).toBe(200);
      await second.done;
      expect(statuses(second.messages)).toEqual(["CREATING", "INTERRUPTED"]);
      expect(statuses(first.messages)).toEqual(["CREATING"]);
      await waitFor(() => t.app.core.watch.feedCount === before, Boolean, { what: "the feed to close" });
    } finally {
      await client.dispose();
    }
  });

  it("closes the feed when every subscriber leaves before anything changes", async () => {
    const before = t.app.core.watch.feedCount;
    const d = await createDeployment(t, ws.apiKey);
    const client = wsClient(url, ws.apiKey);
    try {
      const subs = Array.from({ length: 5 }, () => subscribeWs(client, REVISION_STATUS, { id: d.revisionId }));
      await waitFor(() => subs.every((s) => s.messages.length === 1), Boolean, { what: "every current status" });
      expect(t.app.core.watch.feedCount).toBe(before + 1);
      for (const s of subs) s.dispose();
      await waitFor(() => t.app.core.watch.feedCount === before, Boolean, { what: "the feed to close" });
    } finally {
      await client.dispose();
    }
  });

  it("a feed whose read fails ends every subscriber's stream with a masked error; the next subscriber starts afresh", async () => {
    const d = await createDeployment(t, ws.apiKey);
    const revisionId = restId(d.revisionId);
    const graph = (t.app.core.watch as unknown as { batch: BatchReads }).batch;
    const client = wsClient(url, ws.apiKey);
    try {
      const subs = Array.from({ length: 3 }, () => subscribeWs(client, REVISION_STATUS, { id: d.revisionId }));
      await waitFor(() => subs.every((s) => s.messages.length === 1), Boolean, { what: "every current status" });
      const original = graph.eventsSince;
      graph.eventsSince = () => Promise.reject(new Error("connection to 10.0.0.7 refused: internal detail"));
      try {
        // Handlers are attached before the streams can fail: a rejection seen late counts as unhandled.
        const outcomes = subs.map((s) =>
          s.done.then(
            () => null,
            (e: unknown) => e as { message: string; extensions?: { code?: string } }[],
          ),
        );
        await t.app.deps.events.publish({ type: "revision.status", workspaceId: ws.workspaceId, deploymentId: restId(d.id), revisionId, status: "QUEUED" });
        for (const errors of await Promise.all(outcomes)) {
          expect(errors).toEqual([expect.objectContaining({ message: "Unexpected error.", extensions: expect.objectContaining({ code: "INTERNAL_SERVER_ERROR" }) })]);
        }
      } finally {
        graph.eventsSince = original;
      }
      const again = subscribeWs(client, REVISION_STATUS, { id: d.revisionId });
      await waitFor(() => again.messages.length === 1, Boolean, { what: "a new subscriber's current status" });
      expect(statuses(again.messages)).toEqual(["CREATING"]);
      again.dispose();
    } finally {
      await client.dispose();
    }
  });

  it("over SSE as well: one feed, one shared execution, and a stream that closes leaves the feed", async () => {
    const before = t.app.core.watch.feedCount;
    const d = await createDeployment(t, ws.apiKey);
    const streams = Array.from({ length: 3 }, () => subscribeSse(t, ws.apiKey, WITH_EVENTS, { id: d.revisionId }));
    await waitFor(() => streams.every((s) => s.messages.length === 1), Boolean, { what: "every current status over SSE" });
    expect(t.app.core.watch.feedCount).toBe(before + 1);
    const path = `/v2/deployments/${restId(d.id)}/revisions/${restId(d.revisionId)}/interrupt`;
    const sql = countSql();
    try {
      expect((await t.request("POST", path, { key: ws.apiKey })).status).toBe(200);
      await Promise.all(streams.map((s) => s.done));
    } finally {
      sql.restore();
    }
    for (const s of streams) {
      expect(s.messages.at(-1)).toEqual({
        data: { revisionStatusChanged: { status: "INTERRUPTED", revision: { events: [{ to: "CREATING" }, { to: "INTERRUPTED" }] } } },
      });
    }
    // The interrupt, the feed's read and one read of the log for all three streams: not three.
    expect(sql.count).toBe(await statementsForOneChange(1, WITH_EVENTS));
    await waitFor(() => t.app.core.watch.feedCount === before, Boolean, { what: "the feed to close" });

    // A client that goes away (its connection closes) leaves the feed.
    const other = await createDeployment(t, ws.apiKey);
    const leaving = await sseOverHttp(url, ws.apiKey, REVISION_STATUS, { id: other.revisionId });
    expect(t.app.core.watch.feedCount).toBe(before + 1);
    leaving.destroy();
    await waitFor(() => t.app.core.watch.feedCount === before, Boolean, { what: "the feed to close once the client left" });
  });
});
