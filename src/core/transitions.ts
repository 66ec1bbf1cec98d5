import type { Prisma, Revision } from "../generated/prisma/client.js";
import type { DomainEvent } from "../events/types.js";
import {
  canBeSkipped,
  isTerminal,
  type RevisionEvent,
  type RevisionStatus,
  routeFor,
  SKIPPABLE_STATUSES,
  transition,
} from "./revision-machine.js";
import type { CoreDeps } from "./context.js";
import { badRequest, CoreError, notFound } from "./errors.js";
import { trimRevisionLogs } from "./log-retention.js";
import { appendLines, statusLine } from "./log-writer.js";
import { commitThenPublish, type Tx } from "./publish.js";
import { DELETING } from "./deployment-status.js";

export type { Tx };

export interface TransitionRequest {
  revisionId: string;
  event: RevisionEvent;
  /** status_message after the change; a default per status when omitted. */
  message?: string;
  /** When the pipeline's next step is due. Defaults: now for a non-terminal status, null for a terminal one. */
  nextStepAt?: Date | null;
  /** Confine to one workspace (user-driven changes); the pipeline passes none. */
  workspaceId?: string;
  /** Apply only if the revision is still in this status (the pipeline's guard against double work). */
  expectedFrom?: RevisionStatus;
  /** Apply only while this pipeline worker holds the revision's lease. */
  leaseOwner?: string;
  /** What the step found out, written with the status (the resolved commit of a codehost source, the build's findings). */
  patch?: { repoCommitSha?: string; repoCommitTitle?: string; imageDigest?: string | null; buildReport?: Prisma.InputJsonValue };
}

export interface TransitionResult {
  revision: Revision;
  from: RevisionStatus;
  to: RevisionStatus;
  /** To publish once the transaction has committed (commitThenPublish). */
  events: DomainEvent[];
}

/** A new revision's status message, and its first line (core/revisions.ts). */
export const CREATED_MESSAGE = "Revision created";

const DEFAULT_MESSAGES: Partial<Record<RevisionStatus, string>> = {
  CREATING: CREATED_MESSAGE,
  QUEUED: "Queued",
  AWAITING_BUILD: "Waiting for a builder",
  BUILDING: "Building the image",
  AWAITING_DEPLOY: "Waiting to deploy",
  DEPLOYING: "Deploying",
  DEPLOYED: "Deployed",
  SKIPPED: "Skipped: a newer revision of this deployment was created",
  INTERRUPTED: "Interrupted by a user",
};

/**
 * Every revision status change goes through here: one transaction writes the status, its event-log
 * row and its log line (and, on DEPLOYED, the deployment's active revision and READY status), guarded
 * by compare-and-set on the old status; after commit, one publication.
 */
export function applyTransition(deps: CoreDeps, req: TransitionRequest): Promise<TransitionResult> {
  return commitThenPublish(deps, (tx) => transitionInTx(tx, req));
}

/**
 * The transition itself, inside a caller's transaction (so that creating a revision and skipping the
 * ones it supersedes commit together). The caller publishes `events` after its commit.
 */
export async function transitionInTx(tx: Tx, req: TransitionRequest): Promise<TransitionResult> {
  const found = await tx.revision.findFirst({
    where: { id: req.revisionId, ...(req.workspaceId && { workspaceId: req.workspaceId }) },
    select: { deploymentId: true },
  });
  if (!found) throw notFound("Revision", req.revisionId);
  // Deployment first, then revision: the same lock order as the worker and revision creation, so a
  // user's interrupt and a pipeline step on one deployment serialise instead of deadlocking.
  // Once it is being deleted its revisions move no more (the worker drops its steps before this).
  if ((await lockDeploymentStatus(tx, found.deploymentId)) === DELETING) {
    throw badRequest(`Deployment ID ${found.deploymentId} is being deleted.`);
  }
  const current = await tx.revision.findUnique({ where: { id: req.revisionId } });
  if (!current) throw notFound("Revision", req.revisionId);
  const from = current.status as RevisionStatus;
  if (req.expectedFrom && req.expectedFrom !== from) {
    throw new CoreError("CONFLICT", `revision is ${from}, not ${req.expectedFrom}`);
  }
  if (req.leaseOwner !== undefined && current.leaseOwner !== req.leaseOwner) {
    throw new CoreError("CONFLICT", `revision ${current.id} is no longer leased by ${req.leaseOwner}`);
  }
  const next = transition(from, req.event, routeFor(current.source));
  if (!next.ok) throw badRequest(`Revision ${current.id} cannot be ${pastTense(req.event)}: ${next.reason}.`);
  const message = req.message ?? DEFAULT_MESSAGES[next.to] ?? "";
  const terminal = isTerminal(next.to);
  // Compare-and-set on the status, and on the lease when one is named: a lease taken over since the
  // read above (its worker stalled past it) makes this miss, not clear the new holder's lease.
  const { count } = await tx.revision.updateMany({
    where: { id: current.id, status: from, ...(req.leaseOwner !== undefined && { leaseOwner: req.leaseOwner }) },
    data: {
      status: next.to,
      statusMessage: message,
      nextStepAt: terminal ? null : (req.nextStepAt ?? new Date()),
      leaseOwner: null,
      leaseUntil: null,
      // The next status's step has not crashed yet (src/core/revision-leases.ts).
      stepCrashes: 0,
      stepCrashesAlone: 0,
      leaseTakenFrom: null,
      leaseTakenAlone: false,
      ...req.patch,
    },
  });
  if (count === 0) throw new CoreError("CONFLICT", `revision ${current.id} changed concurrently`);
  await tx.revisionEvent.create({ data: { revisionId: current.id, deploymentId: current.deploymentId, fromStatus: from, toStatus: next.to, message } });
  // Its line in the revision's log (a final status's line is the log's last), told with revision.status.
  await appendLines(tx, current.id, [statusLine(routeFor(current.source), from, next.to, message)], []);
  if (terminal) await trimRevisionLogs(tx, current.id);

  const events: DomainEvent[] = [
    {
      type: "revision.status",
      workspaceId: current.workspaceId,
      deploymentId: current.deploymentId,
      revisionId: current.id,
      status: next.to,
    },
  ];
  if (next.to === "DEPLOYED") {
    await tx.deployment.update({ where: { id: current.deploymentId }, data: { activeRevisionId: current.id } });
    // Its database is provisioned with the first deploy; a deployment being deleted stays so.
    const ready = await tx.deployment.updateMany({
      where: { id: current.deploymentId, status: "AWAITING_DATABASE" },
      data: { status: "READY" },
    });
    if (ready.count > 0) {
      events.push({ type: "deployment.status", workspaceId: current.workspaceId, deploymentId: current.deploymentId, status: "READY" });
    }
  }
  if (terminal) {
    // The deployment's slot is free: revisions waiting in the queue may go now rather than at their recheck.
    await tx.$executeRaw`UPDATE revisions SET next_step_at = now()
      WHERE deployment_id = ${current.deploymentId}::uuid AND status = 'QUEUED' AND next_step_at > now()`;
  }
  const revision = await tx.revision.findUniqueOrThrow({ where: { id: current.id } });
  return { revision, from, to: next.to, events };
}

/**
 * Makes every older revision of the deployment that has not started building SKIPPED, inside the
 * transaction that created `newer`. One that a worker moved on meanwhile is left alone: it is in
 * flight, and `newer` waits in the queue for it.
 */
export async function skipSuperseded(tx: Tx, newer: Pick<Revision, "id" | "deploymentId" | "createdAt">): Promise<DomainEvent[]> {
  await lockDeployment(tx, newer.deploymentId);
  const older = await tx.revision.findMany({
    where: {
      deploymentId: newer.deploymentId,
      status: { in: [...SKIPPABLE_STATUSES] },
      ...olderThan(newer),
    },
    select: { id: true, status: true, source: true },
  });
  const events: DomainEvent[] = [];
  for (const rev of older) {
    const status = rev.status as RevisionStatus;
    if (!canBeSkipped(status, routeFor(rev.source))) continue;
    const result = await transitionInTx(tx, {
      revisionId: rev.id,
      event: "skip",
      expectedFrom: status,
      message: `Skipped: revision ${newer.id}, created after it, supersedes it`,
    });
    events.push(...result.events);
  }
  return events;
}

/** Revisions created before `rev` in the listing order (created_at, then id). */
export const olderThan = (rev: Pick<Revision, "id" | "createdAt">) => ({
  OR: [{ createdAt: { lt: rev.createdAt } }, { createdAt: rev.createdAt, id: { lt: rev.id } }],
});

/** Revisions created after `rev` in the listing order (created_at, then id). */
export const newerThan = (rev: Pick<Revision, "id" | "createdAt">) => ({
  OR: [{ createdAt: { gt: rev.createdAt } }, { createdAt: rev.createdAt, id: { gt: rev.id } }],
});

/** Row lock on the deployment: serialises revision creation, pipeline decisions and transitions on it. */
export async function lockDeployment(tx: Tx, deploymentId: string): Promise<boolean> {
  return (await lockDeploymentStatus(tx, deploymentId)) !== null;
}

/** lockDeployment, answering the deployment's status (null: no such deployment). */
export async function lockDeploymentStatus(tx: Tx, deploymentId: string): Promise<string | null> {
  const rows = await tx.$queryRaw<{ status: string }[]>`SELECT status FROM deployments WHERE id = ${deploymentId}::uuid FOR UPDATE`;
  return rows[0]?.status ?? null;
}

const pastTense = (event: RevisionEvent) =>
  ({ advance: "advanced", fail: "failed", skip: "skipped", interrupt: "interrupted" })[event];
