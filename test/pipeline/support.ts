import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import type { PrismaClient } from "../../src/db/client.js";
import type { Prisma, Revision } from "../../src/generated/prisma/client.js";
import type { RevisionStatus } from "../../src/core/revision-machine.js";
import type { Runtime, StepOutcome, StepRequest } from "../../src/pipeline/runtime.js";
import type { WorkerOptions } from "../../src/pipeline/worker.js";
import { startTestApp, type TestApp } from "../support/app.js";

/** A deployment row written straight to the database, as core's creation would (worker tests). */
export async function insertDeployment(
  prisma: PrismaClient,
  workspaceId: string,
  options: { source?: string; sourceConfig?: Prisma.InputJsonObject; listenerId?: string; integrationId?: string } = {},
) {
  const name = `dep-${randomUUID().slice(0, 8)}`;
  return prisma.deployment.create({
    data: {
      workspaceId,
      name,
      displayName: name,
      source: options.source ?? "internal_container",
      status: "AWAITING_DATABASE",
      sourceConfig: options.sourceConfig ?? {},
      listenerId: options.listenerId,
      integrationId: options.integrationId,
      secrets: [],
      secretReferences: [],
      tracerSessionId: randomUUID(),
      url: `https://${name}.deployments.localhost`,
      imageVersion: "0.1.0",
      deploymentTier: "SERVERLESS_S",
      computeTier: "SERVERLESS_S",
      databaseTier: "SERVERLESS_S",
    },
  });
}

/** A CREATING revision with its first event, due now: what revision creation leaves for the pipeline. */
export async function insertRevision(
  prisma: PrismaClient,
  deployment: { id: string; workspaceId: string; source: string },
  options: { sourceConfig?: Prisma.InputJsonObject; sourceRevisionConfig?: Prisma.InputJsonObject; createdAt?: Date } = {},
): Promise<Revision> {
  const revision = await prisma.revision.create({
    data: {
      deploymentId: deployment.id,
      workspaceId: deployment.workspaceId,
      status: "CREATING",
      statusMessage: "Revision created",
      source: deployment.source,
      sourceConfig: options.sourceConfig ?? {},
      sourceRevisionConfig: options.sourceRevisionConfig ?? {},
      secrets: [],
      secretReferences: [],
      nextStepAt: new Date(),
      ...(options.createdAt && { createdAt: options.createdAt }),
      events: { create: { fromStatus: null, toStatus: "CREATING", message: "Revision created" } },
    },
  });
  await prisma.deployment.update({ where: { id: deployment.id }, data: { latestRevisionId: revision.id } });
  return revision;
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
 * every other step takes `stepMs`. It records each step it was asked to perform.
 */
export class HeldRuntime implements Runtime {
  readonly name = "held";
  readonly performed: { revisionId: string; status: RevisionStatus }[] = [];
  private readonly waiting = new Map<string, () => void>();

  constructor(
    private readonly holdAt: RevisionStatus,
    private readonly stepMs = 5,
  ) {}

  async perform({ revision, status, signal }: StepRequest): Promise<StepOutcome> {
    this.performed.push({ revisionId: revision.id, status });
    if (status !== this.holdAt) {
      await sleep(this.stepMs, undefined, { signal });
      return { ok: true };
    }
    await new Promise<void>((resolve, reject) => {
      this.waiting.set(revision.id, resolve);
      signal.addEventListener("abort", () => reject(signal.reason), { once: true });
    });
    return { ok: true };
  }

  /** Whether a step of this revision is being held now. */
  holding(revisionId: string): boolean {
    return this.waiting.has(revisionId);
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
