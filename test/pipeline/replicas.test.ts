import { afterEach, describe, expect, it } from "vitest";
import { type DomainEvent, topics } from "../../src/events/types.js";
import { createTestDatabase, type TestApp } from "../support/app.js";
import { eventLog, MANAGED_LOG, startPipelineApp } from "./support.js";
import { waitFor } from "../support/wait.js";

// Several replicas of the service on one PostgreSQL: they share the pipeline's work, never do a step
// twice, and pick up what a dead replica left.
describe.skipIf(!process.env.TEST_DATABASE_URL)("pipeline across app instances on one PostgreSQL", () => {
  const apps: TestApp[] = [];
  afterEach(async () => {
    await Promise.all(apps.splice(0).map((a) => a.close()));
  });
  const start = async (...args: Parameters<typeof startPipelineApp>) => {
    const app = await startPipelineApp(...args);
    apps.push(app);
    return app;
  };
  const statusOf = async (t: TestApp, id: string) => (await t.app.db.prisma.revision.findUniqueOrThrow({ where: { id } })).status;

  it("two replicas share the work and never advance a revision twice", async () => {
    const db = await createTestDatabase();
    const options = { pollMs: 10, concurrency: 3 };
    const a = await start({ PIPELINE_STEP_MS: "15" }, db, options);
    const b = await start({ PIPELINE_STEP_MS: "15" }, db, options);
    const ws = await a.workspace();
    const revisions: { deployment: string; revision: string }[] = [];
    for (let i = 0; i < 16; i++) {
      const via = i % 2 === 0 ? a : b;
      const res = await via.request("POST", "/v2/deployments", {
        key: ws.apiKey,
        body: { name: `replica-${i}`, source: "internal_container", source_revision_config: { image_uri: `r.example/a:${i}` } },
      });
      expect(res.status).toBe(201);
      revisions.push({ deployment: res.body.id, revision: res.body.latest_revision_id });
    }
    for (const r of revisions) await waitFor(() => statusOf(a, r.revision), (s) => s === "DEPLOYED");

    for (const r of revisions) expect(await eventLog(a.app.db.prisma, r.revision)).toEqual(MANAGED_LOG);
    const duplicates = await a.app.db.sql.query(
      "SELECT revision_id, from_status, to_status, count(*) FROM revision_events GROUP BY 1, 2, 3 HAVING count(*) > 1",
    );
    expect(duplicates).toEqual([]);
    // Both replicas did part of it: 16 revisions × 6 steps.
    const sa = a.app.worker!.stats;
    const sb = b.app.worker!.stats;
    expect(sa.committed + sb.committed).toBe(16 * 6);
    expect(sa.committed).toBeGreaterThan(0);
    expect(sb.committed).toBeGreaterThan(0);
    // What replica A's pipeline did, replica B's REST face shows.
    const viaB = await b.request("GET", `/v2/deployments/${revisions[0]!.deployment}`, { key: ws.apiKey });
    expect(viaB.body).toMatchObject({ status: "READY", active_revision_id: revisions[0]!.revision });
  });

  it("a subscriber on one replica sees every transition another replica's pipeline makes", async () => {
    const db = await createTestDatabase();
    const worker = await start({ PIPELINE_STEP_MS: "15" }, db, { pollMs: 10 });
    const watcher = await start({ PIPELINE_WORKER: "off" }, db, {});
    expect(watcher.app.worker).toBeNull();
    const ws = await watcher.workspace();
    const seen: DomainEvent[] = [];
    // Created through the watcher (no worker there); subscribed before any step can run on the other.
    const res = await watcher.request("POST", "/v2/deployments", {
      key: ws.apiKey,
      body: { name: "watched", source: "internal_container", source_revision_config: { image_uri: "r.example/w:1" } },
    });
    const off = watcher.app.deps.events.subscribe(topics.deploymentRevisions(res.body.id), (e) => seen.push(e));
    await waitFor(async () => seen.at(-1), (e) => e?.type === "revision.status" && e.status === "DEPLOYED");
    off();
    const statuses = seen.flatMap((e) => (e.type === "revision.status" ? [e.status] : []));
    // Possibly without QUEUED if the first step ran before the subscription; every later one, in order.
    expect(MANAGED_LOG.map((s) => s.split(">")[1]).filter((s) => statuses.includes(s!))).toEqual(statuses);
    expect(statuses.slice(-5)).toEqual(["AWAITING_BUILD", "BUILDING", "AWAITING_DEPLOY", "DEPLOYING", "DEPLOYED"]);
    expect(worker.app.worker!.stats.committed).toBeGreaterThanOrEqual(5);
  });

  for (const graceful of [false, true]) {
    it(`a replica ${graceful ? "stopped" : "killed"} mid-step loses nothing: another continues the revision`, async () => {
      const db = await createTestDatabase();
      const first = await start({ PIPELINE_STEP_MS: "60000" }, db, { pollMs: 10, leaseMs: 400 });
      const ws = await first.workspace();
      const res = await first.request("POST", "/v2/deployments", {
        key: ws.apiKey,
        body: { name: "survivor", source: "internal_container", source_revision_config: { image_uri: "r.example/s:1" } },
      });
      const rid = res.body.latest_revision_id;
      // The first step (a minute long) is under way on the first replica.
      await waitFor(() => first.app.db.prisma.revision.findUniqueOrThrow({ where: { id: rid } }), (r) => r.leaseOwner !== null);
      if (graceful) {
        await first.close();
      } else {
        await first.app.worker!.stop({ release: false }); // as kill -9: its lease is left to run out
        await first.close();
      }
      apps.splice(apps.indexOf(first), 1);
      const second = await start({ PIPELINE_STEP_MS: "15" }, db, { pollMs: 10, leaseMs: 400 });
      await waitFor(() => statusOf(second, rid), (s) => s === "DEPLOYED");
      expect(await eventLog(second.app.db.prisma, rid)).toEqual(MANAGED_LOG);
      // A step is counted once its events are published, after the commit the status shows.
      expect(await waitFor(async () => second.app.worker!.stats.committed, (n) => n >= 6)).toBe(6);
    });
  }

  it("two replicas finish the same deletions left half done: each deployment is deleted once, and nothing is logged as a fault", async () => {
    const db = await createTestDatabase();
    // Sweeps often, on both; the tests date the deletions back past the grace period.
    const options = { pollMs: 10, deleteGraceMs: 60_000, deleteSweepEveryMs: 5 };
    const a = await start({ PIPELINE_STEP_MS: "5" }, db, options);
    const b = await start({ PIPELINE_STEP_MS: "5" }, db, options);
    const ws = await a.workspace();
    const ids: string[] = [];
    for (let i = 0; i < 12; i++) {
      const res = await a.request("POST", "/v2/deployments", {
        key: ws.apiKey,
        body: { name: `left-${i}`, source: "internal_container", source_revision_config: { image_uri: `r.example/a:${i}` } },
      });
      expect(res.status).toBe(201);
      ids.push(res.body.id);
    }
    // As markDeleting leaves them, a minute ago, all in one statement: both replicas' next sweeps see them all.
    await a.app.db.prisma.$executeRaw`UPDATE deployments SET status = 'AWAITING_DELETE', updated_at = now() - interval '1 minute' WHERE id = ANY(${ids}::uuid[])`;
    await waitFor(() => a.app.db.prisma.deployment.count({ where: { id: { in: ids } } }), (n) => n === 0, { what: "every deletion to be finished" });
    const finished = (t: TestApp) => t.guard.logLines.filter((l) => l.includes("finished deleting"));
    await waitFor(() => finished(a).length + finished(b).length, (n) => n >= ids.length, { what: "a log line per deletion" });
    expect(finished(a).length + finished(b).length).toBe(ids.length);
    for (const t of [a, b]) expect(t.guard.logLines.filter((l) => (JSON.parse(l) as { level: number }).level >= 40)).toEqual([]);
    expect(await a.app.db.prisma.revision.count({ where: { deploymentId: { in: ids } } })).toBe(0);
  });
});
