import { Prisma } from "../generated/prisma/client.js";
import type { PrismaClient } from "../db/client.js";
import { REVISION_STATUSES, TERMINAL_STATUSES } from "./revision-machine.js";
import type { Position } from "./pagination.js";
import { levelsFrom, type LogFilter, type LogKind, type LogLevel } from "./schemas/logs.js";

/**
 * One line of a revision's build or deploy log. `id` is its number in its deployment's log, as a
 * decimal string (1, 2, 3…: it grows with every line of the deployment, and tells nothing of other
 * deployments' logs).
 */
export interface LogLine {
  id: string;
  timestamp: Date;
  level: LogLevel;
  message: string;
}

/** Where a line is in its deployment's log, (timestamp, line number): what cursors carry. */
export const linePosition = (line: LogLine): Position => ({ createdAt: line.timestamp, id: line.id });

/**
 * A stretch of a log in one direction of (timestamp, line): strictly past `from` (the last line the
 * reader has), strictly before `to` (a bound on the far side, for Relay's after/before), at most
 * `take` lines.
 */
export interface LogWindow {
  direction: "asc" | "desc";
  from?: Position;
  to?: Position;
  take: number;
}

/** Statuses after which a revision's logs get no more lines (its last line is its final status). */
export const CLOSED_STATUSES = [...TERMINAL_STATUSES];
/** The others: a revision in one of these may still write lines. */
const OPEN_STATUSES = REVISION_STATUSES.filter((s) => !TERMINAL_STATUSES.has(s));

/** `%`, `_` and `\` of a searched text are literal, not LIKE wildcards. */
export const likePattern = (text: string) => `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

/** The filter and window as conditions on the lines' alias `x`. */
function conditions(kind: LogKind, filter: LogFilter, window: Omit<LogWindow, "take"> | null): Prisma.Sql {
  const parts = [Prisma.sql`x.kind = ${kind}`];
  if (filter.level && filter.level !== "DEBUG") parts.push(Prisma.sql`x.level = ANY(${levelsFrom(filter.level)}::text[])`);
  if (filter.query) parts.push(Prisma.sql`x.message ILIKE ${likePattern(filter.query)} ESCAPE '\\'`);
  if (filter.start) parts.push(Prisma.sql`x."timestamp" >= ${filter.start}::timestamptz`);
  if (filter.end) parts.push(Prisma.sql`x."timestamp" <= ${filter.end}::timestamptz`);
  if (window) {
    const [past, before] = window.direction === "asc" ? [Prisma.raw(">"), Prisma.raw("<")] : [Prisma.raw("<"), Prisma.raw(">")];
    const at = (p: Position) => Prisma.sql`(${p.createdAt}::timestamptz, ${p.id}::bigint)`;
    if (window.from) parts.push(Prisma.sql`(x."timestamp", x.line) ${past} ${at(window.from)}`);
    if (window.to) parts.push(Prisma.sql`(x."timestamp", x.line) ${before} ${at(window.to)}`);
  }
  return Prisma.join(parts, " AND ");
}

const orderBy = (alias: string, direction: "asc" | "desc") =>
  Prisma.raw(`${alias}."timestamp" ${direction.toUpperCase()}, ${alias}.line ${direction.toUpperCase()}`);

/** The window's lines among those `owner` selects (a condition on alias x), for a LATERAL join. */
const linesOf = (owner: Prisma.Sql, kind: LogKind, filter: LogFilter, window: LogWindow) => Prisma.sql`
  SELECT x.line, x."timestamp", x.level, x.message FROM revision_logs x
  WHERE ${owner} AND ${conditions(kind, filter, window)}
  ORDER BY ${orderBy("x", window.direction)}
  LIMIT ${window.take}`;

type Row = { line: bigint | number | string | null; timestamp: Date | null; level: string | null; message: string | null };

const toLine = (r: Row): LogLine => ({ id: String(r.line), timestamp: r.timestamp!, level: r.level as LogLevel, message: r.message! });

/**
 * One window of one revision's log with the revision's status, in one statement: `status` is null
 * when the workspace has no such revision (of that deployment, when one is given).
 */
export async function revisionWindow(
  prisma: PrismaClient,
  at: { workspaceId: string; revisionId: string; deploymentId?: string },
  kind: LogKind,
  filter: LogFilter,
  window: LogWindow,
): Promise<{ status: string | null; deployment: { id: string; status: string } | null; lines: LogLine[] }> {
  const rows = await prisma.$queryRaw<(Row & { status: string; deploymentId: string; deploymentStatus: string })[]>`
    SELECT r.status, r.deployment_id::text AS "deploymentId", d.status AS "deploymentStatus", l.line, l."timestamp", l.level, l.message
    FROM revisions r
    JOIN deployments d ON d.id = r.deployment_id
    LEFT JOIN LATERAL (${linesOf(Prisma.sql`x.revision_id = r.id`, kind, filter, window)}) l ON true
    WHERE r.id = ${at.revisionId}::uuid AND r.workspace_id = ${at.workspaceId}::uuid
      ${at.deploymentId ? Prisma.sql`AND r.deployment_id = ${at.deploymentId}::uuid` : Prisma.empty}
    ORDER BY ${orderBy("l", window.direction)}`;
  if (rows.length === 0) return { status: null, deployment: null, lines: [] };
  const [first] = rows as [(typeof rows)[number]];
  return { status: first.status, deployment: { id: first.deploymentId, status: first.deploymentStatus }, lines: rows.filter((r) => r.line !== null).map(toLine) };
}

/**
 * One window of the log of every revision of a deployment, in one statement, with whether any of
 * its revisions is still unfinished (`open`: more lines may come); `found` false when the
 * workspace has no such deployment.
 */
export async function deploymentWindow(
  prisma: PrismaClient,
  at: { workspaceId: string; deploymentId: string },
  kind: LogKind,
  filter: LogFilter,
  window: LogWindow,
): Promise<{ found: boolean; open: boolean; lines: LogLine[] }> {
  const rows = await prisma.$queryRaw<(Row & { open: boolean })[]>`
    SELECT o.open, l.line, l."timestamp", l.level, l.message
    FROM deployments d
    -- Of this deployment (the parameter, not d.id: one look, not a subplan run per row or hashed
    -- over every revision there is), among its unfinished revisions by (deployment_id, status).
    CROSS JOIN (
      SELECT EXISTS (SELECT 1 FROM revisions v WHERE v.deployment_id = ${at.deploymentId}::uuid AND v.status = ANY(${OPEN_STATUSES}::text[])) AS open
    ) o
    LEFT JOIN LATERAL (${linesOf(Prisma.sql`x.deployment_id = d.id`, kind, filter, window)}) l ON true
    WHERE d.id = ${at.deploymentId}::uuid AND d.workspace_id = ${at.workspaceId}::uuid
    ORDER BY ${orderBy("l", window.direction)}`;
  if (rows.length === 0) return { found: false, open: false, lines: [] };
  return { found: true, open: rows[0]!.open, lines: rows.filter((r) => r.line !== null).map(toLine) };
}

/** The same window of the log of each of many revisions, in one statement: lines by revision id. */
export async function windowsOfRevisions(
  prisma: PrismaClient,
  workspaceId: string,
  revisionIds: string[],
  kind: LogKind,
  filter: LogFilter,
  window: LogWindow,
): Promise<Map<string, LogLine[]>> {
  const byRevision = new Map<string, LogLine[]>();
  if (revisionIds.length === 0) return byRevision;
  // Per revision, the first `take` entries of its (revision_id, kind, timestamp, line) index.
  const rows = await prisma.$queryRaw<(Row & { revision_id: string })[]>`
    SELECT page.* FROM unnest(${revisionIds}::uuid[]) WITH ORDINALITY AS ids(id, ord)
    CROSS JOIN LATERAL (
      SELECT x.revision_id, x.line, x."timestamp", x.level, x.message FROM revision_logs x
      WHERE x.revision_id = ids.id AND x.workspace_id = ${workspaceId}::uuid AND ${conditions(kind, filter, window)}
      ORDER BY ${orderBy("x", window.direction)}
      LIMIT ${window.take}
    ) page
    ORDER BY ids.ord, ${orderBy("page", window.direction)}`;
  for (const row of rows) {
    const list = byRevision.get(row.revision_id);
    if (list) list.push(toLine(row));
    else byRevision.set(row.revision_id, [toLine(row)]);
  }
  return byRevision;
}

/** How many lines of each revision's log pass the filter, in one grouped statement. */
export async function countsOfRevisions(
  prisma: PrismaClient,
  workspaceId: string,
  revisionIds: string[],
  kind: LogKind,
  filter: LogFilter,
): Promise<Map<string, number>> {
  if (revisionIds.length === 0) return new Map();
  const rows = await prisma.$queryRaw<{ revision_id: string; n: number }[]>`
    SELECT x.revision_id, COUNT(*)::int AS n FROM revision_logs x
    WHERE x.revision_id = ANY(${revisionIds}::uuid[]) AND x.workspace_id = ${workspaceId}::uuid AND ${conditions(kind, filter, null)}
    GROUP BY x.revision_id`;
  return new Map(rows.map((r) => [r.revision_id, Number(r.n)]));
}
