import type { Tenant } from "./auth.js";
import type { CoreDeps } from "./context.js";
import { commitThenPublish } from "./publish.js";

/**
 * First half of deleting deployments: marks those of the workspace among `ids` AWAITING_DELETE (which
 * refuses further changes to them) and publishes that, before their rows go. Returns the ids found.
 * The READY status is set by the transition that deploys a deployment's first revision.
 */
export async function markDeleting(deps: CoreDeps, tenant: Tenant, ids: string[]): Promise<string[]> {
  const { workspaceId } = tenant;
  const { found } = await commitThenPublish({ prisma: deps.data(tenant), events: deps.events }, async (tx) => {
    const rows = await tx.deployment.findMany({ where: { id: { in: ids } }, select: { id: true } });
    const found = rows.map((d) => d.id);
    if (found.length > 0) {
      await tx.deployment.updateMany({ where: { id: { in: found } }, data: { status: "AWAITING_DELETE" } });
    }
    const events = found.map((deploymentId) => ({ type: "deployment.status" as const, workspaceId, deploymentId, status: "AWAITING_DELETE" as const }));
    return { found, events };
  });
  return found;
}
