import { Prisma, type Revision } from "../generated/prisma/client.js";
import type { Tenant } from "./auth.js";
import type { CoreDeps } from "./context.js";
import { uuidsOnly } from "./graph-queries.js";
import { type KeysetArgs, type KeysetPage, pageOfRows } from "./pagination.js";
import { DEFAULT_PAGE_SIZE } from "./relay.js";

/** `revisions` columns as raw SQL returns them → the model's field names, each worked out once. */
const fieldNames = new Map<string, string>();
function fieldOf(column: string): string {
  let name = fieldNames.get(column);
  if (name === undefined) fieldNames.set(column, (name = column.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase())));
  return name;
}

function toRevision(row: Record<string, unknown>): Revision {
  const out: Record<string, unknown> = {};
  for (const column in row) out[fieldOf(column)] = row[column];
  return out as unknown as Revision;
}

/**
 * Revision pages of many deployments at once: for a page of deployments, each one's first N
 * revisions (newest first, optionally only some statuses, optionally past a cursor) cost one
 * statement instead of one query per deployment. The page semantics are keysetPage's.
 */
export class RevisionPages {
  constructor(private readonly deps: CoreDeps) {}

  async pages(
    tenant: Tenant,
    deploymentIds: readonly string[],
    args: KeysetArgs,
    statuses?: readonly string[],
  ): Promise<KeysetPage<Revision>[]> {
    const ids = uuidsOnly(deploymentIds);
    const backward = args.last !== undefined && args.first === undefined;
    const size = backward ? args.last! : (args.first ?? DEFAULT_PAGE_SIZE);
    const rows = ids.length === 0 ? [] : await this.rows(tenant, ids, args, statuses, backward, size + 1);
    const byDeployment = new Map<string, Revision[]>();
    for (const row of rows) {
      const list = byDeployment.get(row.deploymentId);
      if (list) list.push(row);
      else byDeployment.set(row.deploymentId, [row]);
    }
    return deploymentIds.map((id) => pageOfRows(byDeployment.get(id.toLowerCase()) ?? [], args, size, backward));
  }

  /** How many revisions (of these statuses) each deployment has, in one grouped statement. */
  async counts(tenant: Tenant, deploymentIds: readonly string[], statuses?: readonly string[]): Promise<number[]> {
    const ids = uuidsOnly(deploymentIds);
    const groups =
      ids.length === 0
        ? []
        : await this.deps.prisma.revision.groupBy({
            by: ["deploymentId"],
            where: { workspaceId: tenant.workspaceId, deploymentId: { in: ids }, ...(statuses && { status: { in: [...statuses] } }) },
            _count: { _all: true },
          });
    const byDeployment = new Map(groups.map((g) => [g.deploymentId, g._count._all]));
    return deploymentIds.map((id) => byDeployment.get(id.toLowerCase()) ?? 0);
  }

  private async rows(
    tenant: Tenant,
    ids: string[],
    args: KeysetArgs,
    statuses: readonly string[] | undefined,
    backward: boolean,
    take: number,
  ): Promise<Revision[]> {
    const conditions = [Prisma.sql`r.workspace_id = ${tenant.workspaceId}::uuid`, Prisma.sql`r.deployment_id = d.id`];
    if (statuses) conditions.push(Prisma.sql`r.status = ANY(${[...statuses]}::text[])`);
    // (created_at DESC, id DESC) order: "after" a position is lower in it, "before" is higher.
    if (args.after) conditions.push(Prisma.sql`(r.created_at, r.id) < (${args.after.createdAt}::timestamptz, ${args.after.id}::uuid)`);
    if (args.before) conditions.push(Prisma.sql`(r.created_at, r.id) > (${args.before.createdAt}::timestamptz, ${args.before.id}::uuid)`);
    const direction = Prisma.raw(backward ? "ASC" : "DESC");
    // Per deployment, the first `take` rows of its (deployment_id, created_at DESC, id DESC) index:
    // n rows read each, however many revisions the deployments have.
    const rows = await this.deps.prisma.$queryRaw<Record<string, unknown>[]>(Prisma.sql`
      SELECT page.* FROM unnest(${ids}::uuid[]) WITH ORDINALITY AS d(id, ord)
      CROSS JOIN LATERAL (
        SELECT r.* FROM revisions r
        WHERE ${Prisma.join(conditions, " AND ")}
        ORDER BY r.created_at ${direction}, r.id ${direction}
        LIMIT ${take}
      ) page
      ORDER BY d.ord, page.created_at ${direction}, page.id ${direction}`);
    return rows.map(toRevision);
  }
}
