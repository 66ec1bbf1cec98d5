import type { Tenant } from "./auth.js";
import type { CoreDeps } from "./context.js";
import { groupedInOrder, uuidsOnly } from "./batch-reads.js";
import { type KeysetArgs, type KeysetPage, pageOfRows } from "./pagination.js";
import { DEFAULT_PAGE_SIZE } from "./cursor-pages.js";
import { revisionPageRows, type RevisionSummary } from "./revision-reads.js";

/**
 * What the cursors of a deployment's revisions connection are signed for: that deployment's
 * connection alone, so that a cursor from another deployment's revisions is refused (a VALIDATION
 * error, as a forged cursor is) instead of read as a position among this one's. The status filter
 * is left out: the order is (created_at, id) under any filter, so a position means the same in all.
 */
export const revisionCursorPurpose = (deploymentId: string) => `graphql:revisions:${deploymentId.toLowerCase()}`;

/**
 * Revision pages of many deployments at once: for a page of deployments, each one's first N
 * revisions (newest first, optionally only some statuses, optionally past a cursor) cost one
 * statement instead of one query per deployment. The page semantics are keysetPage's.
 */
export class RevisionPages {
  constructor(private readonly deps: CoreDeps) {}

  /**
   * With `probe` false the pages read no row past their end, so their hasNextPage (hasPreviousPage
   * backward) is false whatever follows: for a caller that will not show it (a GraphQL selection
   * without pageInfo), which saves a sixth of the rows of a dashboard's `first: 5`.
   */
  async pages(
    tenant: Tenant,
    deploymentIds: readonly string[],
    args: KeysetArgs,
    statuses?: readonly string[],
    probe = true,
  ): Promise<KeysetPage<RevisionSummary>[]> {
    const ids = uuidsOnly(deploymentIds);
    const backward = args.last !== undefined && args.first === undefined;
    const size = backward ? args.last! : (args.first ?? DEFAULT_PAGE_SIZE);
    const rows = ids.length === 0 ? [] : await this.rows(tenant, ids, args, statuses, backward, probe ? size + 1 : size);
    return groupedInOrder(deploymentIds, rows, (row) => row.deploymentId).map((group) => pageOfRows(group, args, size, backward));
  }

  /** How many revisions (of these statuses) each deployment has, in one grouped statement. */
  async counts(tenant: Tenant, deploymentIds: readonly string[], statuses?: readonly string[]): Promise<number[]> {
    const ids = uuidsOnly(deploymentIds);
    const groups =
      ids.length === 0
        ? []
        : await this.deps.data(tenant).revision.groupBy({
            by: ["deploymentId"],
            where: { deploymentId: { in: ids }, ...(statuses && { status: { in: [...statuses] } }) },
            _count: { _all: true },
          });
    const byDeployment = new Map(groups.map((g) => [g.deploymentId, g._count._all]));
    return deploymentIds.map((id) => byDeployment.get(id.toLowerCase()) ?? 0);
  }

  private rows(
    tenant: Tenant,
    ids: string[],
    args: KeysetArgs,
    statuses: readonly string[] | undefined,
    backward: boolean,
    take: number,
  ): Promise<RevisionSummary[]> {
    return revisionPageRows(this.deps, tenant.workspaceId, { ids, statuses, after: args.after, before: args.before, backward, take });
  }
}
