import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { IN_FLIGHT_STATUSES, isTerminal, type RevisionStatus } from "../../src/core/revision-machine.js";
import { setTimeout as sleep } from "node:timers/promises";
import { startTestApp, type TestApp, type TestResponse } from "../support/app.js";
import { eventLog } from "../pipeline/support.js";
import { waitFor } from "../support/wait.js";

/**
 * 100 concurrent PATCHes and revision creations on one deployment, through app.fetch: every one
 * answered, none lost, never two revisions of the deployment in flight, the superseded ones SKIPPED,
 * and latest_revision_id the newest.
 */

const BURST = 100;

async function deploy(t: TestApp, ws: NewWorkspace, name: string): Promise<string> {
  const res = await t.request("POST", "/v2/deployments", {
    key: ws.apiKey,
    body: { name, source: "internal_container", source_revision_config: { image_uri: "r.example/c:0" } },
  });
  expect(res.status, res.text).toBe(201);
  return res.body.id;
}

/**
 * Sends as a client does: a 503 is retried after its Retry-After. On a loaded machine the burst, which
 * queues on the deployment's row lock while holding pooled connections, can outwait the pool; such a
 * request never started its transaction and changed nothing, so the retry is the client's to make.
 */
async function retried(send: () => Promise<TestResponse>): Promise<TestResponse> {
  const deadline = Date.now() + 120_000;
  for (;;) {
    const res = await send();
    if (res.status !== 503 || Date.now() > deadline) return res;
    await sleep(Number(res.headers.get("retry-after") ?? "1") * 1000);
  }
}

/**
 * The burst: PATCHes that create a revision, PATCHes that change the deployment in place, and
 * revision creations, interleaved. Returns the ids of the revisions the answers name as created.
 */
async function burst(t: TestApp, ws: NewWorkspace, id: string): Promise<{ created: string[]; inPlace: number }> {
  const answers = await Promise.all(
    Array.from({ length: BURST }, (_, i) => {
      const kind = i % 5 === 4 ? "in-place" : i % 2 === 0 ? "patch" : "create";
      const body =
        kind === "in-place" ? { shareable: i % 10 === 4 } : { source_revision_config: { image_uri: `r.example/c:${i + 1}` } };
      const send = () =>
        kind === "create" ? t.request("POST", `/v2/deployments/${id}/revisions`, { key: ws.apiKey, body }) : t.request("PATCH", `/v2/deployments/${id}`, { key: ws.apiKey, body });
      return retried(send).then((res) => ({ kind, res }));
    }),
  );
  const created: string[] = [];
  let inPlace = 0;
  for (const { kind, res } of answers) {
    expect(res.status, `${kind}: ${res.text}`).toBe(kind === "create" ? 201 : 200);
    if (kind === "create") created.push(res.body.id);
    else if (kind === "patch") created.push(res.body.latest_revision_id);
    else inPlace++;
  }
  return { created, inPlace };
}

const revisionsOf = (t: TestApp, deploymentId: string) =>
  t.app.db.prisma.revision.findMany({ where: { deploymentId }, orderBy: [{ createdAt: "desc" }, { id: "desc" }] });

describe("100 concurrent revision-creating requests on one deployment", () => {
  let t: TestApp;
  let ws: NewWorkspace;

  beforeAll(async () => {
    // No pipeline: nothing starts, so every superseded revision must be SKIPPED and only the newest remains.
    t = await startTestApp({ PIPELINE_WORKER: "off", RATE_LIMIT_PER_MINUTE: "0" });
    ws = await t.workspace();
  });
  afterAll(() => t.close());

  it("create one revision each, SKIP every superseded one, and leave latest_revision_id on the newest", async () => {
    const id = await deploy(t, ws, "burst-still");
    const { created, inPlace } = await burst(t, ws, id);
    expect(new Set(created).size).toBe(BURST - inPlace);

    const all = await revisionsOf(t, id);
    expect(all).toHaveLength(BURST - inPlace + 1);
    expect(all.map((r) => r.id)).toEqual(expect.arrayContaining(created));
    const [newest, ...older] = all;
    expect(newest!.status).toBe("CREATING");
    for (const r of older) {
      expect(r.status, r.id).toBe("SKIPPED");
      expect(await eventLog(t.app.db.prisma, r.id)).toEqual([">CREATING", "CREATING>SKIPPED"]);
    }
    const deployment = await t.request("GET", `/v2/deployments/${id}`, { key: ws.apiKey });
    expect(deployment.body.latest_revision_id).toBe(newest!.id);
    const listed = await t.request("GET", `/v2/deployments/${id}/revisions?limit=1`, { key: ws.apiKey });
    expect(listed.body.resources[0].id).toBe(newest!.id);
  });
});

describe("100 concurrent revision-creating requests while the pipeline runs", () => {
  let t: TestApp;
  let ws: NewWorkspace;

  beforeAll(async () => {
    // Steps long enough that revisions are in flight while the burst arrives.
    t = await startTestApp({ PIPELINE_STEP_MS: "40", RATE_LIMIT_PER_MINUTE: "0" });
    ws = await t.workspace();
  });
  afterAll(() => t.close());

  it("keep exactly one revision in flight at any moment; the others end SKIPPED or finish; the newest deploys", async () => {
    const id = await deploy(t, ws, "burst-running");
    // Let the first revision get going, so that the burst meets one in flight.
    await waitFor(() => revisionsOf(t, id), (rs) => (IN_FLIGHT_STATUSES as readonly string[]).includes(rs[0]!.status));
    const { created, inPlace } = await burst(t, ws, id);
    expect(new Set(created).size).toBe(BURST - inPlace);

    // Right after the burst: besides the newest, at most one revision is unfinished, and it is in flight.
    const now = await revisionsOf(t, id);
    const unfinished = now.slice(1).filter((r) => !isTerminal(r.status as RevisionStatus));
    expect(unfinished.length, JSON.stringify(unfinished.map((r) => r.status))).toBeLessThanOrEqual(1);
    for (const r of unfinished) expect(IN_FLIGHT_STATUSES).toContain(r.status);
    expect((await t.request("GET", `/v2/deployments/${id}`, { key: ws.apiKey })).body.latest_revision_id).toBe(now[0]!.id);

    const all = await waitFor(() => revisionsOf(t, id), (rs) => rs.every((r) => isTerminal(r.status as RevisionStatus)));
    const [newest, ...older] = all;
    expect(newest!.status).toBe("DEPLOYED");
    for (const r of older) expect(["SKIPPED", "DEPLOYED"]).toContain(r.status);
    expect(older.filter((r) => r.status === "DEPLOYED").length).toBeLessThanOrEqual(2);
    const deployment = await t.app.db.prisma.deployment.findUniqueOrThrow({ where: { id } });
    expect(deployment).toMatchObject({ latestRevisionId: newest!.id, activeRevisionId: newest!.id });

    // The event log, in commit order (transitions of one deployment are serialised by its row lock):
    // never two revisions past the queue and unfinished at once, and each revision's log a gapless chain.
    const events = await t.app.db.prisma.revisionEvent.findMany({ where: { revisionId: { in: all.map((r) => r.id) } }, orderBy: { id: "asc" } });
    const inFlight = new Set<string>();
    let most = 0;
    for (const e of events) {
      if ((IN_FLIGHT_STATUSES as readonly string[]).includes(e.toStatus)) inFlight.add(e.revisionId);
      else inFlight.delete(e.revisionId);
      most = Math.max(most, inFlight.size);
    }
    expect(most).toBe(1);
    for (const r of all) {
      const log = events.filter((e) => e.revisionId === r.id);
      expect(log[0]).toMatchObject({ fromStatus: null, toStatus: "CREATING" });
      for (let i = 1; i < log.length; i++) expect(log[i]!.fromStatus, r.id).toBe(log[i - 1]!.toStatus);
      expect(log.at(-1)!.toStatus).toBe(r.status);
    }
  });
});
