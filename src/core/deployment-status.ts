import type { Tenant } from "./auth.js";
import type { CoreDeps } from "./context.js";
import { commitThenPublish } from "./publish.js";

/** A deployment's status while it is being deleted: it and its revisions change no more, and its rows go. */
export const DELETING = "AWAITING_DELETE" as const;

/**
 * First half of deleting deployments: marks those of the workspace among `ids` AWAITING_DELETE (which
 * refuses further changes to them) and publishes that, before their rows go. Returns the ids found.
 * The READY status is set by the transition that deploys a deployment's first revision.
 */
export async function markDeleting(deps: CoreDeps, tenant: Tenant, ids: string[]): Promise<string[]> {
  const { workspaceId } = tenant;
  const { found } = await commitThenPublish({ prisma: deps.data(tenant), events: deps.events }, async (tx) => {
    // Locked in id order, as finishDeleting locks them: bulk DELETEs of overlapping sets, in any
    // order, wait for one another instead of deadlocking.
    const rows = await tx.$queryRaw<{ id: string }[]>`
      SELECT id FROM deployments WHERE id = ANY(${ids}::uuid[]) AND workspace_id = ${workspaceId}::uuid ORDER BY id FOR UPDATE`;
    const found = rows.map((d) => d.id);
    if (found.length > 0) {
      await tx.deployment.updateMany({ where: { id: { in: found } }, data: { status: DELETING } });
    }
    const events = found.map((deploymentId) => ({ type: "deployment.status" as const, workspaceId, deploymentId, status: DELETING }));
    return { found, events };
  });
  return found;
}

/**
 * Second half: deletes those of the workspace among `ids` still AWAITING_DELETE, with everything that
 * goes with them (revisions, their events and logs, uploads: ON DELETE CASCADE), and then the bytes
 * of a folder store. Returns the ids this call deleted. Run by DELETE after markDeleting, and by the
 * sweep (DeletionSweeper) for a deletion whose second half never ran. Two at once on one deployment
 * are safe: the second waits for the first's row lock, then finds nothing to delete.
 */
export async function finishDeleting(deps: CoreDeps, tenant: Pick<Tenant, "workspaceId">, ids: string[]): Promise<string[]> {
  if (ids.length === 0) return [];
  const data = deps.data(tenant);
  const deleted = await data.$transaction(async (tx) => {
    // Locked in id order, so that deletions of overlapping sets (a bulk DELETE, sweeps on two replicas)
    // cannot deadlock; one that another deleted meanwhile is not returned once its lock is released.
    const rows = await tx.$queryRaw<{ id: string }[]>`
      SELECT id FROM deployments
      WHERE id = ANY(${ids}::uuid[]) AND workspace_id = ${tenant.workspaceId}::uuid AND status = 'AWAITING_DELETE'
      ORDER BY id FOR UPDATE`;
    const found = rows.map((d) => d.id);
    if (found.length > 0) {
      await tx.deployment.deleteMany({ where: { id: { in: found } } });
      // After the deployments: a log writer still adding to one has committed by then (the cascade to
      // its revisions waited for it), and its count is removed with the rest.
      await tx.logLineCounter.deleteMany({ where: { deploymentId: { in: found } } });
    }
    return found;
  });
  // Their uploads' rows went with them; the bytes of a folder store go now.
  if (deleted.length > 0) await deps.blobs.removeDeployments(deleted);
  return deleted;
}
