import type { Prisma, Revision } from "../generated/prisma/client.js";
import type { Tenant } from "./auth.js";
import type { CoreDeps } from "./context.js";
import { notFound } from "./errors.js";
import { newestFirst, type OffsetPage } from "./pagination.js";
import type { StoredSecret } from "./secrets.js";
import type { RevisionFilter } from "./schemas/deployment.js";
import { readSecretReferences, readStoredSecrets, type SecretReference } from "./schemas/secrets.js";
import { readSourceConfig, readSourceRevisionConfig, type SourceConfig, type SourceRevisionConfig } from "./schemas/source-config.js";
import type { Source } from "./schemas/source.js";
import type { DomainEvent } from "../events/types.js";
import { applyTransition, CREATED_MESSAGE, skipSuperseded } from "./transitions.js";
import { appendLines, statusLine } from "./log-writer.js";
import { isSelfHosted, routeFor } from "./revision-machine.js";

export type { Revision };
export type Tx = Prisma.TransactionClient;

/** Everything a revision is built from; secrets already sealed. */
export interface RevisionSnapshot {
  source: Source;
  sourceConfig: SourceConfig;
  sourceRevisionConfig: SourceRevisionConfig;
  repoCommitSha?: string | null;
  repoCommitTitle?: string | null;
  secrets: StoredSecret[];
  secretReferences: SecretReference[];
  shareable: boolean;
  routeThroughGateway: boolean;
}

/** Our own plain JSON objects, typed as Prisma's JSON input (interfaces lack its index signature). */
export const json = (value: object): Prisma.InputJsonValue => value as Prisma.InputJsonValue;

/**
 * The columns a revision's source_revision_config is read from: all a deployment shows of its latest
 * revision. Reading only these (not the revision's JSON snapshot of the whole source config and its
 * secrets) took a third of the server's CPU off a REST page of 100 deployments.
 */
export const REVISION_CONFIG_COLUMNS = { id: true, sourceRevisionConfig: true, repoCommitSha: true, repoCommitTitle: true } satisfies Prisma.RevisionSelect;
export type RevisionConfig = Pick<Revision, keyof typeof REVISION_CONFIG_COLUMNS>;

/** A revision's source revision config as shown: its inputs plus the commit the pipeline resolved. */
export function revisionSourceRevisionConfig(r: RevisionConfig) {
  const c = readSourceRevisionConfig(r.sourceRevisionConfig);
  return {
    repo_ref: c.repo_ref,
    framework_config_path: c.framework_config_path,
    image_uri: c.image_uri,
    source_tarball_path: c.source_tarball_path,
    repo_commit_sha: r.repoCommitSha,
    repo_commit_title: r.repoCommitTitle,
  };
}

/** The configuration a revision was made from, to make another from it (redeploy, a rollback). */
export const snapshotOf = (r: Revision): RevisionSnapshot => ({
  source: r.source as Source,
  sourceConfig: readSourceConfig(r.sourceConfig),
  sourceRevisionConfig: readSourceRevisionConfig(r.sourceRevisionConfig),
  repoCommitSha: r.repoCommitSha,
  repoCommitTitle: r.repoCommitTitle,
  secrets: readStoredSecrets(r.secrets),
  secretReferences: readSecretReferences(r.secretReferences),
  shareable: r.shareable,
  routeThroughGateway: r.routeThroughGateway,
});

export class RevisionService {
  constructor(private readonly deps: CoreDeps) {}

  /**
   * THE one place a revision comes to exist (create, PATCH, create-revision, redeploy). Runs inside
   * the caller's transaction, which holds the deployment's row lock: inserts the revision as
   * CREATING, due for the pipeline now, with its first event-log row, and makes it the deployment's
   * latest. created_at is kept strictly after the previous revision's, so that newest-first order
   * and latest_revision_id always agree. Returns the events that tell of it (the new revision, and
   * the older ones it made SKIPPED) for the caller's commitThenPublish.
   */
  async createRecord(tx: Tx, deployment: { id: string; workspaceId: string }, snapshot: RevisionSnapshot) {
    const previous = await tx.revision.findFirst({
      where: { deploymentId: deployment.id },
      orderBy: newestFirst,
      select: { createdAt: true },
    });
    const now = new Date(Math.max(Date.now(), (previous?.createdAt.getTime() ?? 0) + 1));
    const revision = await tx.revision.create({
      data: {
        deploymentId: deployment.id,
        workspaceId: deployment.workspaceId,
        status: "CREATING",
        statusMessage: CREATED_MESSAGE,
        source: snapshot.source,
        sourceConfig: json(snapshot.sourceConfig),
        sourceRevisionConfig: json(snapshot.sourceRevisionConfig),
        repoCommitSha: snapshot.repoCommitSha ?? null,
        repoCommitTitle: snapshot.repoCommitTitle ?? null,
        secrets: json(snapshot.secrets),
        secretReferences: json(snapshot.secretReferences),
        shareable: snapshot.shareable,
        routeThroughGateway: snapshot.routeThroughGateway,
        // Self-hosted revisions are carried out by a listener in the customer's cluster.
        remoteReconciled: isSelfHosted(snapshot.source),
        nextStepAt: now,
        createdAt: now,
        updatedAt: now,
      },
    });
    await tx.revisionEvent.create({
      data: { revisionId: revision.id, deploymentId: revision.deploymentId, fromStatus: null, toStatus: "CREATING", message: CREATED_MESSAGE, at: now },
    });
    // Older revisions that have not started building are SKIPPED in this same transaction.
    const skipped = await skipSuperseded(tx, revision);
    // After their SKIPPED lines, in the deployment's log: what supersedes them comes next.
    await appendLines(tx, revision.id, [statusLine(routeFor(snapshot.source), null, "CREATING", CREATED_MESSAGE)], []);
    const updated = await tx.deployment.update({ where: { id: deployment.id }, data: { latestRevisionId: revision.id } });
    const ids = { workspaceId: revision.workspaceId, deploymentId: revision.deploymentId, revisionId: revision.id };
    const events: DomainEvent[] = [
      { type: "deployment.revisions", ...ids },
      { type: "revision.status", ...ids, status: revision.status },
      ...skipped,
    ];
    return { revision, deployment: updated, events };
  }

  async list(
    tenant: Tenant,
    deploymentId: string,
    query: RevisionFilter & { limit: number; offset: number },
  ): Promise<OffsetPage<Revision>> {
    const resources = await this.deps.data(tenant).revision.findMany({
      where: {
        deploymentId,
        ...(query.status && { status: { in: query.status } }),
        ...(query.remote_reconciled !== undefined && { remoteReconciled: query.remote_reconciled }),
      },
      orderBy: newestFirst,
      take: query.limit,
      skip: query.offset,
    });
    // An empty page may mean no such deployment (a deployment always has a revision): tell them apart.
    if (resources.length === 0) await this.requireDeployment(tenant, deploymentId);
    return { resources, offset: query.offset + resources.length };
  }

  async get(tenant: Tenant, deploymentId: string, revisionId: string): Promise<Revision> {
    // Clients poll this: one query when the revision exists, a second only to word the 404.
    const revision = await this.deps.data(tenant).revision.findFirst({
      where: { id: revisionId, deploymentId },
    });
    if (revision) return revision;
    await this.requireDeployment(tenant, deploymentId);
    throw notFound("Revision", revisionId);
  }

  /** A user stops an in-flight revision; a terminal one answers 400 (from the state machine). */
  async interrupt(tenant: Tenant, deploymentId: string, revisionId: string): Promise<Revision> {
    await this.get(tenant, deploymentId, revisionId);
    const { revision } = await applyTransition(this.deps, {
      revisionId,
      event: "interrupt",
      workspaceId: tenant.workspaceId,
      nextStepAt: null,
    });
    return revision;
  }

  private async requireDeployment(tenant: Tenant, id: string): Promise<void> {
    const found = await this.deps.data(tenant).deployment.findFirst({ where: { id }, select: { id: true } });
    if (!found) throw notFound("Deployment", id);
  }
}
