import { z } from "zod";
import type {
  AgentConnection,
  CodehostInstallation,
  Deployment,
  Listener,
  Revision,
  RevisionEvent,
  Workspace,
} from "../generated/prisma/client.js";
import type { Tenant } from "./auth.js";
import type { CoreDeps } from "./context.js";
import { deploymentWhere } from "./deployment-reads.js";
import { agentIdSchema } from "./schemas/agent.js";
import { type DeploymentFilter, deploymentFilterSchema } from "./schemas/deployment.js";
import { tokenListQuerySchema } from "./schemas/oauth.js";
import { parseInput } from "./validation.js";
import {
  deploymentRowsForward,
  deploymentRowsForwardWithLatest,
  type DeploymentWithLatestRead,
  type LatestRevisionRead,
} from "./deployment-reads.js";
import { type KeysetArgs, type KeysetPage, keysetPage, pageOfRows, type Position } from "./pagination.js";
import {
  deploymentEntriesSince,
  lastDeploymentEntryId,
  type RevisionLogEntry,
  revisionRowsByIds,
  revisionSummariesByIds,
  type RevisionSummary,
} from "./revision-reads.js";
import { DEFAULT_PAGE_SIZE, keysetArgs, type CursorArgs, type CursorPage, cursorPage, toCursorPage, toCursorPageBy } from "./cursor-pages.js";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Ids that can name a row: a malformed id names nothing (and must never reach a uuid column). */
export const uuidsOnly = (ids: readonly string[]) => [...new Set(ids.filter((id) => UUID.test(id)).map((id) => id.toLowerCase()))];

/** Rows in the order of `ids`, null where a row is missing or belongs to another workspace. */
export function inOrder<T extends { id: string }>(ids: readonly string[], rows: T[]): (T | null)[] {
  const byId = new Map(rows.map((r) => [r.id, r]));
  return ids.map((id) => byId.get(id.toLowerCase()) ?? null);
}

/**
 * Rows grouped by the id `keyOf` gives each: one list for each of `ids`, in their order (empty where
 * none), each list in the order of `rows`. Each row is added to its list (a loader's batch may hold
 * 200,000 rows: an installation's 5,000 repositories, 40 installations a page).
 */
export function groupedInOrder<T>(ids: readonly string[], rows: readonly T[], keyOf: (row: T) => string): T[][] {
  const groups = new Map<string, T[]>();
  for (const row of rows) {
    const key = keyOf(row);
    const group = groups.get(key);
    if (group) group.push(row);
    else groups.set(key, [row]);
  }
  return ids.map((id) => groups.get(id.toLowerCase()) ?? []);
}

/**
 * What the GraphQL face needs beyond the REST services: loading by many ids at once (DataLoaders),
 * counts for totalCount, and keyset pages the services do not page themselves. Always one SQL
 * statement per call, whatever the number of ids, and always confined to the tenant's workspace.
 */
export class BatchReads {
  constructor(private readonly deps: CoreDeps) {}

  /**
   * A cursor page of one of the workspace's keyset listings: cursors are signed for the listing in
   * that workspace, so a cursor of another connection, or of this one issued to another workspace,
   * is refused as a VALIDATION error at its argument.
   */
  relay<T extends Position>(tenant: Tenant, listing: string, args: CursorArgs, fetch: (args: KeysetArgs) => Promise<KeysetPage<T>>): Promise<CursorPage<T>> {
    return cursorPage(this.deps.cursors, `${listing}:${tenant.workspaceId}`, args, fetch);
  }

  /** The two halves of relay(), for pages loaded in batches (nested connections). */
  keysetArgs(purpose: string, args: CursorArgs): KeysetArgs {
    return keysetArgs(this.deps.cursors, purpose, args);
  }

  toRelay<T extends Position>(purpose: string, page: KeysetPage<T>): CursorPage<T> {
    return toCursorPage(this.deps.cursors, purpose, page);
  }

  /** toRelay for items whose place in their list is not their own (created_at, id), e.g. log lines. */
  toRelayBy<T>(purpose: string, page: KeysetPage<T>, position: (node: T) => Position): CursorPage<T> {
    return toCursorPageBy(this.deps.cursors, purpose, page, position);
  }

  /** The caller's own workspace (the viewer). */
  workspace(tenant: Tenant): Promise<Workspace | null> {
    return this.deps.data(tenant).workspace.findUnique({ where: { id: tenant.workspaceId } });
  }

  /** The deployment listing's filters, the same rules as REST's; problems are located under `filter`. */
  parseDeploymentFilter(filter: unknown): DeploymentFilter {
    // No filter (most pages): nothing to check.
    if (filter == null || (typeof filter === "object" && Object.keys(filter).length === 0)) return {};
    return parseInput(z.object({ filter: deploymentFilterSchema }), { filter: filter ?? {} }, "query").filter;
  }

  /** An agent id as REST's path parameter takes it (the same rule), located at `agent_id`. */
  parseAgentId(agentId: string): string {
    return parseInput(z.object({ agent_id: agentIdSchema }), { agent_id: agentId }, "path").agent_id;
  }

  /** The provider the token listing is narrowed to, by REST's rule for `provider_id`; null for none. */
  parseTokenProviderId(providerId: string | null | undefined): string | null {
    return parseInput(tokenListQuerySchema, { provider_id: providerId ?? undefined }, "query").provider_id || null;
  }

  async deploymentsByIds(tenant: Tenant, ids: readonly string[]): Promise<(Deployment | null)[]> {
    const rows = await this.deps.data(tenant).deployment.findMany({ where: { id: { in: uuidsOnly(ids) } } });
    return inOrder(ids, rows);
  }

  /**
   * A keyset page of the workspace's deployments. With `latestRevision`, the unfiltered forward page
   * (the common one) comes with what the caller will show of each deployment's latest revision (its
   * config or its summary, as `latestRevision`), read in the same statement.
   */
  async deploymentPage<R extends LatestRevisionRead>(
    tenant: Tenant,
    filter: DeploymentFilter,
    args: KeysetArgs,
    options: { latestRevision?: R } = {},
  ): Promise<KeysetPage<Deployment | DeploymentWithLatestRead<R>>> {
    const forward = args.before === undefined && (args.last === undefined || args.first !== undefined);
    if (forward && Object.values(filter).every((v) => v === undefined)) {
      // One prepared statement, keysetPage's semantics.
      const size = args.first ?? DEFAULT_PAGE_SIZE;
      const { latestRevision } = options;
      const rows = await (latestRevision
        ? deploymentRowsForwardWithLatest(this.deps, tenant.workspaceId, args.after, size + 1, latestRevision)
        : deploymentRowsForward(this.deps, tenant.workspaceId, args.after, size + 1));
      return pageOfRows<Deployment | DeploymentWithLatestRead<R>>(rows, args, size, false);
    }
    return keysetPage(args, (q) =>
      this.deps.data(tenant).deployment.findMany({
        where: { AND: [deploymentWhere(filter), q.where] },
        orderBy: q.orderBy,
        take: q.take,
      }),
    );
  }

  deploymentCount(tenant: Tenant, filter: DeploymentFilter): Promise<number> {
    return this.deps.data(tenant).deployment.count({ where: deploymentWhere(filter) });
  }

  /** Revisions' summaries (what most reads show: see RevisionSummary), by id. */
  async revisionSummariesByIds(tenant: Tenant, ids: readonly string[]): Promise<(RevisionSummary | null)[]> {
    const valid = uuidsOnly(ids);
    return inOrder(ids, valid.length === 0 ? [] : await revisionSummariesByIds(this.deps, tenant.workspaceId, valid));
  }

  async revisionsByIds(tenant: Tenant, ids: readonly string[]): Promise<(Revision | null)[]> {
    const valid = uuidsOnly(ids);
    return inOrder(ids, valid.length === 0 ? [] : await revisionRowsByIds(this.deps, tenant.workspaceId, valid));
  }

  async listenersByIds(tenant: Tenant, ids: readonly string[]): Promise<(Listener | null)[]> {
    const rows = await this.deps.data(tenant).listener.findMany({ where: { id: { in: uuidsOnly(ids) } } });
    return inOrder(ids, rows);
  }

  listenerPage(tenant: Tenant, args: KeysetArgs): Promise<KeysetPage<Listener>> {
    return keysetPage(args, (q) =>
      this.deps.data(tenant).listener.findMany({ where: q.where, orderBy: q.orderBy, take: q.take }),
    );
  }

  listenerCount(tenant: Tenant): Promise<number> {
    return this.deps.data(tenant).listener.count();
  }

  async installationsByIds(tenant: Tenant, ids: readonly string[]): Promise<(CodehostInstallation | null)[]> {
    const rows = await this.deps.data(tenant).codehostInstallation.findMany({
      where: { id: { in: uuidsOnly(ids) } },
    });
    return inOrder(ids, rows);
  }

  installationCount(tenant: Tenant): Promise<number> {
    return this.deps.data(tenant).codehostInstallation.count();
  }

  async connectionsByIds(tenant: Tenant, ids: readonly string[]): Promise<(AgentConnection | null)[]> {
    const rows = await this.deps.data(tenant).agentConnection.findMany({
      where: { id: { in: uuidsOnly(ids) } },
    });
    return inOrder(ids, rows);
  }

  connectionCount(tenant: Tenant, agentId: string): Promise<number> {
    return this.deps.data(tenant).agentConnection.count({ where: { agentId } });
  }

  /** The event logs of many revisions, oldest first per revision, in one statement. */
  async eventsByRevisionIds(tenant: Tenant, revisionIds: readonly string[]): Promise<RevisionEvent[][]> {
    const rows = await this.deps.data(tenant).revisionEvent.findMany({
      where: { revisionId: { in: uuidsOnly(revisionIds) }, revision: { workspaceId: tenant.workspaceId } },
      orderBy: [{ revisionId: "asc" }, { id: "asc" }],
    });
    return groupedInOrder(revisionIds, rows, (row) => row.revisionId);
  }

  /** The id of the newest entry of the revision event logs of the deployment's revisions; 0 for none. */
  lastDeploymentEntryId(tenant: Tenant, deploymentId: string): Promise<bigint> {
    const [id] = uuidsOnly([deploymentId]);
    return id ? lastDeploymentEntryId(this.deps, tenant.workspaceId, id) : Promise.resolve(0n);
  }

  /**
   * The entries of the revision event logs of the deployment's revisions after `afterId`, oldest
   * first, at most `take`, each with its revision: the revisions created and the statuses changed
   * since. Empty for another workspace's deployment.
   */
  deploymentEntriesSince(tenant: Tenant, deploymentId: string, afterId: bigint, take: number): Promise<RevisionLogEntry[]> {
    const [id] = uuidsOnly([deploymentId]);
    return id ? deploymentEntriesSince(this.deps, tenant.workspaceId, id, afterId, take) : Promise.resolve([]);
  }

  /**
   * A revision's log entries after `afterId` (all of them when null), oldest first: what a
   * subscriber has not seen yet. Empty for another workspace's revision.
   */
  eventsSince(tenant: Tenant, revisionId: string, afterId: bigint | null): Promise<RevisionEvent[]> {
    return this.deps.data(tenant).revisionEvent.findMany({
      where: {
        revisionId,
        revision: { workspaceId: tenant.workspaceId },
        ...(afterId !== null && { id: { gt: afterId } }),
      },
      orderBy: { id: "asc" },
    });
  }
}
