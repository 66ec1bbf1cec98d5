import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isDatabaseUnavailable } from "../../src/core/prisma-errors.js";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { openDatabase } from "../../src/db/client.js";
import { createTestDatabase, type TestApp, type TestResponse, startTestApp } from "../support/app.js";
import { deploymentBody, listenerBody } from "../support/fixtures.js";
import { type StallingProxy, startStallingProxy } from "../support/stalling-proxy.js";
import { eventually, waitFor } from "../support/wait.js";

/**
 * PostgreSQL that stops answering without closing a socket (a network partition, a failover that
 * stalls): requests, /readyz and the pipeline worker must not wait for ever. Each answers 503 with
 * Retry-After within the database client's bounds, and everything recovers by itself once the path
 * is back. PostgreSQL only: PGlite runs in the process and has no network to lose.
 */

const adminUrl = process.env.TEST_DATABASE_URL;
/** Far beyond the bounds (src/db/client.ts), so that a loaded machine passes; a hang fails it. */
const ANSWER_DEADLINE_MS = 120_000;

describe.skipIf(!adminUrl)("a database that stops answering without closing its connections", () => {
  let proxy: StallingProxy;
  let t: TestApp;
  let ws: NewWorkspace;

  beforeAll(async () => {
    const database = await createTestDatabase();
    if (!("url" in database)) throw new Error("expected PostgreSQL");
    proxy = await startStallingProxy(database.url);
    // One caller's burst far above any rate limit: off, so that only the stall shows.
    t = await startTestApp({ RATE_LIMIT_PER_MINUTE: "0" }, { url: proxy.url });
    ws = await t.workspace();
  });
  afterAll(async () => {
    proxy?.resume();
    await t?.close();
    await proxy?.close();
  });

  /** The answer, or a failure naming `what` once the deadline passes: a hang must fail, not time the suite out. */
  async function answered(what: string, request: Promise<TestResponse>): Promise<TestResponse & { ms: number }> {
    const started = Date.now();
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ANSWER_DEADLINE_MS} ms of the stall`)), ANSWER_DEADLINE_MS);
    });
    try {
      const res = await Promise.race([request, deadline]);
      return { ...res, ms: Date.now() - started };
    } finally {
      clearTimeout(timer);
    }
  }

  it("answers 503 with Retry-After (REST, GraphQL, /readyz) instead of hanging, and recovers once the path is back", { timeout: 300_000 }, async () => {
    expect((await t.request("GET", "/v2/listeners", { key: ws.apiKey })).status).toBe(200);
    expect((await t.request("GET", "/readyz")).status).toBe(200);

    // Every open connection and every new one: accepted, never answered.
    expect(proxy.stall({ newConnections: true })).toBeGreaterThan(0);
    const [list, create, graphql, ready] = await Promise.all([
      answered("GET /v2/listeners", t.request("GET", "/v2/listeners", { key: ws.apiKey })),
      answered("POST /v2/deployments", t.request("POST", "/v2/deployments", { key: ws.apiKey, body: deploymentBody() })),
      answered("POST /graphql", t.request("POST", "/graphql", { key: ws.apiKey, body: { query: "{ deployments(first: 5) { totalCount } }" } })),
      answered("GET /readyz", t.request("GET", "/readyz")),
    ]);
    for (const res of [list, create]) {
      expect(res.status, res.text).toBe(503);
      // Accepted, never answered: it did not answer in time.
      expect(res.body).toEqual({ detail: "The database did not answer in time; retry shortly." });
      expect(res.headers.get("retry-after")).toMatch(/^\d+$/);
    }
    expect(graphql.status, graphql.text).toBe(503);
    expect(graphql.headers.get("retry-after")).toMatch(/^\d+$/);
    expect(graphql.body.errors).toEqual([expect.objectContaining({ extensions: expect.objectContaining({ code: "SERVICE_UNAVAILABLE" }) })]);
    expect(ready.status).toBe(503);
    expect(ready.body).toEqual({ status: "database unreachable" });
    // Nothing answered at error level: a stalled database is an outage, not a bug.
    expect(t.guard.logLines.map((line) => JSON.parse(line) as { level: number; msg: string }).filter((l) => l.level >= 50)).toEqual([]);

    // The path is back: the pool has let go of what it lost, and answers again by itself.
    proxy.resume();
    await eventually(async () => expect((await t.request("GET", "/readyz")).body).toEqual({ status: "ready" }), { timeoutMs: ANSWER_DEADLINE_MS });
    await eventually(async () => expect((await t.request("GET", "/v2/listeners", { key: ws.apiKey })).status).toBe(200), { timeoutMs: ANSWER_DEADLINE_MS });
    const listener = await t.request("POST", "/v2/listeners", { key: ws.apiKey, body: listenerBody({ compute_id: "after-the-stall" }) });
    expect(listener.status, listener.text).toBe(201);
    // The pipeline worker did not hang either: a new deployment's revision runs to DEPLOYED.
    const created = await t.request("POST", "/v2/deployments", { key: ws.apiKey, body: deploymentBody() });
    expect(created.status, created.text).toBe(201);
    const path = `/v2/deployments/${created.body.id}/revisions/${created.body.latest_revision_id}`;
    await eventually(async () => expect((await t.request("GET", path, { key: ws.apiKey })).body.status).toBe("DEPLOYED"), { timeoutMs: ANSWER_DEADLINE_MS });
  });
});

describe.skipIf(!adminUrl)("a pooled connection whose statement went unanswered", () => {
  it("is dropped when its transaction gives it back, not handed to the next statement", { timeout: 120_000 }, async () => {
    const database = await createTestDatabase();
    if (!("url" in database)) throw new Error("expected PostgreSQL");
    const proxy = await startStallingProxy(database.url);
    // One connection: were the stalled one kept, the next statement would get it and wait in vain.
    const db = await openDatabase({ kind: "postgres", url: proxy.url }, { poolSize: 1, queryTimeoutMs: 2_000 });
    try {
      await db.prisma.$queryRaw`SELECT 1`;
      const failed = await db.prisma
        .$transaction(async (tx) => {
          await tx.$queryRaw`SELECT 1`;
          // That connection's path goes dead; a new one's still works.
          expect(proxy.stall()).toBe(1);
          await tx.$queryRaw`SELECT 2`;
        })
        .then(
          () => null,
          (err: unknown) => err,
        );
      expect(isDatabaseUnavailable(failed), String(failed)).toBe(true);
      expect(await db.sql.query("SELECT 3 AS n")).toEqual([{ n: 3 }]);
      expect(await db.prisma.$queryRaw`SELECT 4 AS n`).toEqual([{ n: 4 }]);
      // Its socket was closed, not left open.
      await waitFor(() => proxy.connections().filter((c) => c.stalled).length, (n) => n === 0, { what: "the stalled connection closed" });
    } finally {
      await db.close();
      await proxy.close();
    }
  });
});
