import { type Deployment, Prisma } from "../generated/prisma/client.js";
import { statement, tupleReader } from "../db/prepared.js";
import type { CoreDeps } from "./context.js";
import type { DeploymentFilter } from "./schemas/deployment.js";
import { REVISION_CONFIG_COLUMNS, type RevisionConfig } from "./revisions.js";
import { type RevisionSummary, SUMMARY_FIELDS } from "./revision-reads.js";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** Every column is the snake_case of its field (schema.prisma's @map convention). */
const column = (field: string) => field.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/** A deployment with what REST shows of its latest revision. */
export type DeploymentWithLatest = Deployment & { latestRevision: RevisionConfig | null };

const DEPLOYMENT_FIELDS = Object.values(Prisma.DeploymentScalarFieldEnum);
/** What REST shows of a latest revision: its config. */
const CONFIG_FIELDS = Object.keys(REVISION_CONFIG_COLUMNS);
/**
 * The columns the reads below select, by position: rows come back as tuples (tupleReader) read in
 * the order of their field lists, so no column needs a name of its own.
 */
const DEPLOYMENT = DEPLOYMENT_FIELDS.map((f) => `d.${column(f)}`).join(", ");
/** The deployment's columns, then its latest revision's `fields`. */
const deploymentAndLatest = (fields: readonly string[]) => `${DEPLOYMENT}, ${fields.map((f) => `r.${column(f)}`).join(", ")}`;
const SELECTED = deploymentAndLatest(CONFIG_FIELDS);
const FROM = "FROM deployments d LEFT JOIN revisions r ON r.id = d.latest_revision_id";

const BY_ID = statement("deployment_with_latest_by_id", `SELECT ${SELECTED} ${FROM} WHERE d.id = $1::uuid AND d.workspace_id = $2::uuid`);
/** The unfiltered listing, newest first: the (workspace_id, created_at DESC, id DESC) index. */
const PAGE = statement(
  "deployments_with_latest_page",
  `SELECT ${SELECTED} ${FROM} WHERE d.workspace_id = $1::uuid ORDER BY d.created_at DESC, d.id DESC LIMIT $2 OFFSET $3`,
);

/** A deployment row read as a tuple, its columns in DEPLOYMENT_FIELDS order. */
const deploymentOf = tupleReader<Deployment>(DEPLOYMENT_FIELDS);

/**
 * Reads a joined row (the deployment's columns, then its latest revision's `fields`) as the
 * deployment with `latestRevision`, null when it has none. Field lists fixed in advance: every
 * object of a page gets the same shape.
 */
function joined<L>(fields: readonly string[]) {
  const latestOf = tupleReader<L>(fields, DEPLOYMENT_FIELDS.length);
  const latestId = DEPLOYMENT_FIELDS.length + fields.indexOf("id");
  if (latestId < DEPLOYMENT_FIELDS.length) throw new Error("a latest revision's fields must include its id");
  return (tuple: readonly unknown[]): Deployment & { latestRevision: L | null } => {
    const deployment = deploymentOf(tuple) as Deployment & { latestRevision: L | null };
    deployment.latestRevision = tuple[latestId] != null ? latestOf(tuple) : null;
    return deployment;
  };
}
const withLatestConfig = joined<RevisionConfig>(CONFIG_FIELDS);
const withLatestSummary = joined<RevisionSummary>(SUMMARY_FIELDS);

/**
 * A deployment of the workspace and what it shows of its latest revision, in one prepared statement
 * (the hottest read: parsed and planned once per connection). Null when the workspace has no such
 * deployment.
 */
export async function deploymentWithLatestConfig(deps: Pick<CoreDeps, "prepared">, workspaceId: string, id: string): Promise<DeploymentWithLatest | null> {
  if (!UUID.test(id)) return null;
  const [row] = await deps.prepared.tuples(BY_ID, [id, workspaceId]);
  return row ? withLatestConfig(row) : null;
}

/** A page of the workspace's deployments, newest first, each with its latest revision's config: one prepared statement. */
export async function deploymentPageWithLatestConfig(
  deps: Pick<CoreDeps, "prepared">,
  workspaceId: string,
  limit: number,
  offset: number,
): Promise<DeploymentWithLatest[]> {
  const rows = await deps.prepared.tuples(PAGE, [workspaceId, limit, offset]);
  return rows.map(withLatestConfig);
}

/** The unfiltered forward keyset page, newest first, optionally after a position: the (workspace_id, created_at DESC, id DESC) index. */
function forward(name: string, select: string, from: string) {
  return {
    first: statement(`${name}_first`, `SELECT ${select} ${from} WHERE d.workspace_id = $1::uuid ORDER BY d.created_at DESC, d.id DESC LIMIT $2`),
    after: statement(
      `${name}_after`,
      `SELECT ${select} ${from} WHERE d.workspace_id = $1::uuid AND (d.created_at, d.id) < ($3::timestamptz, $4::uuid)
       ORDER BY d.created_at DESC, d.id DESC LIMIT $2`,
    ),
  };
}
const FORWARD = forward("deployments", DEPLOYMENT, "FROM deployments d");

/** What a page may read of each deployment's latest revision along with it: its config, or its summary. */
export interface LatestRevisionReads {
  config: RevisionConfig;
  summary: RevisionSummary;
}
export type LatestRevisionRead = keyof LatestRevisionReads;
/** A deployment with what was read of its latest revision. */
export type DeploymentWithLatestRead<R extends LatestRevisionRead> = Deployment & { latestRevision: LatestRevisionReads[R] | null };

const FORWARD_WITH_LATEST = {
  config: { statements: forward("deployments_with_latest_config", deploymentAndLatest(CONFIG_FIELDS), FROM), row: withLatestConfig },
  summary: { statements: forward("deployments_with_latest_summary", deploymentAndLatest(SUMMARY_FIELDS), FROM), row: withLatestSummary },
};

/**
 * The rows of an unfiltered forward keyset page of the workspace's deployments (newest first,
 * optionally after a position): `take` rows at most, one prepared statement.
 */
export async function deploymentRowsForward(
  deps: Pick<CoreDeps, "prepared">,
  workspaceId: string,
  after: { createdAt: Date; id: string } | undefined,
  take: number,
): Promise<Deployment[]> {
  const rows = await (after
    ? deps.prepared.tuples(FORWARD.after, [workspaceId, take, after.createdAt, after.id])
    : deps.prepared.tuples(FORWARD.first, [workspaceId, take]));
  return rows.map(deploymentOf);
}

/** deploymentRowsForward, each row with its latest revision's config or summary (`read`), joined in the same statement. */
export async function deploymentRowsForwardWithLatest<R extends LatestRevisionRead>(
  deps: Pick<CoreDeps, "prepared">,
  workspaceId: string,
  after: { createdAt: Date; id: string } | undefined,
  take: number,
  read: R,
): Promise<DeploymentWithLatestRead<R>[]> {
  const { statements, row } = FORWARD_WITH_LATEST[read];
  const rows = await (after
    ? deps.prepared.tuples(statements.after, [workspaceId, take, after.createdAt, after.id])
    : deps.prepared.tuples(statements.first, [workspaceId, take]));
  return rows.map(row) as DeploymentWithLatestRead<R>[];
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
