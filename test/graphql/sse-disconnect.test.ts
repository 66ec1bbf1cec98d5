import { type IncomingMessage, request, type ServerResponse } from "node:http";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { Watcher } from "../../src/core/watch.js";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { holdNextCreation } from "../support/transaction-hold.js";
import { waitFor } from "../support/wait.js";
import { createDeployment, DEPLOYMENT_CREATE, gqlOk } from "./support.js";

// A client that goes away while its request is in flight, over a real connection: an SSE subscription
// whose stream had not opened yet must leave nothing behind (no feed re-reading its object for ever),
// and a query or mutation still runs to its end, its answer discarded, without an error logged.

const DEPLOYMENT_STATUS = /* GraphQL */ `subscription($id: ID!) { deploymentStatusChanged(deploymentId: $id) { status } }`;
const DEPLOYMENT_REVISIONS = /* GraphQL */ `subscription($id: ID!) { deploymentRevisionsChanged(deploymentId: $id) { kind } }`;
const REVISION_STATUS = /* GraphQL */ `subscription($id: ID!) { revisionStatusChanged(revisionId: $id) { status } }`;

let t: TestApp;
let url: string;
let ws: NewWorkspace;

beforeAll(async () => {
  t = await startTestApp({ PIPELINE_WORKER: "off", RATE_LIMIT_PER_MINUTE: "0" });
  url = await t.app.start();
  ws = await t.workspace();
});
afterAll(() => t.close());

/** The bus as the feeds see it (the local one behind PostgreSQL's LISTEN/NOTIFY). */
const bus = () => {
  const events = t.app.deps.events as unknown as { local?: { topicCount: number; resyncHandlerCount: number }; topicCount: number; resyncHandlerCount: number };
  return events.local ?? events;
};
const sseOpen = async () =>
  (await t.app.metrics.registry.getSingleMetricAsString("dcp_graphql_subscriptions_open")).match(/transport="sse"} (\d+)/)?.[1] ?? "0";
/** What live subscriptions hold: feeds, their bus subscriptions and resync handlers, and SSE streams counted open. */
const held = async () => ({ feeds: t.app.core.watch.feedCount, topics: bus().topicCount, resyncHandlers: bus().resyncHandlerCount, sseOpen: await sseOpen() });

/**
 * Holds the next call of a Watcher method (a subscription's start) until release(): `arrived` once it
 * is called (the request authenticated, parsed and executing), `joined` once, released, it has joined
 * its feed (the subscriber's place in it is taken).
 */
function holdNext(method: "deploymentStatus" | "deploymentRevisions" | "revisionStatus") {
  const watch = t.app.core.watch;
  const original = (watch[method] as (...args: unknown[]) => unknown).bind(watch);
  let arrived = false;
  let joined = false;
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  const spy = vi.spyOn(watch as Watcher, method).mockImplementationOnce((async (...args: unknown[]) => {
    arrived = true;
    await released;
    const stream = await original(...args);
    joined = true;
    return stream;
  }) as never);
  return { arrived: () => arrived, joined: () => joined, release, restore: () => spy.mockRestore() };
}

/**
 * POSTs an operation to /graphql over a real connection. disconnect() closes it and resolves once the
 * server has seen it closed (its response's close event, after @hono/node-server's own listener, which
 * aborts the request): what follows happens with the client certainly gone.
 */
function post(body: unknown, accept: string) {
  const server = t.app.server!;
  let response: ServerResponse | null = null;
  const onRequest = (_req: IncomingMessage, res: ServerResponse) => {
    response = res;
    server.off("request", onRequest);
  };
  server.on("request", onRequest);
  const req = request(`${url}/graphql`, { method: "POST", headers: { accept, "content-type": "application/json", "x-api-key": ws.apiKey } });
  let answered = false;
  req.on("response", () => (answered = true));
  req.on("error", () => undefined);
  req.end(JSON.stringify(body));
  return {
    answered: () => answered,
    /** Closes the connection, and resolves once the server has seen it closed. */
    async disconnect() {
      const res = await waitFor(() => response, Boolean, { what: "the server to receive the request" });
      const closed = new Promise<void>((resolve) => (res!.destroyed ? resolve() : res!.once("close", () => resolve())));
      req.destroy();
      await closed;
    },
  };
}

// Past waitFor's deadline (30 s), so that a leak fails with what was left, not with the test's timeout.
describe("an SSE client that disconnects while its subscription is starting", { timeout: 60_000 }, () => {
  const cases = [
    { field: "deploymentStatusChanged", query: DEPLOYMENT_STATUS, method: "deploymentStatus", of: "deployment" },
    { field: "deploymentRevisionsChanged", query: DEPLOYMENT_REVISIONS, method: "deploymentRevisions", of: "deployment" },
    { field: "revisionStatusChanged", query: REVISION_STATUS, method: "revisionStatus", of: "revision" },
  ] as const;

  it.each(cases)("leaves no feed, bus subscription or open stream behind ($field)", async ({ query, method, of }) => {
    const before = await held();
    const d = await createDeployment(t, ws.apiKey);
    // The subscription's first read waits until the client has gone: the window is certain.
    const hold = holdNext(method);
    // @hono/node-server reports a failed answer on the console.
    const consoleError = vi.spyOn(console, "error");
    try {
      const client = post({ query, variables: { id: of === "deployment" ? d.id : d.revisionId } }, "text/event-stream");
      await waitFor(hold.arrived, Boolean, { what: "the subscription's start" });
      await client.disconnect();
      expect(client.answered()).toBe(false);
      // Its feed opens now, for a client that has gone: it must close again.
      hold.release();
      await waitFor(hold.joined, Boolean, { what: "the subscription to join its feed" });
      await waitFor(held, (now) => JSON.stringify(now) === JSON.stringify(before), { what: `the ${method} feed to close after the client left` });
      expect(consoleError).not.toHaveBeenCalled();
    } finally {
      hold.restore();
      consoleError.mockRestore();
    }
  });
});

describe("a query or mutation whose client disconnects in flight", () => {
  it("runs to its end, its answer discarded, and logs no error", async () => {
    const d = await createDeployment(t, ws.apiKey);
    const lines = t.guard.logLines.length;
    // A mutation in flight when its client goes: it is applied all the same (nothing cancels it half-way).
    const hold = holdNextCreation(t);
    const name = `gone-${d.uuid.slice(0, 8)}`;
    const consoleError = vi.spyOn(console, "error");
    try {
      const client = post(
        { query: DEPLOYMENT_CREATE, variables: { input: { name, source: "INTERNAL_CONTAINER", sourceRevisionConfig: { imageUri: "registry.example/agent:1" } } } },
        "application/graphql-response+json",
      );
      await waitFor(() => hold.arrived, Boolean, { what: "the mutation to run" });
      await client.disconnect();
      hold.release();
      await waitFor(() => t.app.db.prisma.deployment.count({ where: { name } }), (n) => n === 1, { what: "the mutation to be applied" });
      const access = await waitFor(
        () => t.guard.logLines.slice(lines).map((l) => JSON.parse(l) as { level: number; msg: string; status?: number; route?: string }),
        (logged) => logged.some((l) => l.msg === "request" && l.route === "/graphql"),
        { what: "the mutation's access line" },
      );
      // Answered as it would have been; nothing logged at error level (an unhandled error, say).
      expect(access.find((l) => l.msg === "request" && l.route === "/graphql")).toMatchObject({ status: 200 });
      expect(access.filter((l) => l.level >= 50)).toEqual([]);
      expect(consoleError).not.toHaveBeenCalled();
    } finally {
      hold.restore();
      consoleError.mockRestore();
    }
    // The service answers as before.
    expect(await gqlOk(t, ws.apiKey, `{ viewer { uuid } }`)).toEqual({ viewer: { uuid: ws.workspaceId } });
  });
});
