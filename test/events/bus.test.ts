import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { adminQuery } from "../support/global-setup.js";
import { applyTransition } from "../../src/core/transitions.js";
import { MemoryEventBus } from "../../src/events/memory.js";
import { CHANNEL, LISTENER_APPLICATION_NAME, PostgresEventBus } from "../../src/events/postgres.js";
import { type DomainEvent, topics } from "../../src/events/types.js";
import { createTestDatabase, startTestApp, type TestApp } from "../support/app.js";
import { createDeployment, MANAGED_LOG } from "../pipeline/support.js";
import { waitFor } from "../support/wait.js";

const ids = { workspaceId: "w", deploymentId: "d1", revisionId: "r1" };

describe("in-process event bus", () => {
  it("delivers to subscribers of the event's topics only, until they unsubscribe", async () => {
    const bus = new MemoryEventBus();
    const byRevision: DomainEvent[] = [];
    const byDeploymentRevisions: DomainEvent[] = [];
    const byDeploymentStatus: DomainEvent[] = [];
    const offRevision = bus.subscribe(topics.revision("r1"), (e) => byRevision.push(e));
    bus.subscribe(topics.deploymentRevisions("d1"), (e) => byDeploymentRevisions.push(e));
    bus.subscribe(topics.deploymentStatus("d1"), (e) => byDeploymentStatus.push(e));
    bus.subscribe(topics.revision("other"), () => {
      throw new Error("not this topic");
    });

    const status: DomainEvent = { type: "revision.status", ...ids, status: "QUEUED" };
    const created: DomainEvent = { type: "deployment.revisions", ...ids };
    const ready: DomainEvent = { type: "deployment.status", workspaceId: "w", deploymentId: "d1", status: "READY" };
    await bus.publish(status);
    await bus.publish(created);
    await bus.publish(ready);
    // A revision's status change is also news for its deployment's revisions.
    expect(byRevision).toEqual([status]);
    expect(byDeploymentRevisions).toEqual([status, created]);
    expect(byDeploymentStatus).toEqual([ready]);

    offRevision();
    await bus.publish({ ...status, status: "AWAITING_BUILD" });
    expect(byRevision).toHaveLength(1);
    expect(byDeploymentRevisions).toHaveLength(3);
    expect(bus.topicCount).toBe(3);
    await bus.close();
    expect(bus.topicCount).toBe(0);
  });

  it("tells its resync handlers when told to, each even if another throws, until they unsubscribe", () => {
    const bus = new MemoryEventBus();
    const told: string[] = [];
    const offFirst = bus.onResync(() => told.push("first"));
    bus.onResync(() => {
      throw new Error("a failing handler");
    });
    bus.onResync(() => told.push("third"));
    expect(bus.resyncHandlerCount).toBe(3);
    expect(() => bus.resync()).toThrow("a failing handler");
    expect(told).toEqual(["first", "third"]);
    offFirst();
    expect(() => bus.resync()).toThrow();
    expect(told).toEqual(["first", "third", "third"]);
    // Events are not resyncs, and a resync is no event.
    const events: DomainEvent[] = [];
    bus.subscribe(topics.revision("r1"), (e) => events.push(e));
    void bus.publish({ type: "revision.status", ...ids, status: "QUEUED" });
    expect(told).toHaveLength(3);
    void bus.close();
    expect(bus.resyncHandlerCount).toBe(0);
    bus.resync();
    expect(events).toHaveLength(1);
  });

  it("delivers to every subscriber even if one throws, and reports the error rather than throwing it to the publisher", async () => {
    const failures: unknown[] = [];
    const bus = new MemoryEventBus((err) => failures.push(err));
    const seen: DomainEvent[] = [];
    bus.subscribe(topics.revision("r1"), () => {
      throw new Error("a failing subscriber");
    });
    bus.subscribe(topics.revision("r1"), (e) => seen.push(e));
    const status: DomainEvent = { type: "revision.status", ...ids, status: "QUEUED" };
    // The publisher's change is committed already: a subscriber's fault is not its failure.
    await expect(bus.publish(status)).resolves.toBeUndefined();
    expect(seen).toEqual([status]);
    expect(failures).toEqual([new Error("a failing subscriber")]);

    // Without a place to report to (a test's bus), the error is thrown once every subscriber is told.
    const strict = new MemoryEventBus();
    const told: DomainEvent[] = [];
    strict.subscribe(topics.revision("r1"), () => {
      throw new Error("a failing subscriber");
    });
    strict.subscribe(topics.revision("r1"), (e) => told.push(e));
    await expect(strict.publish(status)).rejects.toThrow("a failing subscriber");
    expect(told).toEqual([status]);
  });

  it("is the bus of an embedded (PGlite) app; a PostgreSQL app gets LISTEN/NOTIFY", async () => {
    const t = await startTestApp({ PIPELINE_WORKER: "off" });
    try {
      const expected = process.env.TEST_DATABASE_URL ? PostgresEventBus : MemoryEventBus;
      expect(t.app.deps.events).toBeInstanceOf(expected);
    } finally {
      await t.close();
    }
  });
});

describe.skipIf(!process.env.TEST_DATABASE_URL)("PostgreSQL LISTEN/NOTIFY event bus across two app instances", () => {
  let a: TestApp;
  let b: TestApp;
  let dbUrl: string;

  beforeAll(async () => {
    const db = await createTestDatabase();
    dbUrl = (db as { url: string }).url;
    a = await startTestApp({ PIPELINE_WORKER: "off" }, db);
    b = await startTestApp({ PIPELINE_WORKER: "off" }, db);
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
  });

  const collect = (t: TestApp, topic: string) => {
    const seen: DomainEvent[] = [];
    const off = t.app.deps.events.subscribe(topic, (e) => seen.push(e));
    return { seen, off };
  };

  /** Until `to` has received what `from` published so far (NOTIFYs arrive in the order they were committed). */
  const caughtUp = async (from: TestApp, to: TestApp) => {
    const revisionId = `marker-${randomUUID()}`;
    const marker = collect(to, topics.revision(revisionId));
    await from.app.deps.events.publish({ type: "revision.status", workspaceId: "w", deploymentId: "d", revisionId, status: "QUEUED" });
    await waitFor(async () => marker.seen.length, (n) => n === 1);
    marker.off();
  };

  it("delivers what one instance publishes to the other's subscribers, and once to its own", async () => {
    const onA = collect(a, topics.revision("x1"));
    const onB = collect(b, topics.revision("x1"));
    const onBDeployment = collect(b, topics.deploymentRevisions("dx"));
    const event: DomainEvent = { type: "revision.status", workspaceId: "w", deploymentId: "dx", revisionId: "x1", status: "BUILDING" };
    await a.app.deps.events.publish(event);
    await waitFor(async () => onB.seen.length, (n) => n === 1);
    await waitFor(async () => onBDeployment.seen.length, (n) => n === 1);
    expect(onB.seen).toEqual([event]);
    // The publisher's own subscriber got it at once and not a second time from its own NOTIFY.
    await new Promise((r) => setTimeout(r, 200));
    expect(onA.seen).toEqual([event]);
    onA.off();
    onB.off();
    onBDeployment.off();
  });

  it("shows the other instance every transition its pipeline makes, in order", async () => {
    const ws = await a.workspace();
    const { deployment: dep, revision: rev } = await createDeployment(a, ws.apiKey);
    // Creating told of the new revision (CREATING) by NOTIFY too: B listens once that has come, for the transitions.
    await caughtUp(a, b);
    const onB = collect(b, topics.revision(rev.id));
    const onBStatus = collect(b, topics.deploymentStatus(dep.id));
    // Transitions made by instance A's core, as its worker makes them.
    for (let i = 1; i < MANAGED_LOG.length; i++) {
      await applyTransition(a.app.deps, { revisionId: rev.id, event: "advance" });
    }
    const statuses = MANAGED_LOG.slice(1).map((s) => s.split(">")[1]);
    await waitFor(async () => onB.seen.length, (n) => n === statuses.length);
    expect(onB.seen.map((e) => (e.type === "revision.status" ? e.status : e.type))).toEqual(statuses);
    expect(onB.seen[0]).toEqual({ type: "revision.status", workspaceId: ws.workspaceId, deploymentId: dep.id, revisionId: rev.id, status: "QUEUED" });
    await waitFor(async () => onBStatus.seen.length, (n) => n === 1);
    expect(onBStatus.seen[0]).toMatchObject({ type: "deployment.status", status: "READY" });
    onB.off();
    onBStatus.off();
  });

  it("ignores malformed notifications and keeps delivering", async () => {
    const onB = collect(b, topics.revision("x2"));
    // Neither JSON, nor an envelope, nor an event this version knows (a replica of another version,
    // or any session of the database's, may send them): each dropped, none delivered, none thrown.
    const malformed = [
      "not json",
      "null",
      "1",
      '{"o":"someone"}',
      '{"o":"someone","e":"revision.status"}',
      '{"o":"someone","e":{"type":"revision.status","revisionId":"x2"}}',
      '{"o":"someone","e":{"type":"revision.renamed","workspaceId":"w","deploymentId":"d","revisionId":"x2"}}',
    ];
    await adminQuery(dbUrl, `SELECT ${malformed.map((_, i) => `pg_notify($1, $${i + 2})`).join(", ")}`, [CHANNEL, ...malformed]);
    const event: DomainEvent = { type: "revision.status", workspaceId: "w", deploymentId: "d", revisionId: "x2", status: "DEPLOYED" };
    await a.app.deps.events.publish(event);
    await waitFor(async () => onB.seen.length, (n) => n === 1);
    expect(onB.seen).toEqual([event]);
    onB.off();
  });

  it("reconnects its listening session after the server drops it, then tells its subscribers to resync", async () => {
    const bus = b.app.deps.events as PostgresEventBus;
    // Told once it listens again (never on the first start, nor while it is down).
    const resyncs: boolean[] = [];
    const offResync = bus.onResync(() => resyncs.push(bus.listening));
    const killed = await adminQuery(
      dbUrl,
      "SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity WHERE application_name = $1 AND datname = current_database() AND pid <> pg_backend_pid()",
      [LISTENER_APPLICATION_NAME],
    );
    expect(killed.length).toBe(2); // one listening session per instance
    await waitFor(async () => bus.listening, (up) => !up, { timeoutMs: 5_000 }).catch(() => undefined);
    await waitFor(async () => bus.listening, Boolean);
    await waitFor(() => resyncs, (r) => r.length > 0, { what: "the resync after reconnecting" });
    expect(resyncs).toEqual([true]);
    offResync();
    const onB = collect(b, topics.revision("x3"));
    const event: DomainEvent = { type: "revision.status", workspaceId: "w", deploymentId: "d", revisionId: "x3", status: "QUEUED" };
    // The publisher's own listening session may still be reconnecting; NOTIFY goes through its pool.
    await waitFor(
      async () => {
        await a.app.deps.events.publish(event);
        return onB.seen.length;
      },
      (n) => n >= 1,
    );
    expect(onB.seen[0]).toEqual(event);
    onB.off();
  });
});
