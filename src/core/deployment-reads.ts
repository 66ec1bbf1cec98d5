import { type Deployment, Prisma } from "../generated/prisma/client.js";
import { statement } from "../db/prepared.js";
import type { CoreDeps } from "./context.js";
import type { DeploymentFilter } from "./schemas/deployment.js";
import { REVISION_CONFIG_COLUMNS, type RevisionConfig } from "./revisions.js";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** Every column is the snake_case of its field (schema.prisma's @map convention). */
const column = (field: string) => field.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/** A deployment with what REST shows of its latest revision. */
export type DeploymentWithLatest = Deployment & { latestRevision: RevisionConfig | null };

const LATEST = "latest.";
/** The deployment's columns under their field names, then its latest revision's config under "latest.<field>". */
const SELECTED = [
  ...Object.values(Prisma.DeploymentScalarFieldEnum).map((f) => `d.${column(f)} AS "${f}"`),
  ...Object.keys(REVISION_CONFIG_COLUMNS).map((f) => `r.${column(f)} AS "${LATEST}${f}"`),
].join(", ");
const FROM = "FROM deployments d LEFT JOIN revisions r ON r.id = d.latest_revision_id";

const BY_ID = statement("deployment_with_latest_by_id", `SELECT ${SELECTED} ${FROM} WHERE d.id = $1::uuid AND d.workspace_id = $2::uuid`);
/** The unfiltered listing, newest first: the (workspace_id, created_at DESC, id DESC) index. */
const PAGE = statement(
  "deployments_with_latest_page",
  `SELECT ${SELECTED} ${FROM} WHERE d.workspace_id = $1::uuid ORDER BY d.created_at DESC, d.id DESC LIMIT $2 OFFSET $3`,
);

function split(row: Record<string, unknown>): DeploymentWithLatest {
  const deployment: Record<string, unknown> = {};
  const latest: Record<string, unknown> = {};
  for (const key in row) {
    if (key.startsWith(LATEST)) latest[key.slice(LATEST.length)] = row[key];
    else deployment[key] = row[key];
  }
  return { ...(deployment as Deployment), latestRevision: latest.id == null ? null : (latest as RevisionConfig) };
}

/**
 * A deployment of the workspace and what it shows of its latest revision, in one prepared statement
 * (the hottest read: parsed and planned once per connection). Null when the workspace has no such
 * deployment.
 */
export async function deploymentWithLatestConfig(deps: Pick<CoreDeps, "prepared">, workspaceId: string, id: string): Promise<DeploymentWithLatest | null> {
  if (!UUID.test(id)) return null;
  const [row] = await deps.prepared.rows<Record<string, unknown>>(BY_ID, [id, workspaceId]);
  return row ? split(row) : null;
}

/** A page of the workspace's deployments, newest first, each with its latest revision's config: one prepared statement. */
export async function deploymentPageWithLatestConfig(
  deps: Pick<CoreDeps, "prepared">,
  workspaceId: string,
  limit: number,
  offset: number,
): Promise<DeploymentWithLatest[]> {
  const rows = await deps.prepared.rows<Record<string, unknown>>(PAGE, [workspaceId, limit, offset]);
  return rows.map(split);
}

/** The deployment's columns under their field names: rows shaped as Prisma's Deployment. */
const DEPLOYMENT = Object.values(Prisma.DeploymentScalarFieldEnum)
  .map((f) => `d.${column(f)} AS "${f}"`)
  .join(", ");
const FIRST = statement(
  "deployments_first",
  `SELECT ${DEPLOYMENT} FROM deployments d WHERE d.workspace_id = $1::uuid ORDER BY d.created_at DESC, d.id DESC LIMIT $2`,
);
const AFTER = statement(
  "deployments_after",
  `SELECT ${DEPLOYMENT} FROM deployments d WHERE d.workspace_id = $1::uuid AND (d.created_at, d.id) < ($3::timestamptz, $4::uuid)
   ORDER BY d.created_at DESC, d.id DESC LIMIT $2`,
);

/**
 * The rows of an unfiltered forward keyset page of the workspace's deployments (newest first,
 * optionally after a position): `take` rows at most, one prepared statement.
 */
export function deploymentRowsForward(
  deps: Pick<CoreDeps, "prepared">,
  workspaceId: string,
  after: { createdAt: Date; id: string } | undefined,
  take: number,
): Promise<Deployment[]> {
  return after
    ? deps.prepared.rows<Deployment>(AFTER, [workspaceId, take, after.createdAt, after.id])
    : deps.prepared.rows<Deployment>(FIRST, [workspaceId, take]);
}

/** Prisma `where` for the listing filters (the workspace is the door's, CoreDeps.data); shared by the REST and GraphQL faces. */
export function deploymentWhere(f: DeploymentFilter): Prisma.DeploymentWhereInput {
  const names: Prisma.DeploymentWhereInput[] = [];
  if (f.name !== undefined) names.push({ name: f.name });
  // Prisma passes `contains` to LIKE as is: escape its wildcards so that `_` and `%` match themselves.
  const substring = f.name_contains?.replace(/[\\%_]/g, "\\$&");
  if (substring !== undefined) names.push({ name: { contains: substring, mode: "insensitive" } });
  return {
    ...(names.length > 0 && { AND: names }),
    ...(f.status !== undefined && { status: f.status }),
    ...(f.remote_reconciled !== undefined && { remoteReconciled: f.remote_reconciled }),
    ...(f.tag_value_ids !== undefined && { tagValueIds: { hasEvery: f.tag_value_ids } }),
    ...(f.image_version !== undefined && { imageVersion: f.image_version }),
    ...(f.deployment_type !== undefined && { deploymentType: f.deployment_type }),
    ...(f.deployment_ids !== undefined && { id: { in: f.deployment_ids } }),
    ...(f.url !== undefined && { url: f.url }),
    // Agent filters match only deployments made for an agent ("agent mode").
    ...(f.agent_id !== undefined && { agentId: f.agent_id }),
    ...(f.agent_environment !== undefined && { agentEnvironment: f.agent_environment }),
  };
}
