import { RevisionWork } from "../../src/core/revision-work.js";
import { setTimeout as sleep } from "node:timers/promises";
import { afterEach } from "vitest";
import type { CoreDeps } from "../../src/core/context.js";
import type { PrismaClient } from "../../src/db/client.js";
import type { Deployment, Revision } from "../../src/generated/prisma/client.js";
import type { RevisionStatus } from "../../src/core/revision-machine.js";
import type { Runtime, StepOutcome, StepRequest } from "../../src/pipeline/runtime.js";
import { SimulatorRuntime } from "../../src/pipeline/runtimes/simulator.js";
import { PipelineWorker, type WorkerOptions } from "../../src/pipeline/worker.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { deploymentBody, tenantOf } from "../support/fixtures.js";

/**
 * A deployment made by core as POST /v2/deployments makes it, so that workers are tested on the rows
 * core writes; with its first revision, CREATING and due now for the worker the test runs.
 */
export async function createDeployment(t: TestApp, key: string, body: Record<string, unknown> = deploymentBody()): Promise<{ deployment: Deployment; revision: Revision }> {
  const { latestRevision, ...deployment } = await t.app.core.deployments.create(await tenantOf(t, key), body);
  if (!latestRevision) throw new Error("set-up: core created a deployment without a revision");
  return { deployment, revision: latestRevision };
}

/** A new revision of the deployment, made by core as POST /v2/deployments/{id}/revisions makes it. */
export async function createRevision(t: TestApp, key: string, deploymentId: string, body: Record<string, unknown> = {}): Promise<Revision> {
  return t.app.core.deployments.createRevision(await tenantOf(t, key), deploymentId, body);
}

/** The revision's event log as "FROM>TO" strings, oldest first. */
export async function eventLog(prisma: PrismaClient, revisionId: string): Promise<string[]> {
  const events = await prisma.revisionEvent.findMany({ where: { revisionId }, orderBy: { id: "asc" } });
  return events.map((e) => `${e.fromStatus ?? ""}>${e.toStatus}`);
}

export const MANAGED_LOG = [
  ">CREATING",
  "CREATING>QUEUED",
  "QUEUED>AWAITING_BUILD",
  "AWAITING_BUILD>BUILDING",
  "BUILDING>AWAITING_DEPLOY",
  "AWAITING_DEPLOY>DEPLOYING",
  "DEPLOYING>DEPLOYED",
];

/**
 * A runtime whose steps out of `holdAt` wait until the test lets them go (or the worker aborts them);
 * every other step takes `stepMs`. It records each step it was asked to perform, and how many steps
 * of one revision it ever performed at once.
 */
export class HeldRuntime implements Runtime {
  readonly name = "held";
  readonly performed: { revisionId: string; status: RevisionStatus }[] = [];
  /** The most steps of one revision performed at once (by any number of workers). */
  mostAtOnce = 0;
  private readonly waiting = new Map<string, () => void>();
  private readonly active = new Map<string, number>();

  constructor(
    private readonly holdAt: RevisionStatus,
    private readonly stepMs = 5,
  ) {}

  async perform({ revision, status, signal }: StepRequest): Promise<StepOutcome> {
    this.performed.push({ revisionId: revision.id, status });
    const now = (this.active.get(revision.id) ?? 0) + 1;
    this.active.set(revision.id, now);
    this.mostAtOnce = Math.max(this.mostAtOnce, now);
    try {
      if (status !== this.holdAt) {
        await sleep(this.stepMs, undefined, { signal });
        return { ok: true };
      }
      await new Promise<void>((resolve, reject) => {
        this.waiting.set(revision.id, resolve);
        signal.addEventListener(
          "abort",
          () => {
            if (this.waiting.get(revision.id) === resolve) this.waiting.delete(revision.id);
            reject(signal.reason);
          },
          { once: true },
        );
      });
      return { ok: true };
    } finally {
      this.active.set(revision.id, this.active.get(revision.id)! - 1);
    }
  }

  /** Whether a step of this revision is being held now. */
  holding(revisionId: string): boolean {
    return this.waiting.has(revisionId);
  }

  /** How many steps of this revision are being performed now. */
  performing(revisionId: string): number {
    return this.active.get(revisionId) ?? 0;
  }

  release(revisionId: string): void {
    const resolve = this.waiting.get(revisionId);
    this.waiting.delete(revisionId);
    resolve?.();
  }
}

/** startTestApp's app with pipeline worker options (short leases, small polls). */
export const startPipelineApp = (
  env: Record<string, string | undefined>,
  database: { url: string } | { snapshot: Blob },
  pipeline: Partial<WorkerOptions>,
): Promise<TestApp> => startTestApp(env, database, { pipeline });

/**
 * Starts pipeline workers on the app `app()` gives (one started with PIPELINE_WORKER=off), polling
 * every 10 ms, with the test's options over `defaults`, and on that app's core unless `deps` says
 * otherwise. Every worker a test started is stopped, gracefully, after it: call this where the test
 * file's (or describe block's) afterEach applies.
 */
export function workersOn(app: () => TestApp, defaults: Partial<WorkerOptions> = {}) {
  const started: PipelineWorker[] = [];
  afterEach(async () => {
    await Promise.all(started.splice(0).map((w) => w.stop()));
  });
  return (runtime: Runtime = new SimulatorRuntime(5), options: Partial<WorkerOptions> = {}, deps: CoreDeps = app().app.deps): PipelineWorker => {
    const w = new PipelineWorker((work, logger) => new RevisionWork(deps, work, logger), runtime, app().app.logger, { pollMs: 10, ...defaults, ...options });
    started.push(w);
    w.start();
    return w;
  };
}
