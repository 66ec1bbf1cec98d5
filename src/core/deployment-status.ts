import type { DomainEvent } from "../events/types.js";
import type { CoreDeps } from "./context.js";
import { publishEvents } from "./transitions.js";

/**
 * First half of deleting deployments: marks those of the workspace among `ids` AWAITING_DELETE (which
 * refuses further changes to them) and publishes that, before their rows go. Returns the ids found.
 * The READY status is set by the transition that deploys a deployment's first revision.
 */
export async function markDeleting(deps: CoreDeps, workspaceId: string, ids: string[]): Promise<string[]> {
  const found = await deps.prisma.$transaction(async (tx) => {
    const rows = await tx.deployment.findMany({ where: { id: { in: ids }, workspaceId }, select: { id: true } });
    const foundIds = rows.map((d) => d.id);
    if (foundIds.length > 0) {
      await tx.deployment.updateMany({ where: { id: { in: foundIds }, workspaceId }, data: { status: "AWAITING_DELETE" } });
    }
    return foundIds;
  });
  const events: DomainEvent[] = found.map((deploymentId) => ({
    type: "deployment.status",
    workspaceId,
    deploymentId,
    status: "AWAITING_DELETE",
  }));
  await publishEvents(deps.events, events);
  return found;
}
