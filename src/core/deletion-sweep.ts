import type { Logger } from "../logger.js";
import { PeriodicTask } from "../periodic.js";
import type { CoreDeps } from "./context.js";
import { DELETING, finishDeleting } from "./deployment-status.js";

/** How long a deployment stays AWAITING_DELETE before the sweep finishes its deletion: a DELETE in progress takes far less. */
export const DELETE_GRACE_MS = 30_000;
/** How often the pipeline worker's sweep looks for deletions left half done. */
export const DELETE_SWEEP_EVERY_MS = 10_000;
/** Deployments finished per sweep at most; the next sweep takes the rest. */
const SWEEP_BATCH = 100;

/**
 * Finishes deletions left half done. DELETE marks deployments AWAITING_DELETE (published), then
 * deletes their rows in a second transaction; a process that dies between the two, or a database
 * lost in between, leaves them AWAITING_DELETE for ever, refusing changes but still listed. The sweep
 * deletes those whose status changed more than `graceMs` ago through the same second half
 * (finishDeleting). Every replica's worker runs one: two on one deployment are safe (one deletes it,
 * the other finds it gone).
 */
export class DeletionSweeper extends PeriodicTask<number> {
  constructor(
    private readonly deps: CoreDeps,
    logger: Logger,
    private readonly graceMs: number = DELETE_GRACE_MS,
  ) {
    super("deployments: deletion sweep", logger);
  }

  /** One sweep: resolves with the deployments it deleted. */
  protected async perform(): Promise<number> {
    let total = 0;
    try {
      // Nothing else changes a deployment being deleted, so updated_at is when it became AWAITING_DELETE.
      const cutoff = new Date(Date.now() - this.graceMs);
      const left = await this.deps.prisma.deployment.findMany({
        where: { status: DELETING, updatedAt: { lt: cutoff } },
        select: { id: true, workspaceId: true },
        orderBy: { id: "asc" },
        take: SWEEP_BATCH,
      });
      // One at a time: a sweep never holds one deployment's lock while waiting for another's. One
      // that fails is told and passed over, so that it cannot hold back every one behind it.
      for (const { id, workspaceId } of left) {
        try {
          const deleted = await finishDeleting(this.deps, { workspaceId }, [id]);
          if (deleted.length === 0) continue; // another replica's sweep (or a repeated DELETE) finished it
          total++;
          this.logger.info({ deployment_id: id, workspace_id: workspaceId, awaiting_delete_before: cutoff.toISOString() }, "deployments: finished deleting a deployment left AWAITING_DELETE");
        } catch (err) {
          this.logger.warn({ err, deployment_id: id }, "deployments: finishing the deletion of a deployment failed; the next sweep retries");
        }
      }
    } catch (err) {
      this.logger.warn({ err, deleted: total }, "deployments: looking for deletions left half done failed; the next sweep retries");
    }
    return total;
  }
}
