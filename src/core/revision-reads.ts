import { Prisma, type Revision } from "../generated/prisma/client.js";
import { statement, tupleReader } from "../db/prepared.js";
import type { CoreDeps } from "./context.js";

/** Every column is the snake_case of its field (schema.prisma's @map convention). */
const column = (field: string) => field.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
const REVISION_FIELDS = Object.values(Prisma.RevisionScalarFieldEnum);
/** The revision's columns under their field names: rows shaped as Prisma's Revision. */
const columns = (alias: string) => REVISION_FIELDS.map((f) => `${alias}.${column(f)} AS "${f}"`).join(", ");
/** A revision read as a tuple of columns() (tupleReader says why). */
const revisionOf = tupleReader<Revision>(REVISION_FIELDS);

/**
 * What most reads of a revision show (its status, source revision config and times), without the
 * JSON snapshot of the source config, the sealed secrets, the build report and the pipeline's lease:
 * a page of 100 deployments with 5 revisions each parsed 22 columns of 600 rows for 10 of them.
 */
export const SUMMARY_FIELDS = [
  "id",
  "deploymentId",
  "workspaceId",
  "status",
  "statusMessage",
  "source",
  "sourceRevisionConfig",
  "repoCommitSha",
  "repoCommitTitle",
  "createdAt",
  "updatedAt",
] as const satisfies readonly (keyof Revision)[];
export type RevisionSummary = Pick<Revision, (typeof SUMMARY_FIELDS)[number]>;
const summaryColumns = (alias: string) => SUMMARY_FIELDS.map((f) => `${alias}.${column(f)} AS "${f}"`).join(", ");
/** A summary read as a tuple of summaryColumns(). */
const summaryOf = tupleReader<RevisionSummary>(SUMMARY_FIELDS);

const SUMMARIES_BY_IDS = statement(
  "revision_summaries_by_ids",
  `SELECT ${summaryColumns("r")} FROM revisions r WHERE r.workspace_id = $1::uuid AND r.id = ANY($2::uuid[])`,
);

/** The summaries of the workspace's revisions among `ids` (valid, lower-case uuids): one prepared statement. */
export async function revisionSummariesByIds(deps: Pick<CoreDeps, "prepared">, workspaceId: string, ids: string[]): Promise<RevisionSummary[]> {
  return (await deps.prepared.tuples(SUMMARIES_BY_IDS, [workspaceId, ids])).map(summaryOf);
}

const BY_IDS = statement("revisions_by_ids", `SELECT ${columns("r")} FROM revisions r WHERE r.workspace_id = $1::uuid AND r.id = ANY($2::uuid[])`);

/** The workspace's revisions among `ids` (valid, lower-case uuids), in no particular order: one prepared statement. */
export async function revisionRowsByIds(deps: Pick<CoreDeps, "prepared">, workspaceId: string, ids: string[]): Promise<Revision[]> {
  return (await deps.prepared.tuples(BY_IDS, [workspaceId, ids])).map(revisionOf);
}

/**
 * Per deployment, its first `take` revisions in (created_at, id) order, DESC (forward) or ASC
 * (backward, from `before`), optionally only some statuses and within the cursors: the first rows
 * of its (deployment_id, created_at DESC, id DESC) index each. Two prepared statements (one per
 * direction) whose optional conditions are null parameters.
 *
 * The workspace is checked on the rows each deployment's read returns, outside it: inside, a generic
 * plan (a named statement's, after a few runs) could AND each deployment's index with the whole
 * workspace's (every revision of it, read again for each of 100 deployments: 16 ms of PostgreSQL per
 * dashboard page at 6,000 revisions). A revision is in its deployment's workspace, so the check
 * removes nothing of the caller's; it keeps another workspace's revisions out whatever ids are given.
 */
function pageStatement(direction: "ASC" | "DESC") {
  return statement(
    `revision_pages_${direction.toLowerCase()}`,
    `SELECT page.* FROM unnest($2::uuid[]) WITH ORDINALITY AS d(id, ord)
     CROSS JOIN LATERAL (
       SELECT ${summaryColumns("r")} FROM revisions r
       WHERE r.deployment_id = d.id
         AND ($3::text[] IS NULL OR r.status = ANY($3::text[]))
         AND ($4::timestamptz IS NULL OR (r.created_at, r.id) < ($4::timestamptz, $5::uuid))
         AND ($6::timestamptz IS NULL OR (r.created_at, r.id) > ($6::timestamptz, $7::uuid))
       ORDER BY r.created_at ${direction}, r.id ${direction}
       LIMIT $8
     ) page
     WHERE page."workspaceId" = $1::uuid
     ORDER BY d.ord, page."createdAt" ${direction}, page.id ${direction}`,
  );
}
const PAGES = { ASC: pageStatement("ASC"), DESC: pageStatement("DESC") };

export interface RevisionPageQuery {
  ids: string[];
  statuses: readonly string[] | undefined;
  after: { createdAt: Date; id: string } | undefined;
  before: { createdAt: Date; id: string } | undefined;
  backward: boolean;
  take: number;
}

/** The summaries of each deployment's page of revisions. */
export async function revisionPageRows(deps: Pick<CoreDeps, "prepared">, workspaceId: string, q: RevisionPageQuery): Promise<RevisionSummary[]> {
  const tuples = await deps.prepared.tuples(PAGES[q.backward ? "ASC" : "DESC"], [
    workspaceId,
    q.ids,
    q.statuses ? [...q.statuses] : null,
    q.after?.createdAt ?? null,
    q.after?.id ?? null,
    q.before?.createdAt ?? null,
    q.before?.id ?? null,
    q.take,
  ]);
  return tuples.map(summaryOf);
}

/**
 * One entry of a deployment's revision event log, with its revision as it is in the same snapshot:
 * a new revision (fromStatus null) or a status change.
 */
export interface RevisionLogEntry {
  eventId: bigint;
  fromStatus: string | null;
  toStatus: string;
  revision: Revision;
}

/*
 * A deployment's log entries are written under its row lock (revision creation and every transition
 * take it), so their ids grow in commit order: the entries after the last one seen are exactly what
 * committed since, whatever notifications were lost. Read through the deployment's own (deployment_id,
 * id) index of revision_events: what is new, not every revision the deployment ever had. The
 * workspace is checked on the deployment's row (its primary key), never on the revisions': a generic
 * plan could read the whole workspace's revisions.
 */
const LAST_ENTRY = statement(
  "deployment_last_revision_event",
  `SELECT (SELECT e.id FROM revision_events e WHERE e.deployment_id = d.id ORDER BY e.id DESC LIMIT 1)::text AS "eventId"
   FROM deployments d
   WHERE d.id = $2::uuid AND d.workspace_id = $1::uuid`,
);

const ENTRIES_SINCE = statement(
  "deployment_revision_events_since",
  `SELECT e.id::text AS "eventId", e.from_status AS "fromStatus", e.to_status AS "toStatus", ${columns("r")}
   FROM deployments d
   CROSS JOIN LATERAL (
     SELECT e.id, e.revision_id, e.from_status, e.to_status FROM revision_events e
     WHERE e.deployment_id = d.id AND e.id > $3::bigint ORDER BY e.id LIMIT $4
   ) e
   JOIN revisions r ON r.id = e.revision_id
   WHERE d.id = $2::uuid AND d.workspace_id = $1::uuid
   ORDER BY e.id`,
);

/** The id of the newest entry of the deployment's revision event log (0 for none): one prepared statement. */
export async function lastDeploymentEntryId(deps: Pick<CoreDeps, "prepared">, workspaceId: string, deploymentId: string): Promise<bigint> {
  const [row] = await deps.prepared.rows<{ eventId: string | null }>(LAST_ENTRY, [workspaceId, deploymentId]);
  return row?.eventId ? BigInt(row.eventId) : 0n;
}

/** The deployment's revision log entries after `afterId`, oldest first, at most `take`: one prepared statement. */
export async function deploymentEntriesSince(
  deps: Pick<CoreDeps, "prepared">,
  workspaceId: string,
  deploymentId: string,
  afterId: bigint,
  take: number,
): Promise<RevisionLogEntry[]> {
  const rows = await deps.prepared.rows<Revision & { eventId: string; fromStatus: string | null; toStatus: string }>(ENTRIES_SINCE, [
    workspaceId,
    deploymentId,
    afterId.toString(),
    take,
  ]);
  return rows.map(({ eventId, fromStatus, toStatus, ...revision }) => ({ eventId: BigInt(eventId), fromStatus, toStatus, revision }));
}
