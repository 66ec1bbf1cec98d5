import { type Deployment, Prisma } from "../generated/prisma/client.js";
import type { PrismaClient } from "../db/client.js";
import { REVISION_CONFIG_COLUMNS, type RevisionConfig } from "./revisions.js";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** Every column is the snake_case of its field (schema.prisma's @map convention). */
const column = (field: string) => field.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

const LATEST = "latest.";
/** The deployment's columns under their field names, then its latest revision's config under "latest.<field>". */
const SELECTED = Prisma.raw(
  [
    ...Object.values(Prisma.DeploymentScalarFieldEnum).map((f) => `d.${column(f)} AS "${f}"`),
    ...Object.keys(REVISION_CONFIG_COLUMNS).map((f) => `r.${column(f)} AS "${LATEST}${f}"`),
  ].join(", "),
);

/**
 * A deployment of the workspace and what it shows of its latest revision, in one statement (a REST
 * GET made two: on the hottest read, each statement is a round trip and a good part of the
 * request's CPU). Null when the workspace has no such deployment.
 */
export async function deploymentWithLatestConfig(
  prisma: PrismaClient,
  workspaceId: string,
  id: string,
): Promise<(Deployment & { latestRevision: RevisionConfig | null }) | null> {
  if (!UUID.test(id)) return null;
  const [row] = await prisma.$queryRaw<Record<string, unknown>[]>`
    SELECT ${SELECTED}
    FROM deployments d LEFT JOIN revisions r ON r.id = d.latest_revision_id
    WHERE d.id = ${id}::uuid AND d.workspace_id = ${workspaceId}::uuid`;
  if (!row) return null;
  const deployment: Record<string, unknown> = {};
  const latest: Record<string, unknown> = {};
  for (const key in row) {
    if (key.startsWith(LATEST)) latest[key.slice(LATEST.length)] = row[key];
    else deployment[key] = row[key];
  }
  return { ...(deployment as Deployment), latestRevision: latest.id == null ? null : (latest as RevisionConfig) };
}
