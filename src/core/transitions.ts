import type { Revision } from "../generated/prisma/client.js";
import { type RevisionEvent, type RevisionStatus, routeFor, transition } from "../pipeline/machine.js";
import type { CoreDeps } from "./context.js";
import { badRequest, CoreError, notFound } from "./errors.js";

export interface TransitionRequest {
  revisionId: string;
  event: RevisionEvent;
  /** status_message after the change; a default per status when omitted. */
  message?: string;
  /** When the pipeline's next step for this revision is due; null when none (terminal). */
  nextStepAt?: Date | null;
  /** Confine to one workspace (user-driven changes); the pipeline passes none. */
  workspaceId?: string;
  /** Apply only if the revision is still in this status (the pipeline's guard against double work). */
  expectedFrom?: RevisionStatus;
}

export interface TransitionResult {
  revision: Revision;
  from: RevisionStatus;
  to: RevisionStatus;
}

const DEFAULT_MESSAGES: Partial<Record<RevisionStatus, string>> = {
  CREATING: "Revision created",
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
 * Every revision status change goes through here: one transaction writes the status and its event-log
 * row (and the deployment's active revision on DEPLOYED), guarded by compare-and-set on the old status;
 * after commit, one publication.
 */
export async function applyTransition(deps: CoreDeps, req: TransitionRequest): Promise<TransitionResult> {
  const result = await deps.prisma.$transaction(async (tx) => {
    const current = await tx.revision.findFirst({
      where: { id: req.revisionId, ...(req.workspaceId && { workspaceId: req.workspaceId }) },
    });
    if (!current) throw notFound("Revision", req.revisionId);
    const from = current.status as RevisionStatus;
    if (req.expectedFrom && req.expectedFrom !== from) {
      throw new CoreError("CONFLICT", `revision is ${from}, not ${req.expectedFrom}`);
    }
    const next = transition(from, req.event, routeFor(current.source));
    if (!next.ok) throw badRequest(`Revision ${current.id} cannot be ${pastTense(req.event)}: ${next.reason}.`);
    const message = req.message ?? DEFAULT_MESSAGES[next.to] ?? "";
    const { count } = await tx.revision.updateMany({
      where: { id: current.id, status: from },
      data: {
        status: next.to,
        statusMessage: message,
        ...(req.nextStepAt !== undefined && { nextStepAt: req.nextStepAt }),
        leaseOwner: null,
        leaseUntil: null,
      },
    });
    if (count === 0) throw new CoreError("CONFLICT", `revision ${current.id} changed concurrently`);
    await tx.revisionEvent.create({ data: { revisionId: current.id, fromStatus: from, toStatus: next.to, message } });
    if (next.to === "DEPLOYED") {
      await tx.deployment.update({ where: { id: current.deploymentId }, data: { activeRevisionId: current.id } });
    }
    const revision = await tx.revision.findUniqueOrThrow({ where: { id: current.id } });
    return { revision, from, to: next.to };
  });
  await deps.events.publish({
    type: "revision.status",
    workspaceId: result.revision.workspaceId,
    deploymentId: result.revision.deploymentId,
    revisionId: result.revision.id,
    status: result.to,
  });
  return result;
}

const pastTense = (event: RevisionEvent) =>
  ({ advance: "advanced", fail: "failed", skip: "skipped", interrupt: "interrupted" })[event];
