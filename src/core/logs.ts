import { z } from "zod";
import { isTerminal, type RevisionStatus } from "./revision-machine.js";
import type { Tenant } from "./auth.js";
import type { CoreDeps } from "./context.js";
import { invalid, notFound } from "./errors.js";
import { uuidsOnly } from "./batch-reads.js";
import { countsOfRevisions, deploymentWindow, linePosition, type LogLine, revisionWindow, windowsOfRevisions } from "./log-queries.js";
import { type KeysetArgs, type KeysetPage, pageOfRows, type Position } from "./pagination.js";
import { DEFAULT_PAGE_SIZE } from "./cursor-pages.js";
import { type LogFilter, logFilterSchema, type LogKind, type LogQueryInput, logQuerySchema, toLogFilter } from "./schemas/logs.js";
import { parseInput } from "./validation.js";

export type { LogLine };

/** Before every line of a log: lines are written at the time they are, never at the epoch. */
const LOG_START: Position = { createdAt: new Date(0), id: "1" };

/** A page of a REST log read: `nextOffset` continues it; null once there is nothing more to read. */
export interface LogPage {
  logs: LogLine[];
  nextOffset: string | null;
}

/**
 * Reading revisions' build and deploy logs, confined to the caller's workspace. Lines are in
 * (timestamp, id) order, a total order; offsets are signed cursors naming the last line read and the
 * request they continue (scope, kind, order and filters), so that one is never taken for another.
 */
export class LogService {
  constructor(private readonly deps: CoreDeps) {}

  /** `POST /v1/projects/{deployment_id}/revisions/{revision_id}/build_logs` and `…/deploy_logs`. */
  async revisionLogs(tenant: Tenant, deploymentId: string, revisionId: string, kind: LogKind, body: unknown): Promise<LogPage> {
    const query = parseInput(logQuerySchema, body ?? {}, "body");
    const filter = toLogFilter(query);
    const purpose = restPurpose(`revision ${revisionId.toLowerCase()}`, kind, query, filter);
    const from = this.offsetOf(purpose, query.offset);
    const at = { workspaceId: tenant.workspaceId, deploymentId, revisionId };
    const { status, lines } = await revisionWindow(this.deps.prisma, at, kind, filter, { direction: query.order, from, take: query.limit + 1 });
    if (status === null) {
      await this.requireDeployment(tenant, deploymentId);
      throw notFound("Revision", revisionId);
    }
    return this.page(purpose, query, lines, !isTerminal(status as RevisionStatus));
  }

  /** `POST /v1/projects/{deployment_id}/deploy_logs`: the deploy logs of every revision of the deployment. */
  async deploymentLogs(tenant: Tenant, deploymentId: string, body: unknown): Promise<LogPage> {
    const query = parseInput(logQuerySchema, body ?? {}, "body");
    const filter = toLogFilter(query);
    const purpose = restPurpose(`deployment ${deploymentId.toLowerCase()}`, "deploy", query, filter);
    const from = this.offsetOf(purpose, query.offset);
    const at = { workspaceId: tenant.workspaceId, deploymentId };
    const result = await deploymentWindow(this.deps.prisma, at, "deploy", filter, { direction: query.order, from, take: query.limit + 1 });
    if (!result.found) throw notFound("Deployment", deploymentId);
    return this.page(purpose, query, result.lines, result.open);
  }

  /** GraphQL's LogFilter, by the same rules as REST's body; problems are located under `filter`. */
  parseFilter(filter: unknown): LogFilter {
    return toLogFilter(parseInput(z.object({ filter: logFilterSchema }), { filter: filter ?? {} }, "query").filter);
  }

  /**
   * Relay pages (oldest first; first/after forward, last/before backward) of the log of each of
   * many revisions, in one statement: what a page of revisions asking for their logs costs.
   */
  async pages(tenant: Tenant, kind: LogKind, revisionIds: readonly string[], args: KeysetArgs, filter: LogFilter): Promise<KeysetPage<LogLine>[]> {
    const backward = args.last !== undefined && args.first === undefined;
    const size = backward ? args.last! : (args.first ?? DEFAULT_PAGE_SIZE);
    const window = backward
      ? { direction: "desc" as const, from: args.before, to: args.after, take: size + 1 }
      : { direction: "asc" as const, from: args.after, to: args.before, take: size + 1 };
    const byRevision = await windowsOfRevisions(this.deps.prisma, tenant.workspaceId, uuidsOnly(revisionIds), kind, filter, window);
    return revisionIds.map((id) => pageOfRows(byRevision.get(id.toLowerCase()) ?? [], args, size, backward));
  }

  /** How many lines of each revision's log pass the filter (totalCount), in one statement. */
  async counts(tenant: Tenant, kind: LogKind, revisionIds: readonly string[], filter: LogFilter): Promise<number[]> {
    const counts = await countsOfRevisions(this.deps.prisma, tenant.workspaceId, uuidsOnly(revisionIds), kind, filter);
    return revisionIds.map((id) => counts.get(id.toLowerCase()) ?? 0);
  }

  /**
   * The answer's page and where the next one starts. Desc order ends at the oldest line: null once
   * it is read. Asc order ends at the newest line so far: while the log may still grow (`open`),
   * next_offset stays at the last line read (or where the reader already was; at the log's start,
   * LOG_START, while it has no line the filter passes), so that a client polling with it, as the
   * official tool does during a build, gets each new line once. Null tells a client there is
   * nothing more to read.
   */
  private page(purpose: string, query: LogQueryInput, lines: LogLine[], open: boolean): LogPage {
    const logs = lines.slice(0, query.limit);
    const last = logs.at(-1);
    const more = lines.length > query.limit;
    let nextOffset: string | null = null;
    if (last && (more || (open && query.order === "asc"))) nextOffset = this.deps.cursors.encode(purpose, linePosition(last));
    else if (!last && open && query.order === "asc") nextOffset = query.offset ?? this.deps.cursors.encode(purpose, LOG_START);
    return { logs, nextOffset };
  }

  private offsetOf(purpose: string, offset: string | null | undefined): Position | undefined {
    if (!offset) return undefined;
    const position = this.deps.cursors.decode(purpose, offset);
    if (position) return position;
    throw invalid([
      {
        loc: ["body", "offset"],
        msg: "Value error, invalid offset: pass the next_offset of an earlier answer to the same request (same log, order and filters)",
        type: "value_error",
        input: offset,
      },
    ]);
  }

  private async requireDeployment(tenant: Tenant, id: string): Promise<void> {
    const found = await this.deps.data(tenant).deployment.findFirst({ where: { id }, select: { id: true } });
    if (!found) throw notFound("Deployment", id);
  }
}

/** What a REST offset is bound to: the log read, its order and its filters (not its limit). */
function restPurpose(scope: string, kind: LogKind, query: LogQueryInput, filter: LogFilter): string {
  const filters = [filter.level ?? null, filter.query ?? null, filter.start?.toISOString() ?? null, filter.end?.toISOString() ?? null];
  return `rest:logs\n${scope}\n${kind}\n${query.order}\n${JSON.stringify(filters)}`;
}
