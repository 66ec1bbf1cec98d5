import { randomUUID } from "node:crypto";
import type { Deployment, Revision } from "../generated/prisma/client.js";
import type { Tenant } from "./auth.js";
import type { CoreDeps } from "./context.js";
import { deploymentPageWithLatestConfig, deploymentWhere, deploymentWithLatestConfig } from "./deployment-reads.js";
import { DELETING, finishDeleting, markDeleting } from "./deployment-status.js";
import { badRequest, conflict, CoreError, invalid, notFound, type ValidationIssue } from "./errors.js";
import { commitThenPublish } from "./publish.js";
import { isSelfHosted } from "./revision-machine.js";
import { checkRevisionSubject, revisionDue } from "./revision-rules.js";
import { newestFirst, type OffsetPage } from "./pagination.js";
import { isUniqueViolation } from "./prisma-errors.js";
import { json, REVISION_CONFIG_COLUMNS, type RevisionConfig, RevisionService, type RevisionSnapshot, snapshotOf, type Tx } from "./revisions.js";
import {
  type DeploymentFilter,
  deploymentCreateSchema,
  type DeploymentUpdateInput,
  deploymentUpdateSchema,
  revisionCreateSchema,
} from "./schemas/deployment.js";
import { readSecretReferences, readStoredSecrets } from "./schemas/secrets.js";
import {
  emptySourceRevisionConfig,
  overlay,
  columnlessSourceConfig,
  deploymentSourceConfig,
  readSourceRevisionConfig,
  type SourceConfig,
  servingUrl,
  toSourceConfig,
  toSourceRevisionConfig,
} from "./schemas/source-config.js";
import { claimCustomHost, customHost, customUrlIssues } from "./serving-hosts.js";
import { fixedFieldIssues, type RevisionSubject } from "./schemas/source-rules.js";
import type { DeploymentStatus, SourceConfigInput } from "./schemas/source.js";
import { parseInput } from "./validation.js";

export type DeploymentWithRevision = Deployment & { latestRevision: Revision | null };
/** A deployment with what REST shows of its latest revision (GET by id, the listing). */
export type DeploymentWithLatestConfig = Deployment & { latestRevision: RevisionConfig | null };

/** The agent server image a new deployment runs until one is chosen. */
export const DEFAULT_IMAGE_VERSION = "0.4.0";
const TIER = "SERVERLESS_S";
const INITIAL_STATUS: DeploymentStatus = "AWAITING_DATABASE";

/** The deployment and revision services, built together: deployments record revisions through revisions. */
export function deploymentServices(deps: CoreDeps) {
  const revisions = new RevisionService(deps);
  return { revisions, deployments: new DeploymentService(deps, revisions) };
}

export class DeploymentService {
  constructor(
    private readonly deps: CoreDeps,
    private readonly revisions: RevisionService,
  ) {}

  async create(tenant: Tenant, body: unknown): Promise<DeploymentWithRevision> {
    const input = parseInput(deploymentCreateSchema, body, "body");
    const sourceConfig = toSourceConfig(input.source_config);
    const sourceRevisionConfig = toSourceRevisionConfig(input.source_revision_config);
    sourceConfig.deployment_type ??= "dev";
    if (input.source === "codehost") sourceConfig.repo_branch ??= sourceRevisionConfig.repo_ref;
    const subject: RevisionSubject = { source: input.source, sourceConfig, sourceRevisionConfig };
    const name = input.name ?? (input.agent ? `${input.agent.agent_id}-${input.agent.environment}` : null);
    const missingName: ValidationIssue[] = name ? [] : [{ loc: ["body", "name"], type: "missing", msg: "Field required" }];
    const urlIssues = customUrlIssues(sourceConfig.custom_url, this.deps.deploymentDomain);
    await checkRevisionSubject(this.deps, this.deps.data(tenant), subject, { kind: "request", issues: [...missingName, ...urlIssues] });
    if (!name) throw invalid(missingName); // reported above with the rules' issues; this narrows the type

    const id = randomUUID();
    const secrets = this.deps.secrets.sealAll(input.secrets ?? []);
    const snapshot: RevisionSnapshot = {
      ...subject,
      secrets,
      secretReferences: input.secret_references ?? [],
      shareable: input.shareable ?? false,
      routeThroughGateway: input.route_through_gateway ?? false,
    };
    try {
      const { deployment, revision } = await commitThenPublish(this.door(tenant), async (tx) => {
        await claimCustomHost(tx, id, customHost(sourceConfig.custom_url));
        await tx.deployment.create({
          data: {
            id,
            workspaceId: tenant.workspaceId,
            name,
            displayName: name,
            source: input.source,
            status: INITIAL_STATUS,
            sourceConfig: json(columnlessSourceConfig(sourceConfig)),
            deploymentType: sourceConfig.deployment_type,
            listenerId: sourceConfig.listener_id,
            integrationId: sourceConfig.integration_id,
            secrets: json(secrets),
            secretReferences: json(snapshot.secretReferences),
            agentId: input.agent?.agent_id ?? null,
            agentEnvironment: input.agent?.environment ?? null,
            shareable: snapshot.shareable,
            routeThroughGateway: snapshot.routeThroughGateway,
            tracerSessionId: randomUUID(),
            url: servingUrl(name, id, sourceConfig.custom_url, this.deps.deploymentDomain),
            imageVersion: DEFAULT_IMAGE_VERSION,
            deploymentTier: TIER,
            computeTier: TIER,
            databaseTier: TIER,
            // A listener in the customer's cluster reconciles self-hosted deployments.
            remoteReconciled: isSelfHosted(input.source),
          },
        });
        return this.revisions.createRecord(tx, { id, workspaceId: tenant.workspaceId }, snapshot);
      });
      return { ...deployment, latestRevision: revision };
    } catch (err) {
      if (isUniqueViolation(err)) throw conflict(`A deployment named '${name}' already exists in this workspace.`, input.name ? ["body", "name"] : ["body", "agent"]);
      throw err;
    }
  }

  async get(tenant: Tenant, id: string): Promise<DeploymentWithLatestConfig> {
    const found = await deploymentWithLatestConfig(this.deps, tenant.workspaceId, id);
    if (!found) throw notFound("Deployment", id);
    return found;
  }

  async list(tenant: Tenant, query: DeploymentFilter & { limit: number; offset: number }): Promise<OffsetPage<DeploymentWithLatestConfig>> {
    const { limit, offset, ...filter } = query;
    if (Object.values(filter).every((v) => v === undefined)) {
      // The unfiltered listing (the common one): one prepared statement with the latest revisions joined.
      const resources = await deploymentPageWithLatestConfig(this.deps, tenant.workspaceId, limit, offset);
      return { resources, offset: offset + resources.length };
    }
    const rows = await this.deps.data(tenant).deployment.findMany({
      where: deploymentWhere(query),
      orderBy: newestFirst,
      take: query.limit,
      skip: query.offset,
    });
    const latestIds = rows.flatMap((d) => (d.latestRevisionId ? [d.latestRevisionId] : []));
    const latest = latestIds.length > 0 ? await this.deps.data(tenant).revision.findMany({ where: { id: { in: latestIds } }, select: REVISION_CONFIG_COLUMNS }) : [];
    const byId = new Map(latest.map((r) => [r.id, r]));
    const resources = rows.map((d) => ({ ...d, latestRevision: (d.latestRevisionId && byId.get(d.latestRevisionId)) || null }));
    return { resources, offset: query.offset + resources.length };
  }

  /** PATCH: a new revision exactly when COMPAT.md says so, otherwise an update in place. */
  async update(tenant: Tenant, id: string, body: unknown): Promise<DeploymentWithRevision> {
    const input = parseInput(deploymentUpdateSchema, body, "body");
    const { deployment, latestRevision } = await this.change(tenant, id, input, false);
    return { ...deployment, latestRevision };
  }

  /** POST …/revisions: the same changes as PATCH, but always a new revision, which is returned. */
  async createRevision(tenant: Tenant, id: string, body: unknown): Promise<Revision> {
    const input = parseInput(revisionCreateSchema, body, "body");
    const { latestRevision } = await this.change(tenant, id, input, true);
    if (!latestRevision) throw new Error("a forced change always creates a revision");
    return latestRevision;
  }

  /** A new revision from an earlier one's configuration (a rollback), which the deployment takes on. */
  async redeploy(tenant: Tenant, id: string, revisionId: string): Promise<DeploymentWithRevision> {
    const { deployment, revision } = await commitThenPublish(this.door(tenant), async (tx) => {
      const current = await this.lock(tx, tenant, id);
      const earlier = await tx.revision.findFirst({ where: { id: revisionId, deploymentId: id } });
      if (!earlier) throw notFound("Revision", revisionId);
      const snapshot = snapshotOf(earlier);
      // Fields fixed at creation stay the deployment's own; the rest rolls back to the revision's.
      const sourceConfig: SourceConfig = {
        ...snapshot.sourceConfig,
        integration_id: current.integrationId,
        listener_id: current.listenerId,
        deployment_type: current.deploymentType as SourceConfig["deployment_type"],
      };
      await checkRevisionSubject(this.deps, tx, { ...snapshot, sourceConfig }, { kind: "redeploy", revisionId });
      // Its custom URL, if it is not the deployment's own now, is one being set again.
      if (sourceConfig.custom_url !== deploymentSourceConfig(current).custom_url) {
        const [issue] = customUrlIssues(sourceConfig.custom_url, this.deps.deploymentDomain);
        if (issue) throw badRequest(`Revision ${revisionId} cannot be redeployed: source_config.custom_url: ${issue.msg}`);
        const host = customHost(sourceConfig.custom_url);
        if (host !== current.customHost) await claimCustomHost(tx, id, host, null);
      }
      await tx.deployment.update({
        where: { id },
        data: {
          sourceConfig: json(columnlessSourceConfig(sourceConfig)),
          url: servingUrl(current.name, id, sourceConfig.custom_url, this.deps.deploymentDomain),
          secrets: json(snapshot.secrets),
          secretReferences: json(snapshot.secretReferences),
          shareable: snapshot.shareable,
          routeThroughGateway: snapshot.routeThroughGateway,
        },
      });
      return this.revisions.createRecord(tx, current, { ...snapshot, sourceConfig });
    });
    return { ...deployment, latestRevision: revision };
  }

  async delete(tenant: Tenant, id: string): Promise<void> {
    const deleted = await this.remove(tenant, [id]);
    if (deleted.length === 0) throw notFound("Deployment", id);
  }

  /** Bulk delete: which of the ids were deleted and which were not found; none found is a 404. */
  async deleteMany(tenant: Tenant, ids: string[]): Promise<{ deleted: string[]; missing: string[] }> {
    const unique = [...new Set(ids.map((i) => i.toLowerCase()))];
    const deleted = await this.remove(tenant, unique);
    if (deleted.length === 0) throw new CoreError("NOT_FOUND", `None of the ${unique.length} deployment IDs were found.`);
    const gone = new Set(deleted);
    return { deleted: unique.filter((i) => gone.has(i)), missing: unique.filter((i) => !gone.has(i)) };
  }

  /** The one deletion path (single and bulk): revisions and their events go with the deployment. */
  private async remove(tenant: Tenant, ids: string[]): Promise<string[]> {
    // Through AWAITING_DELETE, published, before the rows go. Two transactions: should the second
    // never run (a crash, the database lost), the worker's DeletionSweeper finishes it after a grace period.
    // The ids this request deleted: of DELETEs of one deployment at once, one deleted it, and the
    // others find it gone (404, or missing in a bulk answer).
    const foundIds = await markDeleting(this.deps, tenant, ids);
    return finishDeleting(this.deps, tenant, foundIds);
  }

  /**
   * PATCH and create-revision: refuse changes to fixed fields (400), update the deployment, and when
   * a revision is due (or forced) validate what it will be built from and record it.
   */
  private async change(tenant: Tenant, id: string, input: DeploymentUpdateInput | Omit<DeploymentUpdateInput, "name" | "source">, force: boolean) {
    const sealed = input.secrets ? this.deps.secrets.sealAll(input.secrets) : null;
    return commitThenPublish(this.door(tenant), async (tx) => {
      const current = await this.lock(tx, tenant, id);
      const currentConfig = deploymentSourceConfig(current);
      const fixed = fixedFieldIssues({ ...current, sourceConfig: currentConfig }, input);
      if (fixed.length > 0) {
        const fields = fixed.map((i) => i.loc.slice(1).join(".")).join(", ");
        throw new CoreError("BAD_REQUEST", `${fields} cannot be changed once the deployment is created.`, fixed);
      }
      const nextConfig = overlay(currentConfig, shownUrlUnchanged(input.source_config, currentConfig, current.url));
      const revisionInputs = input.source_revision_config;
      const due = revisionDue(currentConfig, nextConfig, { force, sourceRevisionConfig: revisionInputs, secrets: input.secrets });
      // A custom URL being set (not the one the deployment has): checked, and its host claimed.
      const newUrl = nextConfig.custom_url !== currentConfig.custom_url;
      const data = {
        sourceConfig: json(columnlessSourceConfig(nextConfig)),
        url: servingUrl(current.name, id, nextConfig.custom_url, this.deps.deploymentDomain),
        ...(sealed && { secrets: json(sealed) }),
        ...(input.secret_references && { secretReferences: json(input.secret_references) }),
        ...(input.shareable != null && { shareable: input.shareable }),
        ...(input.route_through_gateway != null && { routeThroughGateway: input.route_through_gateway }),
      };
      if (!due) {
        const deployment = await tx.deployment.update({ where: { id }, data });
        const latest = current.latestRevisionId ? await tx.revision.findUnique({ where: { id: current.latestRevisionId } }) : null;
        return { deployment, latestRevision: latest, events: [] };
      }
      if (input.revision_source && isSelfHosted(current.source)) {
        throw badRequest("revision_source is only available for managed cloud deployments; this deployment is self-hosted (external_container).");
      }
      const source = input.revision_source ?? (current.source as RevisionSubject["source"]);
      // Unset revision fields carry over from the newest revision of the same source.
      const previous = await tx.revision.findFirst({ where: { deploymentId: id, source }, orderBy: newestFirst });
      const inherited = previous ? readSourceRevisionConfig(previous.sourceRevisionConfig) : emptySourceRevisionConfig();
      const subject: RevisionSubject = { source, sourceConfig: nextConfig, sourceRevisionConfig: overlay(inherited, revisionInputs) };
      const urlIssues = newUrl ? customUrlIssues(nextConfig.custom_url, this.deps.deploymentDomain) : [];
      await checkRevisionSubject(this.deps, tx, subject, { kind: "request", issues: urlIssues });
      const host = customHost(nextConfig.custom_url);
      if (newUrl && host !== current.customHost) await claimCustomHost(tx, id, host);
      const updated = await tx.deployment.update({ where: { id }, data });
      const { deployment, revision, events } = await this.revisions.createRecord(tx, current, {
        ...subject,
        secrets: readStoredSecrets(updated.secrets),
        secretReferences: readSecretReferences(updated.secretReferences),
        shareable: updated.shareable,
        routeThroughGateway: updated.routeThroughGateway,
      });
      return { deployment, latestRevision: revision, events };
    });
  }

  /** The tenant's data, and the bus its changes are told on (commitThenPublish). */
  private door(tenant: Tenant) {
    return { prisma: this.deps.data(tenant), events: this.deps.events };
  }

  /** Reads the deployment with its row locked, so that concurrent changes to it run one after another. */
  private async lock(tx: Tx, tenant: Tenant, id: string): Promise<Deployment> {
    await tx.$queryRaw`SELECT id FROM deployments WHERE id = ${id}::uuid AND workspace_id = ${tenant.workspaceId}::uuid FOR UPDATE`;
    const deployment = await tx.deployment.findFirst({ where: { id } });
    if (!deployment) throw notFound("Deployment", id);
    if (deployment.status === DELETING) throw badRequest(`Deployment ID ${id} is being deleted.`);
    return deployment;
  }
}

/**
 * Answers show the serving URL as source_config.custom_url; a client that sends back what it was
 * shown (the generated URL, while no custom one is set) changes nothing.
 */
function shownUrlUnchanged(input: SourceConfigInput | null | undefined, current: SourceConfig, servedAt: string) {
  if (!input || input.custom_url == null || current.custom_url !== null || input.custom_url !== servedAt) return input;
  return { ...input, custom_url: null };
}
