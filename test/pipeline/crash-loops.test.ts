import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { ConfigError, loadConfig } from "../../src/config.js";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { applyTransition } from "../../src/core/transitions.js";
import { AloneLine } from "../../src/pipeline/alone.js";
import { Leases } from "../../src/core/revision-leases.js";
import type { RevisionWork } from "../../src/core/revision-work.js";
import type { PipelineWorker } from "../../src/pipeline/worker.js";
import type { Runtime, StepOutcome, StepRequest } from "../../src/pipeline/runtime.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { waitFor } from "../support/wait.js";
import { createDeployment, createRevision, eventLog, MANAGED_LOG, workersOn } from "./support.js";

/**
 * A step the service keeps dying in (a build that runs the process out of memory, or crashes it) must
 * not take the service down for ever, nor take the builds that happened to run beside it down with it.
 * A death here is a worker stopped as kill -9 stops a process (`stop({ release: false })`: nothing more
 * is written, its leases stay held until they run out), then a new worker, as the restarted process.
 */

let t: TestApp;
let ws: NewWorkspace;

beforeAll(async () => {
  t = await startTestApp({ PIPELINE_WORKER: "off" });
  ws = await t.workspace();
});
afterAll(() => t.close());

const prisma = () => t.app.db.prisma;
/** A worker's leases (private to it: the test fails its statements, as a lost database would). */
const leasesOf = (w: PipelineWorker) => (w as unknown as { work: RevisionWork }).work.leases;
const lostDatabase = () => Object.assign(new Error("Connection terminated unexpectedly"), { code: "ECONNRESET" });

/**
 * Worker w's renewals and claims go through `gate` first (which throws, as a lost database does, or
 * waits, as a stalled process does); other workers' as usual. Returns what restores them.
 */
function gated(w: PipelineWorker, gate: () => Promise<void>): () => void {
  const { renew, claim } = Leases.prototype;
  const renewals = vi.spyOn(Leases.prototype, "renew").mockImplementation(async function (this: Leases, id: string) {
    if (this === leasesOf(w)) await gate();
    return renew.call(this, id);
  });
  const claims = vi.spyOn(Leases.prototype, "claim").mockImplementation(async function (this: Leases, ...args: Parameters<Leases["claim"]>) {
    if (this === leasesOf(w)) await gate();
    return claim.apply(this, args);
  });
  return () => {
    renewals.mockRestore();
    claims.mockRestore();
  };
}
const deploy = () => createDeployment(t, ws.apiKey);
const TERMINAL = ["DEPLOYED", "CREATE_FAILED", "BUILD_FAILED", "DEPLOY_FAILED", "SKIPPED", "INTERRUPTED"];
const revisionRow = (id: string) => prisma().revision.findUniqueOrThrow({ where: { id } });
const isTerminal = async (id: string) => TERMINAL.includes((await revisionRow(id)).status);

/**
 * A worker as a process starts one: leases short enough that a dead one's steps are taken up soon, long
 * enough that a live one renews them in time on a loaded machine (a lapsed lease restarts its step).
 */
const worker = workersOn(() => t, { leaseMs: 1_000 });

/** The message of a revision given up after `crashes` deaths, `alone` of them with nothing else running. */
const givenUp = (crashes: number, alone: number) =>
  `The service stopped ${crashes} times while running this step (${alone} of them with no other step running), ` +
  "so the revision was given up: the step itself may be what stops it. Create a new revision to try again.";

/**
 * Builds that never end by themselves for the revisions in `fatal` (as one the process dies in), and
 * for those in `slow` until they have started that many times; every other step takes 5 ms. Records
 * every build's start, with the steps that were running beside it at that moment.
 */
class CrashingRuntime implements Runtime {
  readonly name = "crashing";
  readonly fatal = new Set<string>();
  readonly slow = new Map<string, number>();
  readonly builds: { revisionId: string; beside: string[] }[] = [];
  private readonly running = new Set<string>();

  async perform({ revision, status, signal }: StepRequest): Promise<StepOutcome> {
    const key = `${revision.id} ${status}`;
    if (status === "BUILDING") this.builds.push({ revisionId: revision.id, beside: [...this.running] });
    this.running.add(key);
    try {
      const starts = this.starts(revision.id);
      const holds = status === "BUILDING" && (this.fatal.has(revision.id) || starts <= (this.slow.get(revision.id) ?? 0));
      await sleep(holds ? 3_600_000 : 5, undefined, { signal });
      return { ok: true };
    } finally {
      this.running.delete(key);
    }
  }

  /** How many times the revision's build started. */
  starts(revisionId: string): number {
    return this.builds.filter((b) => b.revisionId === revisionId).length;
  }

  /** Whether the revision's build is running now. */
  building(revisionId: string): boolean {
    return this.running.has(`${revisionId} BUILDING`);
  }
}

/** A new deployment's revision whose build never ends (as one the process dies in), building on worker `a`. */
async function fatalBuild() {
  const runtime = new CrashingRuntime();
  const { revision } = await deploy();
  runtime.fatal.add(revision.id);
  const a = worker(runtime);
  await waitFor(() => runtime.starts(revision.id) === 1 && runtime.building(revision.id), Boolean, { what: "the fatal build to start" });
  return { runtime, revision, a };
}

/**
 * Deaths until the fatal revision's revision is final: each new worker is killed once the fatal build
 * has started again (and, while `alsoWait` says so, once the other builds named have started too).
 */
async function crashUntilGivenUp(runtime: CrashingRuntime, fatalId: string, alsoWait: (crash: number) => string[] = () => []) {
  for (let crash = 0; crash < 10; crash++) {
    const w = worker(runtime);
    const others = alsoWait(crash);
    await waitFor(
      async () => (await isTerminal(fatalId)) || (runtime.starts(fatalId) > crash && runtime.building(fatalId) && others.every((id) => runtime.building(id))),
      Boolean,
      { what: `the fatal build's start ${crash + 1}` },
    );
    if (await isTerminal(fatalId)) return;
    await w.stop({ release: false });
  }
  throw new Error("never given up");
}

describe("pipeline worker, when the service keeps dying in a step", () => {
  it("runs the step alone after it was in flight at 2 deaths, and fails its revision after 2 deaths alone, without starting it again", async () => {
    const runtime = new CrashingRuntime();
    const { deployment, revision } = await deploy();
    runtime.fatal.add(revision.id);
    await crashUntilGivenUp(runtime, revision.id);

    const failed = await revisionRow(revision.id);
    expect(failed).toMatchObject({ status: "BUILD_FAILED", statusMessage: givenUp(4, 2), leaseOwner: null, nextStepAt: null });
    // Two deaths with it in flight, two alone, and no fifth start.
    expect(runtime.starts(revision.id)).toBe(4);
    expect((await eventLog(prisma(), revision.id)).at(-1)).toBe("BUILDING>BUILD_FAILED");
    const log = await prisma().revisionLog.findMany({ where: { revisionId: revision.id }, orderBy: { id: "asc" } });
    expect(log.at(-1)).toMatchObject({ level: "ERROR", message: `[BUILD_FAILED] ${givenUp(4, 2)}` });
    expect(t.guard.logLines.some((l) => l.includes(revision.id) && l.includes("runs alone"))).toBe(true);
    expect(t.guard.logLines.some((l) => l.includes(revision.id) && l.includes("failing its revision"))).toBe(true);

    // The deployment is not held up: its next revision deploys, its counts started afresh.
    const next = await createRevision(t, ws.apiKey, deployment.id);
    worker(runtime);
    await waitFor(() => revisionRow(next.id), (r) => r.status === "DEPLOYED");
    expect(await revisionRow(next.id)).toMatchObject({ stepCrashes: 0, stepCrashesAlone: 0, leaseAlone: false });
  }, 120_000);

  it("does not give up a build that was in flight beside the fatal one: each runs alone, and it deploys", async () => {
    const runtime = new CrashingRuntime();
    const { revision: fatal } = await deploy();
    const { revision: innocent } = await deploy();
    runtime.fatal.add(fatal.id);
    // A long build, running when each of the first two deaths comes; then it ends as builds do.
    runtime.slow.set(innocent.id, 2);
    await crashUntilGivenUp(runtime, fatal.id, (crash) => (crash < 2 ? [innocent.id] : []));
    expect(await revisionRow(fatal.id)).toMatchObject({ status: "BUILD_FAILED", statusMessage: givenUp(4, 2) });

    worker(runtime);
    await waitFor(() => revisionRow(innocent.id), (r) => TERMINAL.includes(r.status), { what: "the innocent revision to finish" });
    expect(await revisionRow(innocent.id)).toMatchObject({ status: "DEPLOYED", stepCrashes: 0, stepCrashesAlone: 0 });
    expect(await eventLog(prisma(), innocent.id)).toEqual(MANAGED_LOG);
    // The two ran side by side at the first two deaths; after them, each build started with nothing running beside it.
    const builds = runtime.builds.filter((b) => b.revisionId === fatal.id || b.revisionId === innocent.id);
    expect(builds.slice(0, 4).some((b) => b.beside.length > 0)).toBe(true);
    const afterTwoDeaths = (id: string) => builds.filter((b) => b.revisionId === id).slice(2);
    expect(afterTwoDeaths(fatal.id).map((b) => b.beside)).toEqual([[], []]);
    expect(afterTwoDeaths(innocent.id).map((b) => b.beside)).toEqual([[]]);
  }, 120_000);

  it("counts no death for a graceful stop, one for each death, and starts afresh at a transition", async () => {
    const runtime = new CrashingRuntime();
    const { revision } = await deploy();
    runtime.fatal.add(revision.id);
    const counts = async () => {
      const { stepCrashes, stepCrashesAlone } = await revisionRow(revision.id);
      return [stepCrashes, stepCrashesAlone];
    };
    for (let stop = 1; stop <= 3; stop++) {
      const w = worker(runtime);
      await waitFor(() => runtime.starts(revision.id) === stop && runtime.building(revision.id));
      await w.stop(); // graceful: leases handed back
      expect(await counts()).toEqual([0, 0]);
    }
    const dying = worker(runtime);
    await waitFor(() => runtime.starts(revision.id) === 4 && runtime.building(revision.id));
    await dying.stop({ release: false });
    expect(await counts()).toEqual([0, 0]); // counted by the claim that takes over the held lease
    worker(runtime);
    await waitFor(() => runtime.starts(revision.id) === 5 && runtime.building(revision.id));
    expect(await counts()).toEqual([1, 0]);
    // Ended by a person: the next status starts its count afresh.
    await applyTransition(t.app.deps, { revisionId: revision.id, event: "interrupt", workspaceId: ws.workspaceId });
    expect(await revisionRow(revision.id)).toMatchObject({ status: "INTERRUPTED", stepCrashes: 0, stepCrashesAlone: 0 });
  });

  it("counts no death when a live worker takes back its own lease that ran out (a renewal too late on a busy machine)", async () => {
    const { runtime, revision, a: w } = await fatalBuild();
    // As if the renewals had come late: the lease has run out under the live worker, which claims it again.
    await prisma().revision.update({ where: { id: revision.id }, data: { leaseUntil: new Date(Date.now() - 60_000) } });
    await waitFor(() => runtime.starts(revision.id) === 2 && runtime.building(revision.id), Boolean, { what: "the build to start again" });
    expect(await revisionRow(revision.id)).toMatchObject({ status: "BUILDING", leaseOwner: w.options.owner, stepCrashes: 0, stepCrashesAlone: 0 });
    await applyTransition(t.app.deps, { revisionId: revision.id, event: "interrupt", workspaceId: ws.workspaceId });
  });

  it("gives a lost lease back before the revision's next step is claimed, however late the release lands", async () => {
    const { runtime, revision, a: w } = await fatalBuild();
    // The give-back of a lease a renewal found lost (the call that names the step's status) lands late:
    // were the step over before it, the revision's next step, claimed meanwhile, would lose its lease to it.
    const leases = leasesOf(w);
    const release = leases.release.bind(leases);
    let landed = 0;
    const late = vi.spyOn(leases, "release").mockImplementation(async (id, delayMs, status) => {
      if (status === undefined) return release(id, delayMs, status);
      await sleep(300);
      const released = await release(id, delayMs, status);
      landed++;
      return released;
    });
    try {
      await prisma().revision.update({ where: { id: revision.id }, data: { leaseUntil: new Date(Date.now() - 60_000) } });
      await waitFor(() => runtime.starts(revision.id) === 2 && runtime.building(revision.id), Boolean, { what: "the build to start again" });
      await waitFor(() => landed, (n) => n > 0, { what: "the lost lease's release to land" });
      expect(await revisionRow(revision.id)).toMatchObject({ status: "BUILDING", leaseOwner: w.options.owner });
    } finally {
      late.mockRestore();
    }
    await applyTransition(t.app.deps, { revisionId: revision.id, event: "interrupt", workspaceId: ws.workspaceId });
  });

  it("counts no death when a live worker lost the database for longer than its lease, and another took the step over", async () => {
    const { runtime, revision, a } = await fatalBuild();
    // A's statements fail (a database restarting, a failover) past its lease: to the others it looks dead.
    const restore = gated(a, () => Promise.reject(lostDatabase()));
    try {
      const b = worker(runtime);
      await waitFor(() => runtime.starts(revision.id) === 2 && runtime.building(revision.id), Boolean, { what: "B to take the build over" });
      expect(await revisionRow(revision.id)).toMatchObject({ leaseOwner: b.options.owner, stepCrashes: 1 });
    } finally {
      restore();
    }
    // A is back, finds its lease taken, and says it was alive: no death of the step to count.
    await waitFor(() => revisionRow(revision.id), (r) => r.stepCrashes === 0, { what: "A's word that it did not die" });
    expect(await revisionRow(revision.id)).toMatchObject({ status: "BUILDING", stepCrashes: 0, stepCrashesAlone: 0 });
    await applyTransition(t.app.deps, { revisionId: revision.id, event: "interrupt", workspaceId: ws.workspaceId });
  });

  it("keeps the death counted when the holder stalled past its lease (its renewals never failed): to the pipeline it was dead", async () => {
    const { runtime, revision, a } = await fatalBuild();
    // A does nothing (a process too busy to run its timers: no renewal, no claim), then goes on.
    let stalled = true;
    const restore = gated(a, async () => {
      while (stalled) await sleep(20);
    });
    const release = vi.spyOn(Leases.prototype, "release");
    try {
      worker(runtime);
      await waitFor(() => runtime.starts(revision.id) === 2 && runtime.building(revision.id), Boolean, { what: "B to take the build over" });
      stalled = false;
      // A finds its lease taken and gives it back (not held: nothing changes), without taking the death back.
      await waitFor(() => release.mock.contexts.some((leases) => leases === leasesOf(a)), Boolean, { what: "A to find its lease taken" });
      expect(await revisionRow(revision.id)).toMatchObject({ status: "BUILDING", stepCrashes: 1 });
    } finally {
      restore();
      release.mockRestore();
    }
    await applyTransition(t.app.deps, { revisionId: revision.id, event: "interrupt", workspaceId: ws.workspaceId });
  });

  it("counts no death for a lease that ran out while the claimer could not reach the database itself", async () => {
    const { runtime, revision, a } = await fatalBuild();
    await a.stop({ release: false });
    await prisma().revision.update({ where: { id: revision.id }, data: { leaseUntil: new Date(Date.now() - 1_000) } });
    const claim = vi.spyOn(Leases.prototype, "claim").mockRejectedValueOnce(lostDatabase());
    try {
      const b = worker(runtime);
      await waitFor(() => runtime.starts(revision.id) === 2 && runtime.building(revision.id), Boolean, { what: "B to take the build over" });
      expect(await revisionRow(revision.id)).toMatchObject({ leaseOwner: b.options.owner, stepCrashes: 0, leaseTakenFrom: null });
    } finally {
      claim.mockRestore();
    }
    await applyTransition(t.app.deps, { revisionId: revision.id, event: "interrupt", workspaceId: ws.workspaceId });
  });

  it("gives back a step's own lease only: not the revision's next step's, claimed since", async () => {
    const { revision } = await deploy();
    const leases = new Leases(prisma(), "a-worker", 60_000);
    await prisma().revision.update({ where: { id: revision.id }, data: { status: "AWAITING_DEPLOY", leaseOwner: "a-worker", leaseUntil: new Date(Date.now() + 60_000) } });
    expect(await leases.release(revision.id, 0, "BUILDING")).toBe(false);
    expect(await revisionRow(revision.id)).toMatchObject({ leaseOwner: "a-worker" });
    expect(await leases.release(revision.id, 0, "AWAITING_DEPLOY")).toBe(true);
    expect(await revisionRow(revision.id)).toMatchObject({ leaseOwner: null });
  });

  it("with PIPELINE_CRASH_LIMIT 0, never gives up nor runs a step alone", async () => {
    const runtime = new CrashingRuntime();
    const { revision } = await deploy();
    // Four deaths: at the default limit the claim after them gives the step up (two in flight, two alone).
    runtime.slow.set(revision.id, 4);
    for (let crash = 0; crash < 4; crash++) {
      const w = worker(runtime, { crashLimit: 0 });
      await waitFor(() => runtime.starts(revision.id) === crash + 1 && runtime.building(revision.id));
      await w.stop({ release: false });
    }
    worker(runtime, { crashLimit: 0 });
    await waitFor(() => revisionRow(revision.id), (r) => r.status === "DEPLOYED", { what: "the revision to deploy" });
    expect(runtime.starts(revision.id)).toBe(5);
    expect(t.guard.logLines.some((l) => l.includes(revision.id) && l.includes("runs alone"))).toBe(false);
  }, 120_000);
});

describe("PIPELINE_CRASH_LIMIT", () => {
  it("defaults to 2 and takes a whole number from 0, refusing anything else by name; the app's worker gives up at it", async () => {
    expect(loadConfig({}).pipeline.crashLimit).toBe(2);
    expect(loadConfig({ PIPELINE_CRASH_LIMIT: "0" }).pipeline.crashLimit).toBe(0);
    for (const bad of ["-1", "abc", "1.5", "1001"]) {
      expect(() => loadConfig({ PIPELINE_CRASH_LIMIT: bad }), bad).toThrow(ConfigError);
      try {
        loadConfig({ PIPELINE_CRASH_LIMIT: bad });
      } catch (err) {
        expect((err as ConfigError).problems.join()).toMatch(/^PIPELINE_CRASH_LIMIT: /);
      }
    }
    const app = await startTestApp({ PIPELINE_CRASH_LIMIT: "5" });
    try {
      expect(app.app.worker!.options.crashLimit).toBe(5);
    } finally {
      await app.close();
    }
  });
});

describe("AloneLine", () => {
  const never = new AbortController().signal;

  it("lets the first in line go once every step in flight is in line, then the next once it ended", async () => {
    const line = new AloneLine();
    let inFlight = 3; // two suspects and one other step
    const order: string[] = [];
    const a = line.turn("a", () => inFlight, never).then((go) => order.push(`a ${go}`));
    const b = line.turn("b", () => inFlight, never).then((go) => order.push(`b ${go}`));
    expect(line.waiting).toBe(true);
    await sleep(10);
    expect(order).toEqual([]);
    inFlight = 2;
    line.ended("other");
    await a;
    expect(order).toEqual(["a true"]);
    inFlight = 1;
    line.ended("a");
    await b;
    expect(order).toEqual(["a true", "b true"]);
    line.ended("b");
    expect(line.waiting).toBe(false);
  });

  it("lets the first in line go when the step it waited for joins the line itself (both suspects, their gates ending one after the other)", async () => {
    const line = new AloneLine();
    const inFlight = () => 2;
    let aGoes = false;
    const a = line.turn("a", inFlight, never).then((go) => (aGoes = go));
    await sleep(10);
    expect(aGoes).toBe(false);
    const abort = new AbortController();
    const b = line.turn("b", inFlight, abort.signal);
    await a;
    expect(aGoes).toBe(true);
    abort.abort();
    await expect(b).resolves.toBe(false);
  });

  it("answers false when the step is aborted while it waits", async () => {
    const line = new AloneLine();
    const abort = new AbortController();
    const waiting = line.turn("a", () => 2, abort.signal);
    abort.abort();
    await expect(waiting).resolves.toBe(false);
    line.ended("a");
    expect(line.waiting).toBe(false);
  });
});
