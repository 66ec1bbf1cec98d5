import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { Authenticator, REVOKED_KEY_MESSAGE, type Tenant } from "../../src/core/auth.js";
import { BatchReads } from "../../src/core/batch-reads.js";
import { applyTransition } from "../../src/core/transitions.js";
import { Watcher } from "../../src/core/watch.js";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { MemoryEventBus } from "../../src/events/memory.js";
import { LISTENER_APPLICATION_NAME, PostgresEventBus } from "../../src/events/postgres.js";
import { type DomainEvent, topics } from "../../src/events/types.js";
import { adminQuery } from "../support/global-setup.js";
import { createTestDatabase, startTestApp, type TestApp } from "../support/app.js";
import { tenantOf } from "../support/fixtures.js";
import { addProvider, OAUTH_ENV, pathOf, TOKEN_ANSWERS } from "../support/oauth.js";
import { type OAuthServer, startOAuthServer } from "../support/oauth-server.js";
import { waitFor } from "../support/wait.js";
import { endOf, subscribeSse, subscribeWs, wsClient } from "../graphql/live.js";
import { countSql, QUIET_TIMERS } from "../graphql/sql-count.js";
import { globalId } from "../graphql/support.js";
import { createDeployment, createRevision, MANAGED_LOG } from "../pipeline/support.js";

/** The statuses of a managed revision's run, from CREATING to DEPLOYED. */
const FULL_RUN = MANAGED_LOG.map((s) => s.split(">")[1]!);

/** Everything an iterator yields, as it comes, and whether it has ended. */
function collect<T>(iterator: AsyncIterableIterator<T>) {
  const seen: T[] = [];
  const state = { seen, ended: false, stop: () => void iterator.return?.() };
  void (async () => {
    for await (const value of iterator) seen.push(value);
    state.ended = true;
  })();
  return state;
}

/** Advances the revision, through `deps`' core, to DEPLOYED (its deployment becomes READY). */
async function deploy(t: TestApp, revisionId: string): Promise<void> {
  for (let i = 1; i < MANAGED_LOG.length; i++) await applyTransition(t.app.deps, { revisionId, event: "advance" });
}

describe("Authenticator, over a database of the test's making", () => {
  const key = { id: "k1", organizationId: "o1", workspaceId: "w1", revokedAt: null as Date | null };

  it("reads a key again when its revocation is told during the lookup: nothing read before it is let through or cached", async () => {
    const bus = new MemoryEventBus();
    const row = { ...key };
    let reads = 0;
    let release!: () => void;
    const prisma = {
      apiKey: {
        findUnique: async () => {
          if (++reads === 1) await new Promise<void>((resolve) => (release = resolve));
          return { ...row };
        },
      },
    };
    const auth = new Authenticator(prisma as never, {}, bus);
    const lookup = auth.authenticate({ apiKey: "dcp_in-flight" });
    await waitFor(() => reads, (n) => n === 1, { what: "the lookup in flight" });
    // Revoked and told while the first read is on its way back with the key as it was.
    row.revokedAt = new Date();
    await bus.publish({ type: "api_key.revoked", workspaceId: "w1", keyId: "k1" });
    release();
    await expect(lookup).rejects.toThrow(REVOKED_KEY_MESSAGE);
    expect(reads).toBe(2);
  });

  it("re-checks the keys it let through when the bus resyncs, trying again when the read fails", async () => {
    const bus = new MemoryEventBus();
    const revokedAt = new Date();
    let checks = 0;
    const prisma = {
      apiKey: {
        findUnique: async () => ({ ...key }),
        findMany: async ({ where }: { where: { id: { in: string[] } } }) => {
          if (++checks === 1) throw new Error("the database is still coming back");
          expect(where.id.in).toEqual(["k1"]);
          return [{ id: "k1", revokedAt }];
        },
      },
    };
    const auth = new Authenticator(prisma as never, {}, bus);
    const told: string[] = [];
    auth.onKeyRevoked((id) => told.push(id));
    await auth.authenticate({ apiKey: "dcp_admitted" });
    bus.resync();
    await waitFor(() => told, (ids) => ids.length > 0, { what: "the revocation found on the second try" });
    expect(told).toEqual(["k1"]);
    expect(checks).toBe(2);
    // Nothing more to check: it is no longer among the keys let through.
    await auth.resync();
    expect(checks).toBe(2);
  });
});

// Every replica's case in one process: a bus of the test's own that the app never publishes on is a
// bus that lost every notification. Its re-check is ten minutes away: what catches up is the resync.
describe("what the event bus feeds catches up when the bus resyncs, with no re-check", () => {
  let t: TestApp;
  let ws: NewWorkspace;
  let tenant: Tenant;

  beforeAll(async () => {
    t = await startTestApp({ PIPELINE_WORKER: "off" }, undefined, QUIET_TIMERS);
    ws = await t.workspace();
    tenant = await tenantOf(t, ws.apiKey);
  });
  afterAll(() => t?.close());

  const isolated = () => {
    const bus = new MemoryEventBus();
    return { bus, watch: new Watcher({ ...t.app.deps, events: bus }, { recheckMs: 600_000 }) };
  };

  it("every feed steps at once and reads what it missed: deployment status, its revisions, a revision's status and log", async () => {
    const { bus, watch } = isolated();
    const { deployment, revision } = await createDeployment(t, ws.apiKey);
    const status = collect(await watch.deploymentStatus(tenant, deployment.id));
    const revisions = collect(await watch.deploymentRevisions(tenant, deployment.id));
    const revisionStatus = collect(await watch.revisionStatus(tenant, revision.id));
    const log = collect(await watch.revisionLogs(tenant, revision.id, "deploy", 0));
    await waitFor(() => status.seen.length === 1 && revisionStatus.seen.length === 1, Boolean, { what: "the current statuses" });

    // Made while nothing is told: the first revision deployed (its deployment READY), then a second one.
    await deploy(t, revision.id);
    const second = await createRevision(t, ws.apiKey, deployment.id);
    bus.resync();

    await waitFor(() => status.seen.map((c) => c.status), (s) => s.length === 2, { what: "the deployment's READY" });
    expect(status.seen.map((c) => c.status)).toEqual(["AWAITING_DATABASE", "READY"]);
    expect(status.seen[1]!.deployment).toMatchObject({ status: "READY", activeRevisionId: revision.id });

    await waitFor(() => revisionStatus.ended && log.ended, Boolean, { what: "the revision's status and log feeds to end" });
    expect(revisionStatus.seen.map((c) => c.status)).toEqual(FULL_RUN);
    expect(log.seen.at(-1)?.message).toMatch(/^\[DEPLOYED\]/);

    // Every change since the subscriber came, in order: the first revision's statuses, then the second's creation.
    const expected = [...FULL_RUN.slice(1).map(() => ["status", revision.id]), ["created", second.id], ["status", second.id]];
    await waitFor(() => revisions.seen.length, (n) => n === expected.length, { what: "the deployment's revisions' changes" });
    expect(revisions.seen.map((c) => [c.kind, c.revision.id])).toEqual(expected);
    // Each change shows the status it made, though they were all read at once.
    expect(revisions.seen.map((c) => c.revision.status)).toEqual([...FULL_RUN.slice(1), "CREATING", "CREATING"]);
    expect(revisions.seen.every((c) => c.deployment.id === deployment.id)).toBe(true);

    status.stop();
    revisions.stop();
    await waitFor(() => watch.feedCount, (n) => n === 0, { what: "the feeds to close" });
    expect(bus.resyncHandlerCount).toBe(0);
  });

  it("a deployment's status feed whose read meets a lost database keeps what the bus told it, and shows it once it reads", async () => {
    const { bus, watch } = isolated();
    const { deployment } = await createDeployment(t, ws.apiKey);
    const status = collect(await watch.deploymentStatus(tenant, deployment.id));
    await waitFor(() => status.seen.length, (n) => n === 1, { what: "the current status" });
    const lost = Object.assign(new Error("Connection terminated unexpectedly"), { code: "ECONNRESET" });
    const read = vi.spyOn(BatchReads.prototype, "deploymentsByIds").mockRejectedValueOnce(lost);
    try {
      // Told of a status the row no longer has by the time the feed reads it again.
      await bus.publish({ type: "deployment.status", workspaceId: ws.workspaceId, deploymentId: deployment.id, status: "READY" });
      await waitFor(() => status.seen.map((c) => c.status), (s) => s.length === 3, { what: "READY, then the status read" });
    } finally {
      read.mockRestore();
    }
    expect(status.seen.map((c) => c.status)).toEqual(["AWAITING_DATABASE", "READY", "AWAITING_DATABASE"]);
    expect(status.ended).toBe(false);
    status.stop();
  });

  it("a feed that is told the same change later sends it once", async () => {
    const { bus, watch } = isolated();
    const { deployment, revision } = await createDeployment(t, ws.apiKey);
    const status = collect(await watch.deploymentStatus(tenant, deployment.id));
    const revisions = collect(await watch.deploymentRevisions(tenant, deployment.id));
    await waitFor(() => status.seen.length, (n) => n === 1, { what: "the current status" });
    await deploy(t, revision.id);
    bus.resync();
    await waitFor(() => status.seen.length === 2 && revisions.seen.length === FULL_RUN.length - 1, Boolean, { what: "what the resync read" });
    // Their notifications, late: already read.
    await bus.publish({ type: "deployment.status", workspaceId: ws.workspaceId, deploymentId: deployment.id, status: "READY" });
    await bus.publish({ type: "revision.status", workspaceId: ws.workspaceId, deploymentId: deployment.id, revisionId: revision.id, status: "DEPLOYED" });
    // A change after them shows that they were stepped.
    const second = await createRevision(t, ws.apiKey, deployment.id);
    await bus.publish({ type: "revision.status", workspaceId: ws.workspaceId, deploymentId: deployment.id, revisionId: second.id, status: "CREATING" });
    await waitFor(() => revisions.seen.length, (n) => n === FULL_RUN.length + 1, { what: "the second revision" });
    expect(revisions.seen.slice(-2).map((c) => [c.kind, c.revision.id])).toEqual([
      ["created", second.id],
      ["status", second.id],
    ]);
    expect(status.seen.map((c) => c.status)).toEqual(["AWAITING_DATABASE", "READY"]);
    status.stop();
    revisions.stop();
  });

  it("a change costs each deployment feed the statements it did before: one for its status, two for its revisions", async () => {
    const { bus, watch } = isolated();
    const { deployment, revision } = await createDeployment(t, ws.apiKey);
    const ids = { workspaceId: ws.workspaceId, deploymentId: deployment.id };

    const revisions = collect(await watch.deploymentRevisions(tenant, deployment.id));
    const second = await createRevision(t, ws.apiKey, deployment.id);
    let sql = countSql();
    try {
      await bus.publish({ type: "revision.status", ...ids, revisionId: second.id, status: "CREATING" });
      await waitFor(() => revisions.seen.length, (n) => n >= 3, { what: "the new revision and the one it superseded" });
      // The deployment, and the log entries since the last seen with their revisions.
      expect(sql.count).toBe(2);
    } finally {
      sql.restore();
    }
    expect(revisions.seen.map((c) => [c.kind, c.revision.id, c.revision.status])).toEqual([
      ["created", second.id, "CREATING"],
      ["status", second.id, "CREATING"],
      ["status", revision.id, "SKIPPED"],
    ]);
    revisions.stop();

    const status = collect(await watch.deploymentStatus(tenant, deployment.id));
    await waitFor(() => status.seen.length, (n) => n === 1, { what: "the current status" });
    await deploy(t, second.id);
    sql = countSql();
    try {
      await bus.publish({ type: "deployment.status", ...ids, status: "READY" });
      await waitFor(() => status.seen.length, (n) => n === 2, { what: "READY" });
      expect(sql.count).toBe(1);
    } finally {
      sql.restore();
    }
    status.stop();
  });

  it("the authenticator drops its cached keys and tells its handlers of those revoked meanwhile, once", async () => {
    const bus = new MemoryEventBus();
    const auth = new Authenticator(t.app.db.prisma, {}, bus);
    const revoked = await t.app.core.apiKeys.create({ workspaceId: ws.workspaceId, name: "revoked unheard" });
    const kept = await t.app.core.apiKeys.create({ workspaceId: ws.workspaceId, name: "kept" });
    const told: string[] = [];
    auth.onKeyRevoked((keyId) => told.push(keyId));
    await auth.authenticate({ apiKey: revoked.key });
    await auth.authenticate({ apiKey: kept.key });

    // Revoked where this authenticator hears nothing of it: its cache still lets the key through.
    await t.app.core.apiKeys.revoke(revoked.summary.id);
    await expect(auth.authenticate({ apiKey: revoked.key })).resolves.toMatchObject({ workspaceId: ws.workspaceId });
    bus.resync();
    await waitFor(() => told, (ids) => ids.length > 0, { what: "the revocation, told after the resync" });
    expect(told).toEqual([revoked.summary.id]);
    await expect(auth.authenticate({ apiKey: revoked.key })).rejects.toThrow(REVOKED_KEY_MESSAGE);
    await expect(auth.authenticate({ apiKey: kept.key })).resolves.toMatchObject({ workspaceId: ws.workspaceId });
    // Told once: a later resync finds nothing new.
    await auth.resync();
    expect(told).toEqual([revoked.summary.id]);
  });
});

// The loss itself, between two replicas: B's listening session is cut, and B reconnects only once A
// has made its changes, whose notifications B never receives.
describe.skipIf(!process.env.TEST_DATABASE_URL)("replicas on one PostgreSQL: what one missed while its LISTEN session was down", () => {
  const apps: TestApp[] = [];
  let server: OAuthServer | null = null;
  afterAll(async () => {
    for (const app of apps) await app.close();
    await server?.close();
  });

  it("is caught up once it listens again: feeds, the key cache, a revoked key's socket and stream, OAuth waiters", { timeout: 180_000 }, async () => {
    server = await startOAuthServer();
    const db = await createTestDatabase();
    const a = await startTestApp({ ...OAUTH_ENV, PIPELINE_WORKER: "off" }, db);
    apps.push(a);
    const b = await startTestApp({ ...OAUTH_ENV, PIPELINE_WORKER: "off" }, db);
    apps.push(b);
    const ws = await a.workspace();
    const tenant = await tenantOf(a, ws.apiKey);
    const { deployment, revision } = await createDeployment(a, ws.apiKey);
    const doomed = await a.app.core.apiKeys.create({ workspaceId: ws.workspaceId, name: "revoked while B is deaf" });
    await addProvider(a, server, ws.apiKey, "idp");
    const started = await a.request("POST", "/v2/auth/authenticate", { key: ws.apiKey, body: { provider: "idp", scopes: ["openid"] } });
    expect(started.status).toBe(200);
    const flowId = started.body.auth_id as string;

    // On B: feeds of a watcher whose re-check is ten minutes away, and the app's own; who is told of
    // revocations; the doomed key's graphql-ws socket and SSE stream; a flow's watch and waiter.
    const watch = new Watcher(b.app.deps, { recheckMs: 600_000 });
    const status = collect(await watch.deploymentStatus(tenant, deployment.id));
    const revisions = collect(await watch.deploymentRevisions(tenant, deployment.id));
    const revisionStatus = collect(await watch.revisionStatus(tenant, revision.id));
    const appStatus = collect(await b.app.core.watch.deploymentStatus(tenant, deployment.id));
    const flow = collect(await b.app.core.oauthFlows.watch(tenant, flowId));
    const told: string[] = [];
    const offTold = b.app.core.auth.onKeyRevoked((keyId) => told.push(keyId));
    const live = `subscription($id: ID!) { deploymentStatusChanged(deploymentId: $id) { status } }`;
    const client = wsClient(await b.app.start(), doomed.key);
    const offs: (() => void)[] = [offTold, () => void client.dispose()];
    try {
      const socket = subscribeWs(client, live, { id: globalId("Deployment", deployment.id) });
      socket.done.catch(() => {});
      const sse = subscribeSse(b, doomed.key, live, { id: globalId("Deployment", deployment.id) });
      const waiting = b.request("GET", `/v2/auth/wait/${flowId}?timeout=120`, { key: ws.apiKey });
      await waitFor(
        () => [status, revisionStatus, appStatus, flow].every((c) => c.seen.length === 1) && socket.messages.length > 0 && sse.messages.length > 0,
        Boolean,
        { what: "B's subscriptions in place" },
      );

      // B's listening session goes; its reconnection waits for the test.
      const bus = b.app.deps.events as PostgresEventBus;
      const start = bus.start.bind(bus);
      let letReconnect!: () => void;
      const reconnectAllowed = new Promise<void>((resolve) => (letReconnect = resolve));
      Object.defineProperty(bus, "start", { configurable: true, value: async () => (await reconnectAllowed, start()) });
      offs.push(() => void Reflect.deleteProperty(bus, "start"));
      const heard: DomainEvent[] = [];
      for (const topic of [topics.deploymentStatus(deployment.id), topics.deploymentRevisions(deployment.id), topics.apiKeys(), topics.oauthFlow(flowId)]) {
        offs.push(bus.subscribe(topic, (e) => heard.push(e)));
      }
      let heardBeforeResync: number | null = null;
      offs.push(bus.onResync(() => (heardBeforeResync ??= heard.length)));
      await adminQuery(
        (db as { url: string }).url,
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1 AND datname = current_database() AND pid <> pg_backend_pid()",
        [LISTENER_APPLICATION_NAME],
      );
      await waitFor(() => bus.listening, (up) => !up, { what: "B's listening session to drop" });

      // On A, meanwhile: the revision deployed (the deployment READY), a second revision, the key
      // revoked, the flow completed by its callback.
      await deploy(a, revision.id);
      const second = await createRevision(a, ws.apiKey, deployment.id);
      await a.app.core.apiKeys.revoke(doomed.summary.id);
      const back = await server.follow(started.body.url);
      expect((await a.request("GET", pathOf(back))).status).toBe(200);

      letReconnect();
      await waitFor(() => bus.listening, Boolean);
      // None of it reached B: lost with its session.
      expect(heardBeforeResync).toBe(0);

      // The key: told, out of the cache, its socket closed and its stream ended.
      await waitFor(() => told, (ids) => ids.length > 0, { what: "the revocation, on B" });
      expect(told).toEqual([doomed.summary.id]);
      expect((await b.request("GET", "/v2/listeners", { key: doomed.key })).status).toBe(401);
      expect(await endOf(socket.done, "B closing the key's socket")).toEqual({ code: 4401, reason: REVOKED_KEY_MESSAGE });
      expect(await endOf(sse.done, "B ending the key's SSE stream")).toBe("completed");
      expect(sse.messages.at(-1)).toEqual({ errors: [expect.objectContaining({ message: REVOKED_KEY_MESSAGE, extensions: { code: "UNAUTHENTICATED" } })] });

      // The feeds, with no re-check to help.
      await waitFor(() => status.seen.length, (n) => n === 2, { what: "the deployment's READY on B" });
      expect(status.seen.map((c) => c.status)).toEqual(["AWAITING_DATABASE", "READY"]);
      await waitFor(() => revisionStatus.ended, Boolean, { what: "the revision's run on B" });
      expect(revisionStatus.seen.map((c) => c.status)).toEqual(FULL_RUN);
      const expected = [...FULL_RUN.slice(1).map(() => ["status", revision.id]), ["created", second.id], ["status", second.id]];
      await waitFor(() => revisions.seen.length, (n) => n === expected.length, { what: "the deployment's revisions' changes on B" });
      expect(revisions.seen.map((c) => [c.kind, c.revision.id])).toEqual(expected);
      await waitFor(() => appStatus.seen.length, (n) => n === 2, { what: "READY in B's own feed" });
      expect(appStatus.seen[1]!.status).toBe("READY");

      // The flow.
      await waitFor(() => flow.ended, Boolean, { what: "the flow's watch on B" });
      expect(flow.seen.map((f) => f.status)).toEqual(["pending", "completed"]);
      const waited = await waiting;
      expect(waited.body).toEqual({ status: "completed", token: expect.any(String) });
      b.guard.secret(waited.body.token, { shownIn: TOKEN_ANSWERS });

      for (const c of [status, revisions, appStatus]) c.stop();
    } finally {
      for (const off of offs) off();
    }
  });
});
