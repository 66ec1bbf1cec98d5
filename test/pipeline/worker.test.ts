import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { applyTransition } from "../../src/core/transitions.js";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { type DomainEvent, topics } from "../../src/events/types.js";
import type { RevisionStatus } from "../../src/core/revision-machine.js";
import type { Runtime, StepOutcome, StepRequest } from "../../src/pipeline/runtime.js";
import { SimulatorRuntime } from "../../src/pipeline/runtimes/simulator.js";
import { STEP_HANDED_ON, STEP_RERUN_AFTER_CRASH, STEP_RETRIED } from "../../src/pipeline/worker.js";
import { LogWriter } from "../../src/core/log-writer.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { codehostDeploymentBody, createInstallation, createListener, deploymentBody, selfHostedDeploymentBody } from "../support/fixtures.js";
import { createDeployment, createRevision, eventLog, HeldRuntime, MANAGED_LOG, workersOn } from "./support.js";
import { waitFor } from "../support/wait.js";

let t: TestApp;
let ws: NewWorkspace;

beforeAll(async () => {
  t = await startTestApp({ PIPELINE_WORKER: "off" });
  ws = await t.workspace();
});
afterAll(() => t.close());

const prisma = () => t.app.db.prisma;
/** A deployment and its first revision, made by core in the test's workspace. */
const deploy = (body?: Record<string, unknown>) => createDeployment(t, ws.apiKey, body);
const revise = (deploymentId: string, body?: Record<string, unknown>) => createRevision(t, ws.apiKey, deploymentId, body);
const worker = workersOn(() => t);
const statusOf = async (id: string) => (await prisma().revision.findUniqueOrThrow({ where: { id } })).status;
/** Until the revision's status is `status` (or passes it). */
const until = (id: string, status: string | ((s: string) => boolean), timeoutMs?: number) =>
  waitFor(() => statusOf(id), typeof status === "string" ? (s) => s === status : status, { timeoutMs, what: `revision ${id} to be ${String(status)}` });
/** The messages of a revision's build or deploy log, oldest first, as the command-line tool reads them. */
const logMessages = async (rev: { id: string; deploymentId: string }, kind: "build" | "deploy"): Promise<string[]> => {
  const res = await t.request("POST", `/v1/projects/${rev.deploymentId}/revisions/${rev.id}/${kind}_logs`, { key: ws.apiKey, body: { order: "asc", limit: 100 } });
  expect(res.status).toBe(200);
  return (res.body.logs as { message: string }[]).map((l) => l.message);
};
const TERMINAL = ["DEPLOYED", "CREATE_FAILED", "BUILD_FAILED", "DEPLOY_FAILED", "SKIPPED", "INTERRUPTED"];

describe("pipeline worker", () => {
  it("moves a managed revision through every status to DEPLOYED, and readies its deployment", async () => {
    const { deployment: dep, revision: rev } = await deploy();
    const seen: DomainEvent[] = [];
    const off = [
      t.app.deps.events.subscribe(topics.revision(rev.id), (e) => seen.push(e)),
      t.app.deps.events.subscribe(topics.deploymentStatus(dep.id), (e) => seen.push(e)),
    ];
    worker();
    await until(rev.id, "DEPLOYED");
    // Over PostgreSQL events arrive by NOTIFY, after the commit that the status was read from.
    await waitFor(async () => seen.some((e) => e.type === "deployment.status"), Boolean);
    off.forEach((f) => f());

    expect(await eventLog(prisma(), rev.id)).toEqual(MANAGED_LOG);
    const done = await prisma().revision.findUniqueOrThrow({ where: { id: rev.id } });
    expect(done).toMatchObject({ statusMessage: "Deployed", nextStepAt: null, leaseOwner: null, leaseUntil: null, repoCommitSha: null });
    expect(done.updatedAt.getTime()).toBeGreaterThan(rev.updatedAt.getTime());
    const deployment = await prisma().deployment.findUniqueOrThrow({ where: { id: dep.id } });
    expect(deployment).toMatchObject({ status: "READY", activeRevisionId: rev.id });
    expect(seen.filter((e) => e.type === "revision.status").map((e) => "status" in e && e.status)).toEqual(
      MANAGED_LOG.slice(1).map((s) => s.split(">")[1]),
    );
    expect(seen.filter((e) => e.type === "deployment.status")).toEqual([
      { type: "deployment.status", workspaceId: ws.workspaceId, deploymentId: dep.id, status: "READY" },
    ]);
  });

  it("deploys an external_container revision without build statuses", async () => {
    const { revision: rev } = await deploy(selfHostedDeploymentBody(await createListener(t, ws.apiKey)));
    worker();
    await until(rev.id, "DEPLOYED");
    expect(await eventLog(prisma(), rev.id)).toEqual([
      ">CREATING",
      "CREATING>QUEUED",
      "QUEUED>AWAITING_DEPLOY",
      "AWAITING_DEPLOY>DEPLOYING",
      "DEPLOYING>DEPLOYED",
    ]);
  });

  it("fills repo_commit_sha and repo_commit_title of codehost revisions from repo and ref, deterministically", async () => {
    // codehostDeploymentBody's repository is acme/agent, built from main: what the titles are checked for.
    const { deployment: dep, revision: a } = await deploy(codehostDeploymentBody(await createInstallation(t, ws.apiKey, { name: "acme" })));
    const ref = (repo_ref: string) => ({ source_revision_config: { repo_ref } });
    worker();
    await until(a.id, "DEPLOYED");
    const b = await revise(dep.id, ref("main"));
    const c = await revise(dep.id, ref("release"));
    await until(c.id, "DEPLOYED");
    await until(b.id, "SKIPPED");
    const [ra, rb, rc] = await Promise.all([a, b, c].map((r) => prisma().revision.findUniqueOrThrow({ where: { id: r.id } })));
    expect(ra!.repoCommitSha).toMatch(/^[0-9a-f]{40}$/);
    expect(ra!.repoCommitTitle).toContain("acme/agent");
    expect(ra!.repoCommitTitle).toContain("main");
    expect(rc!.repoCommitSha).toMatch(/^[0-9a-f]{40}$/);
    expect(rc!.repoCommitSha).not.toBe(ra!.repoCommitSha);
    // b was skipped before its CREATING step ran, so it never resolved a commit; a fresh one on main matches a.
    expect(rb!.repoCommitSha).toBeNull();
    const d = await revise(dep.id, ref("main"));
    await until(d.id, "DEPLOYED");
    const rd = await prisma().revision.findUniqueOrThrow({ where: { id: d.id } });
    expect([rd.repoCommitSha, rd.repoCommitTitle]).toEqual([ra!.repoCommitSha, ra!.repoCommitTitle]);
  });

  for (const [label, status, failedAt] of [
    ["create", "CREATE_FAILED", "CREATING"],
    ["build", "BUILD_FAILED", "BUILDING"],
    ["deploy", "DEPLOY_FAILED", "DEPLOYING"],
  ] as const) {
    it(`fails with ${status} and a message to act on when resource_spec labels simulate/failure=${label}`, async () => {
      const { deployment: dep, revision: rev } = await deploy(deploymentBody({ source_config: { resource_spec: { labels: { "simulate/failure": label } } } }));
      worker();
      await until(rev.id, status);
      const log = await eventLog(prisma(), rev.id);
      expect(log.at(-1)).toBe(`${failedAt}>${status}`);
      expect(log.slice(0, -1)).toEqual(MANAGED_LOG.slice(0, log.length - 1));
      const failed = await prisma().revision.findUniqueOrThrow({ where: { id: rev.id } });
      expect(failed.statusMessage).toContain(`"simulate/failure": "${label}"`);
      expect(failed.statusMessage).toContain("Remove that label and create a new revision");
      expect(failed.nextStepAt).toBeNull();
      const deployment = await prisma().deployment.findUniqueOrThrow({ where: { id: dep.id } });
      expect(deployment).toMatchObject({ status: "AWAITING_DATABASE", activeRevisionId: null });
    });
  }

  it("fails with CREATE_FAILED when the listener or installation it needs no longer exists", async () => {
    const listenerId = await createListener(t, ws.apiKey);
    const integrationId = await createInstallation(t, ws.apiKey, { name: "gone" });
    const { revision: a } = await deploy(selfHostedDeploymentBody(listenerId));
    const { revision: b } = await deploy(codehostDeploymentBody(integrationId));
    // Both go once the revisions exist: core refuses to make a revision that names what is gone.
    expect((await t.request("DELETE", `/v2/listeners/${listenerId}`, { key: ws.apiKey })).status).toBe(204);
    // Core has no way to delete an installation: this one change is written by hand.
    await prisma().codehostInstallation.delete({ where: { id: integrationId } });
    worker();
    await until(a.id, "CREATE_FAILED");
    await until(b.id, "CREATE_FAILED");
    const [ra, rb] = await Promise.all([a, b].map((r) => prisma().revision.findUniqueOrThrow({ where: { id: r.id } })));
    expect(ra!.statusMessage).toContain(`listener ${listenerId} of this deployment no longer exists`);
    expect(rb!.statusMessage).toContain(`integration ${integrationId} of this deployment no longer exists`);
    expect(await eventLog(prisma(), a.id)).toEqual([">CREATING", "CREATING>CREATE_FAILED"]);
  });

  it("skips older revisions that have not started when a newer one exists", async () => {
    const { deployment: dep, revision: older } = await deploy();
    // Core skips the revisions a new one supersedes as it creates it, so it never leaves one CREATING
    // behind a newer one; the worker checks all the same, and that check is what this test is about.
    // By hand (its status, twice): the older one is put out of creation's reach, in flight, while the
    // newer one is created, and then back to CREATING.
    const setStatus = (status: string) => prisma().revision.update({ where: { id: older.id }, data: { status } });
    await setStatus("BUILDING");
    const newer = await revise(dep.id);
    await setStatus("CREATING");
    worker();
    await until(newer.id, "DEPLOYED");
    expect(await statusOf(older.id)).toBe("SKIPPED");
    expect(await eventLog(prisma(), older.id)).toEqual([">CREATING", "CREATING>SKIPPED"]);
    const o = await prisma().revision.findUniqueOrThrow({ where: { id: older.id } });
    expect(o.statusMessage).toBe("Skipped: a newer revision of this deployment was created");
  });

  it("keeps a newer revision QUEUED while an older one builds, then deploys it after", async () => {
    const runtime = new HeldRuntime("BUILDING");
    const { deployment: dep, revision: first } = await deploy();
    worker(runtime, { queuedRecheckMs: 30 });
    await waitFor(async () => runtime.holding(first.id), Boolean);
    const second = await revise(dep.id);
    await until(second.id, "QUEUED");
    // Several rechecks pass while the first one is in flight; the second stays queued and says why.
    await new Promise((r) => setTimeout(r, 200));
    const queued = await prisma().revision.findUniqueOrThrow({ where: { id: second.id } });
    expect(queued.status).toBe("QUEUED");
    expect(queued.statusMessage).toBe(`Queued: waiting for revision ${first.id} (BUILDING) of this deployment to finish`);
    expect(await statusOf(first.id)).toBe("BUILDING");
    runtime.release(first.id);
    await waitFor(async () => runtime.holding(second.id), Boolean);
    expect(await statusOf(first.id)).toBe("DEPLOYED");
    runtime.release(second.id);
    await until(second.id, "DEPLOYED");
    // The second left the queue only after the first had deployed.
    const events = await prisma().revisionEvent.findMany({ where: { revisionId: { in: [first.id, second.id] } }, orderBy: { id: "asc" } });
    const firstDeployed = events.findIndex((e) => e.revisionId === first.id && e.toStatus === "DEPLOYED");
    const secondStarted = events.findIndex((e) => e.revisionId === second.id && e.toStatus === "AWAITING_BUILD");
    expect(firstDeployed).toBeGreaterThanOrEqual(0);
    expect(secondStarted).toBeGreaterThan(firstDeployed);
    expect(await eventLog(prisma(), second.id)).toEqual(MANAGED_LOG);
    const deployment = await prisma().deployment.findUniqueOrThrow({ where: { id: dep.id } });
    expect(deployment.activeRevisionId).toBe(second.id);
  });

  it("lets a user interrupt a revision mid-step; the worker's late result is dropped; a terminal one cannot be", async () => {
    const runtime = new HeldRuntime("BUILDING");
    const { revision: rev } = await deploy();
    const w = worker(runtime);
    await waitFor(async () => runtime.holding(rev.id), Boolean);
    const result = await applyTransition(t.app.deps, { revisionId: rev.id, event: "interrupt", workspaceId: ws.workspaceId });
    expect(result.to).toBe("INTERRUPTED");
    runtime.release(rev.id);
    await waitFor(async () => w.stats.lost, (n) => n >= 1);
    expect(await statusOf(rev.id)).toBe("INTERRUPTED");
    expect((await eventLog(prisma(), rev.id)).slice(-2)).toEqual(["AWAITING_BUILD>BUILDING", "BUILDING>INTERRUPTED"]);
    const again = applyTransition(t.app.deps, { revisionId: rev.id, event: "interrupt", workspaceId: ws.workspaceId });
    await expect(again).rejects.toMatchObject({ code: "BAD_REQUEST", message: expect.stringContaining("already INTERRUPTED") });
  });

  it("loses nothing when a worker dies mid-step: another continues after the lease runs out", async () => {
    const runtime = new HeldRuntime("BUILDING");
    const { revision: rev } = await deploy();
    const dying = worker(runtime, { leaseMs: 300 });
    await waitFor(async () => runtime.holding(rev.id), Boolean);
    await dying.stop({ release: false }); // as kill -9: nothing more is written, the lease stays
    const held = await prisma().revision.findUniqueOrThrow({ where: { id: rev.id } });
    expect(held).toMatchObject({ status: "BUILDING", leaseOwner: dying.options.owner });
    expect(held.leaseUntil!.getTime()).toBeGreaterThan(Date.now() - 1000);

    worker(new SimulatorRuntime(5), { leaseMs: 300 });
    await until(rev.id, "DEPLOYED");
    expect(await eventLog(prisma(), rev.id)).toEqual(MANAGED_LOG);
    // The dead worker said nothing; the run that took the step over says it runs again from its start.
    const build = await logMessages(rev, "build");
    expect(build).not.toContain(STEP_HANDED_ON);
    // (Once, unless the taking worker stalled past its own short lease on a loaded machine and took the step over again.)
    expect(build).toContain(STEP_RERUN_AFTER_CRASH);
    // Not before the dead worker's lease had run out: the taking run said so once it had claimed the step
    // (both times are the database's; the line's is kept to the millisecond).
    const rerun = await prisma().revisionLog.findFirstOrThrow({ where: { revisionId: rev.id, message: STEP_RERUN_AFTER_CRASH }, orderBy: { id: "asc" } });
    expect(rerun.timestamp.getTime()).toBeGreaterThanOrEqual(held.leaseUntil!.getTime() - 1);
  });

  it("hands work on at once when a worker stops gracefully mid-step", async () => {
    const runtime = new HeldRuntime("DEPLOYING");
    const { revision: rev } = await deploy();
    const first = worker(runtime, { leaseMs: 60_000 });
    await waitFor(async () => runtime.holding(rev.id), Boolean);
    await first.stop();
    expect(await prisma().revision.findUniqueOrThrow({ where: { id: rev.id } })).toMatchObject({ status: "DEPLOYING", leaseOwner: null });
    // Its log says the step was cut short here, as the run after it repeats its lines.
    expect((await logMessages(rev, "deploy")).slice(-2)).toEqual(["[DEPLOYING] Deploying", STEP_HANDED_ON]);
    worker(new SimulatorRuntime(5), { leaseMs: 60_000 });
    await until(rev.id, "DEPLOYED");
    expect(await eventLog(prisma(), rev.id)).toEqual(MANAGED_LOG);
    // A step handed on counts no crash: the next run has nothing more to say of it.
    expect(await logMessages(rev, "deploy")).not.toContain(STEP_RERUN_AFTER_CRASH);
  });

  it("counts a step it claims while the revision's previous step still publishes: stop() waits for it, no other worker runs it at once", async () => {
    const runtime = new HeldRuntime("QUEUED");
    const { revision: rev } = await deploy();
    // The worker's publications wait until the test lets them go, as a NOTIFY through a busy pool
    // does: the step that committed CREATING is still in progress while QUEUED is due already.
    const bus = t.app.deps.events;
    let publishing = 0;
    let letPublish!: () => void;
    const publishAllowed = new Promise<void>((resolve) => (letPublish = resolve));
    const publish = async (event: DomainEvent) => {
      publishing++;
      await publishAllowed;
      await bus.publish(event);
    };
    // The app's bus in all else.
    const slowBus = new Proxy(bus, {
      get: (target, key) => {
        if (key === "publish") return publish;
        const value: unknown = Reflect.get(target, key);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const a = worker(runtime, { pollMs: 1 }, { ...t.app.deps, events: slowBus });
    try {
      await waitFor(async () => publishing, (n) => n > 0, { what: "CREATING's commit to publish" });
      expect(await statusOf(rev.id)).toBe("QUEUED");
      // The worker claims QUEUED (CREATING's commit gave up the lease) and starts it, or gives it back
      // and claims it again.
      await waitFor(async () => runtime.holding(rev.id) || a.stats.claimed >= 3, Boolean, { what: "QUEUED to be claimed" });
      const startedWhilePublishing = runtime.performing(rev.id) > 0;
      letPublish();
      await waitFor(async () => a.stats.committed >= 1 && runtime.holding(rev.id), Boolean, { what: "QUEUED to be held" });
      // CREATING's step has ended: it is counted as committed just before, within the same turn.
      await new Promise((resolve) => setImmediate(resolve));
      expect(a.busy).toBe(1);
      await a.stop();
      expect(runtime.performing(rev.id)).toBe(0);
      expect(await prisma().revision.findUniqueOrThrow({ where: { id: rev.id } })).toMatchObject({ status: "QUEUED", leaseOwner: null });
      // One revision, one step at a time in one worker: QUEUED waited for CREATING's step to end.
      expect(startedWhilePublishing).toBe(false);
    } finally {
      letPublish();
    }

    worker(runtime);
    await waitFor(async () => runtime.holding(rev.id), Boolean, { what: "the next worker to hold QUEUED" });
    runtime.release(rev.id);
    await until(rev.id, "DEPLOYED");
    expect(runtime.mostAtOnce).toBe(1);
    expect(a.stats).toMatchObject({ committed: 1, errors: 0 });
    expect(await eventLog(prisma(), rev.id)).toEqual(MANAGED_LOG);
  });

  it("parks a revision in a status no step follows (UNKNOWN) instead of retrying it; a user can still interrupt it", async () => {
    const { revision: rev } = await deploy();
    // No transition of core leads to UNKNOWN: the one change this test is about is written by hand.
    await prisma().revision.update({ where: { id: rev.id }, data: { status: "UNKNOWN" } });
    const w = worker();
    await waitFor(() => prisma().revision.findUniqueOrThrow({ where: { id: rev.id } }), (r) => r.nextStepAt === null);
    await new Promise((r) => setTimeout(r, 100));
    expect(w.stats).toMatchObject({ claimed: 1, lost: 1, committed: 0, errors: 0 });
    expect(await statusOf(rev.id)).toBe("UNKNOWN");
    const result = await applyTransition(t.app.deps, { revisionId: rev.id, event: "interrupt" });
    expect(result.to).toBe("INTERRUPTED");
  });

  it("runs many revisions of many deployments to a terminal status, each transition once", async () => {
    const revisions = [];
    for (let i = 0; i < 12; i++) {
      revisions.push((await deploy()).revision);
    }
    worker(new SimulatorRuntime(5), { concurrency: 4 });
    worker(new SimulatorRuntime(5), { concurrency: 4 });
    for (const r of revisions) await until(r.id, (s) => TERMINAL.includes(s), 45_000);
    for (const r of revisions) expect(await eventLog(prisma(), r.id)).toEqual(MANAGED_LOG);
  }, 60_000);
});

/**
 * A runtime whose steps of one revision out of a status go as `steps[status](attempt)` says
 * (attempt: how many times that step was asked for, from 1): an outcome, or an error it throws.
 * The other steps, and every step of other revisions, go well at once.
 */
class ScriptedRuntime implements Runtime {
  readonly name = "scripted";
  readonly attempts = new Map<string, number>();
  constructor(
    private readonly revisionId: string,
    private readonly steps: Partial<Record<RevisionStatus, (attempt: number) => StepOutcome | Error>>,
  ) {}

  async perform({ revision, status }: StepRequest): Promise<StepOutcome> {
    if (revision.id !== this.revisionId) return { ok: true };
    const attempt = (this.attempts.get(status) ?? 0) + 1;
    this.attempts.set(status, attempt);
    const result = this.steps[status]?.(attempt) ?? { ok: true };
    if (result instanceof Error) throw result;
    return result;
  }
}

/** A revision whose build fails once on an internal error, then succeeds. */
async function buildFailingOnce() {
  const { revision } = await deploy();
  return { revision, runtime: new ScriptedRuntime(revision.id, { BUILDING: (n) => (n === 1 ? new Error("a fault of the runtime") : { ok: true }) }) };
}

/** The lines a failure writes ("runs again") are lost with the database (LogWriter.append answers 0 lines written), until restore(). */
function loseRetriedLines() {
  const append = LogWriter.prototype.append;
  const lost = { count: 0, restore: () => spy.mockRestore() };
  const spy = vi.spyOn(LogWriter.prototype, "append").mockImplementation(function (this: LogWriter, ...args: Parameters<LogWriter["append"]>) {
    if (!args[1].some((l) => l.message === STEP_RETRIED)) return append.apply(this, args);
    lost.count++;
    return Promise.resolve(0);
  });
  return lost;
}

describe("pipeline worker, when a step keeps failing on an internal error", () => {
  const GIVEN_UP = "This step stopped on an internal error 5 times in a row, so the revision was given up. Create a new revision to try again.";
  const lines = (revisionId: string) => prisma().revisionLog.findMany({ where: { revisionId }, orderBy: { id: "asc" } });

  it("fails its revision after 5 failures in a row that are not transient (a value the database refuses), saying nothing of the error", async () => {
    // Findings PostgreSQL cannot store (jsonb refuses \u0000, SQLSTATE 22P05): the commit fails the same way every time.
    const { deployment: dep, revision: rev } = await deploy();
    const runtime = new ScriptedRuntime(rev.id, { BUILDING: () => ({ ok: true, findings: { report: { source: { graphs: { "agent\u0000": "./agent.py:graph" } } } } }) });
    const w = worker(runtime, { retryMs: 10 });
    await until(rev.id, (s) => TERMINAL.includes(s));
    const failed = await prisma().revision.findUniqueOrThrow({ where: { id: rev.id } });
    expect(failed).toMatchObject({ status: "BUILD_FAILED", statusMessage: GIVEN_UP, buildReport: null, nextStepAt: null, leaseOwner: null });
    expect(runtime.attempts.get("BUILDING")).toBe(5);
    expect(w.stats.errors).toBe(5);
    expect((await eventLog(prisma(), rev.id)).at(-1)).toBe("BUILDING>BUILD_FAILED");
    // Four times "runs again", then the failure; the database's error stays in the service's log.
    const log = await lines(rev.id);
    expect(log.filter((l) => l.message === STEP_RETRIED)).toHaveLength(4);
    expect(log.at(-1)).toMatchObject({ level: "ERROR", message: `[BUILD_FAILED] ${GIVEN_UP}` });
    expect(log.filter((l) => /unicode|22P05|\\u0000/i.test(l.message))).toEqual([]);
    expect(t.guard.logLines.some((l) => l.includes(rev.id) && l.includes("failing its revision"))).toBe(true);
    // The deployment is not held up: its next revision deploys.
    const next = await revise(dep.id);
    await until(next.id, "DEPLOYED");
  });

  it("does not count transient errors (a lost database, a write conflict): the step is retried for as long as they last", async () => {
    const lost = () => new Error("Connection terminated unexpectedly");
    const conflict = () => Object.assign(new Error("Transaction failed due to a write conflict or a deadlock"), { code: "P2034" });
    const { revision: rev } = await deploy();
    const runtime = new ScriptedRuntime(rev.id, { DEPLOYING: (n) => (n > 8 ? { ok: true } : n % 2 === 0 ? lost() : conflict()) });
    const w = worker(runtime, { retryMs: 10 });
    await until(rev.id, (s) => TERMINAL.includes(s));
    expect(await statusOf(rev.id)).toBe("DEPLOYED");
    expect(runtime.attempts.get("DEPLOYING")).toBe(9);
    expect(w.stats.errors).toBe(8);
  });

  it("says at the run after an internal error that the step runs again, when the database was lost as it failed and the log could not say so then", async () => {
    const { revision: rev, runtime } = await buildFailingOnce();
    const lost = loseRetriedLines();
    try {
      worker(runtime, { retryMs: 10 });
      await until(rev.id, "DEPLOYED");
    } finally {
      lost.restore();
    }
    expect(lost.count).toBe(1);
    const build = await logMessages(rev, "build");
    expect(build).not.toContain(STEP_RETRIED);
    expect(build.filter((m) => m === STEP_RERUN_AFTER_CRASH)).toHaveLength(1);
  });

  it("says nothing of a lost line in another step's log: the step that failed unsaid was run elsewhere meanwhile", async () => {
    const { revision: rev, runtime } = await buildFailingOnce();
    const lost = loseRetriedLines();
    // The first worker's build fails, its line lost; the step is due again only after the worker has stopped.
    const first = worker(runtime, { retryMs: 3_000 });
    try {
      await waitFor(() => lost.count, (n) => n === 1, { what: "the build's failure, its line lost" });
      await first.stop();
    } finally {
      lost.restore();
    }
    // Another worker runs the build, and is stopped in the deploy step; the first takes the deploy up.
    const held = new HeldRuntime("DEPLOYING");
    const second = worker(held);
    await waitFor(async () => held.holding(rev.id), Boolean, { what: "the second worker's deploy step" });
    await second.stop();
    first.start();
    await until(rev.id, "DEPLOYED");
    expect(runtime.attempts.get("BUILDING")).toBe(1);
    expect(await logMessages(rev, "deploy")).not.toContain(STEP_RERUN_AFTER_CRASH);
  });

  it("counts the failures of each step afresh: 4 in a row at one step, then 4 at the next, still deploys", async () => {
    const fault = (n: number) => (n <= 4 ? new Error("a fault of the runtime") : { ok: true as const });
    const { revision: rev } = await deploy();
    const runtime = new ScriptedRuntime(rev.id, { BUILDING: fault, DEPLOYING: fault });
    const w = worker(runtime, { retryMs: 10 });
    await until(rev.id, (s) => TERMINAL.includes(s));
    expect(await statusOf(rev.id)).toBe("DEPLOYED");
    expect(w.stats.errors).toBe(8);
    expect(await eventLog(prisma(), rev.id)).toEqual(MANAGED_LOG);
  });
});
