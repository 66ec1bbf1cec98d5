import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { IN_FLIGHT_STATUSES, isTerminal, type RevisionStatus } from "../../src/core/revision-machine.js";
import { Leases } from "../../src/core/revision-leases.js";
import { Steps } from "../../src/core/revision-steps.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { createDeployment, eventLog } from "./support.js";
import { waitFor } from "../support/wait.js";

let t: TestApp;
let ws: NewWorkspace;

beforeAll(async () => {
  t = await startTestApp({ PIPELINE_STEP_MS: "10" });
  ws = await t.workspace();
});
afterAll(() => t.close());

describe("pipeline concurrency", () => {
  it("refuses the result of a worker whose lease ran out and was taken over: the step is committed once", async () => {
    const prisma = t.app.db.prisma;
    // Only the two workers of this test claim: the app's own is paused.
    await t.app.worker!.stop();
    try {
      const { revision: rev } = await createDeployment(t, ws.apiKey);
      const slowLeases = new Leases(prisma, "slow-worker", 400);
      const fastLeases = new Leases(prisma, "fast-worker", 60_000);
      expect(await slowLeases.claim(100)).toContain(rev.id);
      expect(await fastLeases.claim(100)).not.toContain(rev.id); // held: nobody else gets it
      await new Promise((r) => setTimeout(r, 500));
      expect(await fastLeases.claim(100)).toContain(rev.id); // ran out: taken over
      expect(await slowLeases.renew(rev.id)).toBe(false);

      const claimed = await prisma.revision.findUniqueOrThrow({ where: { id: rev.id } });
      const slow = new Steps(t.app.deps, "slow-worker", 1000);
      const fast = new Steps(t.app.deps, "fast-worker", 1000);
      expect(await slow.commit(claimed, { ok: true })).toBe("lost");
      expect(await fast.commit(claimed, { ok: true })).toBe("committed");
      expect(await fast.commit(claimed, { ok: true })).toBe("lost"); // the same step again: no longer CREATING
      expect(await eventLog(prisma, rev.id)).toEqual([">CREATING", "CREATING>QUEUED"]);
    } finally {
      t.app.worker!.start();
    }
  });

  it("keeps one revision of a deployment in flight under concurrent revision creation; the newest deploys", async () => {
    const created = await t.request("POST", "/v2/deployments", {
      key: ws.apiKey,
      body: { name: "contended", source: "internal_container", source_revision_config: { image_uri: "r.example/c:0" } },
    });
    expect(created.status).toBe(201);
    const id = created.body.id;
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        t.request("POST", `/v2/deployments/${id}/revisions`, {
          key: ws.apiKey,
          body: { source_revision_config: { image_uri: `r.example/c:${i + 1}` } },
        }),
      ),
    );
    expect(answers.map((a) => a.status)).toEqual(Array(20).fill(201));
    const prisma = t.app.db.prisma;
    const all = await waitFor(
      () => prisma.revision.findMany({ where: { deploymentId: id }, orderBy: [{ createdAt: "desc" }, { id: "desc" }] }),
      (rs) => rs.every((r) => isTerminal(r.status as RevisionStatus)),
    );
    expect(all).toHaveLength(21);
    const [newest, ...older] = all;
    expect(newest!.status).toBe("DEPLOYED");
    for (const r of older) expect(["SKIPPED", "DEPLOYED"]).toContain(r.status);
    const deployment = await prisma.deployment.findUniqueOrThrow({ where: { id } });
    expect(deployment).toMatchObject({ latestRevisionId: newest!.id, activeRevisionId: newest!.id, status: "READY" });

    // Replay the deployment's event log (its transitions are serialised by the deployment's lock, so
    // id order is commit order): never two revisions past the queue and unfinished at once.
    const events = await prisma.revisionEvent.findMany({ where: { revisionId: { in: all.map((r) => r.id) } }, orderBy: { id: "asc" } });
    const inFlight = new Set<string>();
    let most = 0;
    for (const e of events) {
      if ((IN_FLIGHT_STATUSES as readonly string[]).includes(e.toStatus)) inFlight.add(e.revisionId);
      else inFlight.delete(e.revisionId);
      most = Math.max(most, inFlight.size);
    }
    expect(most).toBe(1);
    // A deployed older revision finished before the next one left the queue.
    const deployedOrder = events.filter((e) => e.toStatus === "DEPLOYED").map((e) => e.revisionId);
    expect(deployedOrder.at(-1)).toBe(newest!.id);
  });
});
