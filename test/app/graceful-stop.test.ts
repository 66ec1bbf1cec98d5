import { type IncomingMessage, request } from "node:http";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, describe, expect, it, vi } from "vitest";
import type { Database } from "../../src/db/client.js";
import { STEP_HANDED_ON } from "../../src/pipeline/worker.js";
import { onThisRunsBackend, startTestApp, THIS_RUNS_BACKEND } from "../support/app.js";
import { type ServerProcess, spawnServer } from "../support/server-process.js";
import { holdNextCreation } from "../support/transaction-hold.js";
import { waitFor } from "../support/wait.js";
import { endOf, type Received, subscribeSse, subscribeWs, wsClient } from "../graphql/live.js";
import { globalId } from "../graphql/support.js";

/**
 * A graceful stop (SIGTERM) with an SSE subscription open: the stream ends cleanly (its `complete`
 * event), the process exits 0, and the pipeline step it had in flight is handed back (its lease
 * released, no crash counted), as README says of a graceful stop. An SSE answer streams until its
 * subscription ends, and the HTTP server's close waits for every answer: the stop used to hang there
 * for ever, before the worker stopped, so that the draining replica kept its steps and claimed more.
 * And the worker stops first: while requests in flight drain, the replica holds no step.
 */

const API_KEY = "graceful-stop-api-key-00000000000";
const SETTINGS = {
  BOOTSTRAP_API_KEY: API_KEY,
  SECRETS_KEY: Buffer.alloc(32, 6).toString("base64"),
  // Every step outlasts the test: the first one is in flight, its lease held, when SIGTERM comes.
  PIPELINE_STEP_MS: "600000",
  RATE_LIMIT_PER_MINUTE: "0",
  LOG_LEVEL: "info",
};
/** Far more than a stop takes on a loaded machine, far less than for ever. */
const STOP_WITHIN_MS = 60_000;

const DEPLOYMENT_STATUS = /* GraphQL */ `subscription($id: ID!) { deploymentStatusChanged(deploymentId: $id) { status } }`;
const BUILD_LOG = /* GraphQL */ `subscription($id: ID!) { revisionLogAppended(revisionId: $id, kind: BUILD) { message } }`;

const servers = new Set<ServerProcess>();
afterAll(async () => {
  for (const server of servers) await server.kill("SIGKILL");
});

async function graphql<T>(server: ServerProcess, query: string, variables: Record<string, unknown> = {}): Promise<T> {
  const res = await fetch(`${server.url}/graphql`, {
    method: "POST",
    headers: { "x-api-key": API_KEY, "content-type": "application/json", accept: "application/graphql-response+json" },
    body: JSON.stringify({ query, variables }),
  });
  const body = (await res.json()) as { data?: T; errors?: unknown };
  if (res.status !== 200 || body.errors || !body.data) throw new Error(`GraphQL failed (${res.status}): ${JSON.stringify(body.errors)}\n${server.logTail()}`);
  return body.data;
}

/** An SSE subscription over a real connection: what it received, and whether its answer ended (cleanly or not). */
function sse(server: ServerProcess, query: string, variables: Record<string, unknown>) {
  const state = { text: "", ended: false, aborted: false };
  const req = request(`${server.url}/graphql`, {
    method: "POST",
    headers: { accept: "text/event-stream", "content-type": "application/json", "x-api-key": API_KEY },
  });
  req.on("response", (res: IncomingMessage) => {
    res.setEncoding("utf8");
    res.on("data", (chunk: string) => (state.text += chunk));
    res.on("end", () => (state.ended = true));
    res.on("aborted", () => (state.aborted = true));
  });
  req.on("error", () => (state.aborted = true));
  req.end(JSON.stringify({ query, variables }));
  return state;
}

async function scenario(env: Record<string, string>, open: () => Promise<Database>) {
  const server = await spawnServer({ ...SETTINGS, ...env });
  servers.add(server);
  void server.exited.then(() => servers.delete(server));

  const created = await graphql<{ deploymentCreate: { deployment: { id: string; latestRevision: { id: string } } } }>(
    server,
    `mutation($input: DeploymentCreateInput!) { deploymentCreate(input: $input) { deployment { id latestRevision { id } } } }`,
    { input: { name: "draining", source: "INTERNAL_CONTAINER", sourceRevisionConfig: { imageUri: "registry.example/agent:1" } } },
  );
  const { id, latestRevision } = created.deploymentCreate.deployment;
  // The revision's first step is under way: its own first line is written (after the status line its
  // creation wrote), as the step runs, its lease held.
  await waitFor(
    () => graphql<{ node: { buildLogs: { edges: { node: { message: string } }[] } } }>(server, `query($id: ID!) { node(id: $id) { ... on Revision { buildLogs(first: 5) { edges { node { message } } } } } }`, { id: latestRevision.id }),
    (data) => data.node.buildLogs.edges.some((e) => e.node.message.startsWith("Creating revision ")),
    { what: "the revision's first step to start" },
  );
  const stream = sse(server, DEPLOYMENT_STATUS, { id });
  await waitFor(() => stream.text, (text) => text.includes("event: next"), { what: "the subscription's current status" });
  const log = sse(server, BUILD_LOG, { id: latestRevision.id });
  await waitFor(() => log.text, (text) => text.includes("Creating revision "), { what: "the live log's lines so far" });
  const wsLog = subscribeWs(wsClient(server.url, API_KEY), BUILD_LOG, { id: latestRevision.id });
  wsLog.done.catch(() => {}); // it ends with its socket's close, looked at below
  const wsMessages = () => wsLog.messages.map((m) => (m.data as { revisionLogAppended: { message: string } } | undefined)?.revisionLogAppended.message);
  await waitFor(wsMessages, (messages) => messages.some((m) => m?.startsWith("Creating revision ")), { what: "the live log's lines so far, over graphql-ws" });

  // A deadline, not a synchronisation: the exit is awaited; past the deadline the stop counts as hung.
  const deadline = new AbortController();
  const code = await Promise.race([
    server.kill("SIGTERM"),
    sleep(STOP_WITHIN_MS, `still running ${STOP_WITHIN_MS} ms after SIGTERM`, { signal: deadline.signal }),
  ]).finally(() => deadline.abort());
  expect(code, server.logTail()).toBe(0);
  // Ended by the server as a subscription that completed, not cut off.
  expect(stream.text).toMatch(/event: complete\n/);
  expect(stream).toMatchObject({ ended: true, aborted: false });
  // The live log tells its subscribers why it stops before it ends: the line the stop wrote, then complete.
  expect(log).toMatchObject({ ended: true, aborted: false });
  expect(log.text).toContain(JSON.stringify(STEP_HANDED_ON).slice(1, -1));
  expect(log.text).toMatch(/event: complete\n/);
  // Over graphql-ws too, before its socket closes (going away: the client may subscribe again elsewhere).
  expect(wsMessages()).toContain(STEP_HANDED_ON);
  expect(await endOf(wsLog.done, "the graphql-ws subscription to end")).toMatchObject({ code: 1001 });

  const db = await open();
  try {
    const held = await db.sql.query<{ lease_owner: string | null; step_crashes: number }>(`SELECT lease_owner, step_crashes FROM revisions`);
    expect(held).toEqual([{ lease_owner: null, step_crashes: 0 }]);
    // Its log says where the step was cut short: the next server runs it again from its start.
    const [last] = await db.sql.query<{ message: string }>(`SELECT message FROM revision_logs WHERE kind = 'build' ORDER BY id DESC LIMIT 1`);
    expect(last).toEqual({ message: STEP_HANDED_ON });
  } finally {
    await db.close();
  }
}

describe("SIGTERM with an SSE subscription open", () => {
  it(`on ${THIS_RUNS_BACKEND}: ends the stream, hands the step back and exits 0`, () => onThisRunsBackend("dcp-stop-", scenario), 180_000);
});

// Past waitFor's deadline (30 s), so that a failure says what it waited for.
describe("stop() while a request is in flight", { timeout: 60_000 }, () => {
  it("hands the pipeline's steps back before it waits for the request, then lets it finish", async () => {
    const t = await startTestApp({ PIPELINE_STEP_MS: "600000", RATE_LIMIT_PER_MINUTE: "0" });
    const url = await t.app.start();
    const ws = await t.workspace();
    const leased = () => t.app.db.sql.query<{ n: number }>(`SELECT count(*)::int AS n FROM revisions WHERE lease_owner IS NOT NULL`).then(([row]) => row!.n);
    const first = await t.request("POST", "/v2/deployments", { key: ws.apiKey, body: { name: "in-flight", source: "internal_container" } });
    expect(first.status).toBe(201);
    await waitFor(leased, (n) => n === 1, { what: "the revision's first step to be claimed" });

    // A creation held in flight over a real connection: the server's close waits for its answer.
    const hold = holdNextCreation(t);
    try {
      const answer = fetch(`${url}/v2/deployments`, {
        method: "POST",
        headers: { "x-api-key": ws.apiKey, "content-type": "application/json" },
        body: JSON.stringify({ name: "answered-while-stopping", source: "internal_container" }),
      });
      await waitFor(() => hold.arrived, Boolean, { what: "the request to be in flight" });
      let stopped = false;
      const stopping = t.close().then(() => (stopped = true));
      // The step is handed back while the request is still held (the database still open for it).
      await waitFor(leased, (n) => n === 0, { what: "the worker's lease to be released before the drain" });
      expect(stopped).toBe(false);
      hold.release();
      expect((await answer).status).toBe(201);
      await stopping;
    } finally {
      hold.restore();
    }
  });
});

describe("stop() with the log of a step in flight subscribed", { timeout: 60_000 }, () => {
  // The stop writes, in the step's log, that the step stopped there; the log's feed would learn of it
  // from the bus. Here no event is delivered after the stop begins (a NOTIFY arriving late, or lost):
  // the feed reads once more anyway before the streams end.
  it("sends the line that says where the step stopped to SSE and graphql-ws subscribers before it ends their streams", async () => {
    const t = await startTestApp({ PIPELINE_STEP_MS: "600000", RATE_LIMIT_PER_MINUTE: "0" });
    const url = await t.app.start();
    const ws = await t.workspace();
    const created = await t.request("POST", "/v2/deployments", { key: ws.apiKey, body: { name: "live-log", source: "internal_container" } });
    expect(created.status).toBe(201);
    const revisionId = (created.body as { latest_revision_id: string }).latest_revision_id;
    const id = globalId("Revision", revisionId);
    const messagesOf = (received: Received[]) => received.map((m) => (m.data as { revisionLogAppended: { message: string } } | undefined)?.revisionLogAppended.message);
    const started = (messages: (string | undefined)[]) => messages.some((m) => m?.startsWith("Creating revision "));

    const sseLog = subscribeSse(t, ws.apiKey, BUILD_LOG, { id });
    const wsLog = subscribeWs(wsClient(url, ws.apiKey), BUILD_LOG, { id });
    wsLog.done.catch(() => {}); // it ends with its socket's close
    await waitFor(() => messagesOf(sseLog.messages), started, { what: "the step's first line, over SSE" });
    await waitFor(() => messagesOf(wsLog.messages), started, { what: "the step's first line, over graphql-ws" });

    vi.spyOn(t.app.deps.events, "publish").mockResolvedValue(undefined);
    await t.close();
    expect(messagesOf(sseLog.messages)).toContain(STEP_HANDED_ON);
    expect(messagesOf(wsLog.messages)).toContain(STEP_HANDED_ON);
  });
});
