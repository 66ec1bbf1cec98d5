import { randomUUID } from "node:crypto";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "../../src/logger.js";
import { LISTENER_APPLICATION_NAME, PostgresEventBus } from "../../src/events/postgres.js";
import { type DomainEvent, topics } from "../../src/events/types.js";
import { createTestDatabase } from "../support/app.js";
import { type StallingProxy, startStallingProxy } from "../support/stalling-proxy.js";
import { waitFor } from "../support/wait.js";

/**
 * A listening session dropped without a word (a NAT that forgot its mapping, a host that died): no
 * error, no end, nothing arrives. The bus must notice by itself, listen again and tell its subscribers
 * to resync, or other replicas' events (a key's revocation closing its live subscriptions) stop for good.
 */

const adminUrl = process.env.TEST_DATABASE_URL;
/** Far beyond the bus's liveness check (src/events/postgres.ts), so that a loaded machine passes. */
const NOTICE_DEADLINE_MS = 120_000;

describe.skipIf(!adminUrl)("a listening session that stalls without closing", () => {
  let proxy: StallingProxy;
  const pools: pg.Pool[] = [];
  let publisher: PostgresEventBus;
  let listener: PostgresEventBus;
  const logged: { msg: string }[] = [];

  /** A bus as a replica has one, on its own pool. */
  const bus = (url: string) => {
    const pool = new pg.Pool({ connectionString: url, max: 2 });
    pools.push(pool);
    return new PostgresEventBus(pool, url, createLogger("info", { write: (line: string) => void logged.push(JSON.parse(line)) }));
  };

  beforeAll(async () => {
    const database = await createTestDatabase();
    if (!("url" in database)) throw new Error("expected PostgreSQL");
    proxy = await startStallingProxy(database.url);
    publisher = bus(database.url);
    listener = bus(proxy.url);
    await publisher.start();
    await listener.start();
  });
  afterAll(async () => {
    await listener?.close();
    await publisher?.close();
    for (const pool of pools) await pool.end();
    await proxy?.close();
  });

  /** Publishes a new event on the publisher; resolves once the listener's subscriber has it. */
  async function delivered(): Promise<void> {
    const event: DomainEvent = { type: "revision.status", workspaceId: "w", deploymentId: "d", revisionId: randomUUID(), status: "QUEUED" };
    const seen: DomainEvent[] = [];
    const off = listener.subscribe(topics.revision(event.revisionId), (e) => seen.push(e));
    try {
      await publisher.publish(event);
      await waitFor(() => seen.length, (n) => n > 0, { what: "the event on the listener", timeoutMs: NOTICE_DEADLINE_MS });
      expect(seen).toEqual([event]);
    } finally {
      off();
    }
  }

  it("is noticed and replaced: the bus listens again, resyncs, and delivers what is published after", { timeout: 300_000 }, async () => {
    await delivered();
    const resyncs: boolean[] = [];
    const offResync = listener.onResync(() => resyncs.push(listener.listening));

    // Only the listening session: the pool's connections (NOTIFY, reads) still work.
    expect(proxy.stall({ where: (name) => name === LISTENER_APPLICATION_NAME })).toBe(1);

    await waitFor(() => resyncs.length, (n) => n > 0, { what: "the resync after listening again", timeoutMs: NOTICE_DEADLINE_MS });
    expect(resyncs).toEqual([true]);
    expect(logged.map((l) => l.msg)).toContain("events: listening again; subscribers re-read what they follow");
    // The stalled session was let go of (its socket closed), and a new one listens in its place.
    await waitFor(
      () => proxy.connections().filter((c) => c.applicationName === LISTENER_APPLICATION_NAME),
      (sessions) => sessions.length === 1 && !sessions[0]!.stalled,
      { what: "one listening session, not stalled", timeoutMs: NOTICE_DEADLINE_MS },
    );
    offResync();
    await delivered();
  });
});
