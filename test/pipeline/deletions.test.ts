import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { DeletionSweeper } from "../../src/core/deletion-sweep.js";
import * as deploymentStatus from "../../src/core/deployment-status.js";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { createTestDatabase, startTestApp, type TestApp } from "../support/app.js";
import { waitFor } from "../support/wait.js";
import { createDeployment, eventLog, HeldRuntime, startPipelineApp, workersOn } from "./support.js";

// A deletion is two transactions (markDeleting, then the rows): one left half done, by a crash or a
// lost database between them, is finished by the service itself once its grace period has passed.

/** As markDeleting leaves a deployment, `agoMs` ago (its status changed then). */
async function leftDeleting(t: TestApp, id: string, agoMs = 0): Promise<void> {
  await t.app.db.prisma.deployment.update({ where: { id }, data: { status: "AWAITING_DELETE" } });
  if (agoMs > 0) {
    await t.app.db.prisma.$executeRaw`UPDATE deployments SET updated_at = now() - ${agoMs}::double precision * interval '1 millisecond' WHERE id = ${id}::uuid`;
  }
}

/** Log lines at warn level or above (pino: 40 warn, 50 error, 60 fatal). */
const faults = (t: TestApp, from: number) => t.guard.logLines.slice(from).filter((l) => (JSON.parse(l) as { level: number }).level >= 40);

describe("the worker finishes deletions left half done", () => {
  let t: TestApp;
  let ws: NewWorkspace;
  beforeAll(async () => {
    // A grace period no test waits out: a deployment is finished only when the test dates it back.
    t = await startPipelineApp({ PIPELINE_STEP_MS: "5" }, await createTestDatabase(), {
      pollMs: 10,
      deleteGraceMs: 60_000,
      deleteSweepEveryMs: 20,
    });
    ws = await t.workspace();
  });
  afterAll(() => t.close());

  it("deletes a deployment left AWAITING_DELETE past the grace period, with its revisions; a recent one is left alone", async () => {
    const logged = t.guard.logLines.length;
    const key = ws.apiKey;
    const create = async (name: string) => {
      const res = await t.request("POST", "/v2/deployments", { key, body: { name, source: "internal_container", source_revision_config: { image_uri: `r.example/${name}:1` } } });
      expect(res.status).toBe(201);
      return { id: res.body.id as string, revision: res.body.latest_revision_id as string };
    };
    const stale = await create("left-deleting");
    const recent = await create("being-deleted");
    for (const d of [stale, recent]) {
      await waitFor(async () => (await t.app.db.prisma.revision.findUniqueOrThrow({ where: { id: d.revision } })).status, (s) => s === "DEPLOYED");
    }
    await leftDeleting(t, stale.id, 120_000);
    await leftDeleting(t, recent.id);

    await waitFor(async () => (await t.request("GET", `/v2/deployments/${stale.id}`, { key })).status, (s) => s === 404, { what: "the stale deletion to be finished" });
    expect(await t.app.db.prisma.revision.count({ where: { deploymentId: stale.id } })).toBe(0);
    expect(await t.app.db.prisma.revisionEvent.count({ where: { revisionId: stale.revision } })).toBe(0);
    // The sweep that finished it saw the recent one too, and left it to the deletion in progress.
    const shown = await t.request("GET", `/v2/deployments/${recent.id}`, { key });
    expect(shown.status).toBe(200);
    expect(shown.body.status).toBe("AWAITING_DELETE");
    const listed = await t.request("GET", "/v2/deployments?limit=100", { key });
    expect(listed.body.resources.map((d: { id: string }) => d.id)).toEqual([recent.id]);
    // Logged once the rows are gone (and so, maybe, after the 404 above).
    await waitFor(() => t.guard.logLines.slice(logged).some((l) => l.includes("finished deleting") && l.includes(stale.id)), Boolean, { what: "the sweep's log line" });
    expect(faults(t, logged)).toEqual([]);
  });

  it("DELETE still answers 204 and leaves nothing for the sweep", async () => {
    const { deployment } = await createDeployment(t, ws.apiKey, { name: "plain-delete", source: "internal_container", source_revision_config: { image_uri: "r.example/a:1" } });
    expect((await t.request("DELETE", `/v2/deployments/${deployment.id}`, { key: ws.apiKey })).status).toBe(204);
    expect(await t.app.db.prisma.deployment.count({ where: { id: deployment.id } })).toBe(0);
  });
});

describe("the pipeline leaves the revisions of a deployment being deleted alone", () => {
  let t: TestApp;
  let ws: NewWorkspace;
  beforeAll(async () => {
    t = await startTestApp({ PIPELINE_WORKER: "off" });
    ws = await t.workspace();
  });
  afterAll(() => t.close());

  // No deletion is finished here: the grace period is longer than any test.
  const worker = workersOn(() => t, { deleteGraceMs: 10 * 60_000 });
  const revisionOf = (id: string) => t.app.db.prisma.revision.findUniqueOrThrow({ where: { id } });

  it("a deployment whose deletion keeps failing does not hold back the others behind it", async () => {
    const logged = t.guard.logLines.length;
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const { deployment } = await createDeployment(t, ws.apiKey, { name: `stuck-${i}`, source: "internal_container", source_revision_config: { image_uri: "r.example/a:1" } });
      await leftDeleting(t, deployment.id, 120_000);
      ids.push(deployment.id);
    }
    // The sweep takes them in id order: the first one's deletion fails every time.
    const [stuck, ...rest] = [...ids].sort();
    const original = deploymentStatus.finishDeleting;
    const spy = vi.spyOn(deploymentStatus, "finishDeleting").mockImplementation(async (deps, tenant, which) => {
      if (which.includes(stuck!)) throw new Error("a deletion that keeps failing");
      return original(deps, tenant, which);
    });
    try {
      expect(await new DeletionSweeper(t.app.deps, t.app.logger, 60_000).run()).toBe(rest.length);
    } finally {
      spy.mockRestore();
    }
    expect(await t.app.db.prisma.deployment.count({ where: { id: { in: rest } } })).toBe(0);
    expect(await t.app.db.prisma.deployment.count({ where: { id: stuck } })).toBe(1);
    expect(faults(t, logged).map((l) => JSON.parse(l).deployment_id)).toEqual([stuck]);
    // The next sweep, the fault gone, finishes it.
    expect(await new DeletionSweeper(t.app.deps, t.app.logger, 60_000).run()).toBe(1);
  });

  it("two sweeps at once: one deletes each deployment, the other finds it gone, and neither fails", async () => {
    const logged = t.guard.logLines.length;
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) {
      const { deployment } = await createDeployment(t, ws.apiKey, { name: `race-${i}`, source: "internal_container", source_revision_config: { image_uri: "r.example/a:1" } });
      await leftDeleting(t, deployment.id, 120_000);
      ids.push(deployment.id);
    }
    // No worker runs here: the two sweeps are all there is, and between them they delete each once.
    const sweepers = [0, 1].map(() => new DeletionSweeper(t.app.deps, t.app.logger, 60_000));
    const counts = await Promise.all(sweepers.map((s) => s.run()));
    expect(counts[0]! + counts[1]!).toBe(ids.length);
    expect(await t.app.db.prisma.deployment.count({ where: { id: { in: ids } } })).toBe(0);
    expect(faults(t, logged)).toEqual([]);
  });

  it("drops quietly the result of a step in progress when its deployment is marked for deletion", async () => {
    const logged = t.guard.logLines.length;
    const runtime = new HeldRuntime("BUILDING");
    const { deployment, revision } = await createDeployment(t, ws.apiKey);
    const w = worker(runtime);
    await waitFor(async () => runtime.holding(revision.id), Boolean, { what: "the build step to be held" });
    await leftDeleting(t, deployment.id);
    runtime.release(revision.id);
    await waitFor(async () => w.stats.lost, (n) => n >= 1, { what: "the step to be dropped" });
    expect(await revisionOf(revision.id)).toMatchObject({ status: "BUILDING", leaseOwner: null, leaseUntil: null, nextStepAt: null });
    expect((await eventLog(t.app.db.prisma, revision.id)).at(-1)).toBe("AWAITING_BUILD>BUILDING");
    expect(w.stats.errors).toBe(0);
    expect(faults(t, logged)).toEqual([]);
  });

  it("refuses a user's interrupt of a revision whose deployment is being deleted (REST and GraphQL), moving nothing", async () => {
    const { deployment, revision } = await createDeployment(t, ws.apiKey, { name: "deleting", source: "internal_container", source_revision_config: { image_uri: "r.example/a:1" } });
    await leftDeleting(t, deployment.id);
    const before = await eventLog(t.app.db.prisma, revision.id);
    const rest = await t.request("POST", `/v2/deployments/${deployment.id}/revisions/${revision.id}/interrupt`, { key: ws.apiKey });
    expect(rest.status).toBe(400);
    expect(rest.body).toEqual({ detail: `Deployment ID ${deployment.id} is being deleted.` });
    const gql = await t.request("POST", "/graphql", {
      key: ws.apiKey,
      body: { query: `mutation($id: ID!) { revisionInterrupt(id: $id) { revision { status } userErrors { message } } }`, variables: { id: Buffer.from(`Revision:${revision.id}`).toString("base64") } },
    });
    expect(gql.body.data.revisionInterrupt).toEqual({ revision: null, userErrors: [expect.objectContaining({ message: `Deployment ID ${deployment.id} is being deleted.` })] });
    expect(await eventLog(t.app.db.prisma, revision.id)).toEqual(before);
  });

  it("does not claim the due step of a revision whose deployment is being deleted", async () => {
    const logged = t.guard.logLines.length;
    const { deployment, revision } = await createDeployment(t, ws.apiKey, { name: "doomed", source: "internal_container", source_revision_config: { image_uri: "r.example/a:1" } });
    await leftDeleting(t, deployment.id);
    const w = worker();
    // Another deployment goes all the way through meanwhile: the worker has looked many times.
    const { revision: other } = await createDeployment(t, ws.apiKey, { name: "other", source: "internal_container", source_revision_config: { image_uri: "r.example/a:1" } });
    await waitFor(async () => (await revisionOf(other.id)).status, (s) => s === "DEPLOYED", { what: "the other revision to deploy" });
    expect(await revisionOf(revision.id)).toMatchObject({ status: "CREATING", leaseOwner: null });
    expect(await eventLog(t.app.db.prisma, revision.id)).toEqual([">CREATING"]);
    expect(w.stats.errors).toBe(0);
    expect(faults(t, logged)).toEqual([]);
  });
});
