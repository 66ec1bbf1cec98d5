import { randomUUID } from "node:crypto";
import type { Deployment, Prisma, Revision } from "../generated/prisma/client.js";
import type { Tenant } from "./auth.js";
import type { CoreDeps } from "./context.js";
import { deploymentPageWithLatestConfig, deploymentWithLatestConfig } from "./deployment-reads.js";
import { markDeleting } from "./deployment-status.js";
import { badRequest, conflict, CoreError, invalid, notFound, type ValidationIssue } from "./errors.js";
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
  sameJson,
  servingUrl,
  toSourceConfig,
  toSourceRevisionConfig,
} from "./schemas/source-config.js";
import { fixedFieldIssues, LISTENER_REQUIRED, listenerRequired, type RevisionSubject, sourceRuleIssues } from "./schemas/source-rules.js";
import {
  type DeploymentStatus,
  REVISION_TRIGGER_FIELDS,
  SOURCE_REVISION_FIELDS,
  type SourceConfigInput,
} from "./schemas/source.js";
import { parseInput } from "./validation.js";

export type DeploymentWithRevision = Deployment & { latestRevision: Revision | null };
/** A deployment with what REST shows of its latest revision (GET by id, the listing). */
export type DeploymentWithLatestConfig = Deployment & { latestRevision: RevisionConfig | null };

/** The agent server image a new deployment runs until one is chosen. */
export const DEFAULT_IMAGE_VERSION = "0.4.0";
const TIER = "SERVERLESS_S";
const INITIAL_STATUS: DeploymentStatus = "AWAITING_DATABASE";

/** Prisma `where` for the listing filters; shared by the REST and GraphQL faces. */
export function deploymentWhere(workspaceId: string, f: DeploymentFilter): Prisma.DeploymentWhereInput {
  const names: Prisma.DeploymentWhereInput[] = [];
  if (f.name !== undefined) names.push({ name: f.name });
  // Prisma passes `contains` to LIKE as is: escape its wildcards so that `_` and `%` match themselves.
  const substring = f.name_contains?.replace(/[\\%_]/g, "\\$&");
  if (substring !== undefined) names.push({ name: { contains: substring, mode: "insensitive" } });
  return {
    workspaceId,
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
    refuseUnavailableBuild(this.deps, subject.source);
    if (listenerRequired(subject)) throw badRequest(LISTENER_REQUIRED);
    const issues: ValidationIssue[] = name ? [] : [{ loc: ["body", "name"], type: "missing", msg: "Field required" }];
    issues.push(...sourceRuleIssues(subject));
    if (issues.length > 0 || !name) throw invalid(issues);
    await this.checkReferences(this.deps.prisma, tenant, subject, "body");

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
      const { deployment, revision } = await this.deps.prisma.$transaction(async (tx) => {
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
            remoteReconciled: input.source === "external_container",
          },
        });
        return this.revisions.createRecord(tx, { id, workspaceId: tenant.workspaceId }, snapshot);
      });
      await this.revisions.announce(revision);
      return { ...deployment, latestRevision: revision };
    } catch (err) {
      if (isUniqueViolation(err)) throw conflict(`A deployment named '${name}' already exists in this workspace.`);
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
    const rows = await this.deps.prisma.deployment.findMany({
      where: deploymentWhere(tenant.workspaceId, query),
      orderBy: newestFirst,
      take: query.limit,
      skip: query.offset,
    });
    const latestIds = rows.flatMap((d) => (d.latestRevisionId ? [d.latestRevisionId] : []));
    const latest = latestIds.length > 0 ? await this.deps.prisma.revision.findMany({ where: { id: { in: latestIds } }, select: REVISION_CONFIG_COLUMNS }) : [];
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
    const { deployment, revision } = await this.deps.prisma.$transaction(async (tx) => {
      const current = await this.lock(tx, tenant, id);
      const earlier = await tx.revision.findFirst({ where: { id: revisionId, deploymentId: id } });
      if (!earlier) throw notFound("Revision", revisionId);
      refuseUnavailableBuild(this.deps, earlier.source);
      const snapshot = snapshotOf(earlier);
      // Fields fixed at creation stay the deployment's own; the rest rolls back to the revision's.
      const sourceConfig: SourceConfig = {
        ...snapshot.sourceConfig,
        integration_id: current.integrationId,
        listener_id: current.listenerId,
        deployment_type: current.deploymentType as SourceConfig["deployment_type"],
      };
      const subject: RevisionSubject = { ...snapshot, sourceConfig };
      const issues = sourceRuleIssues(subject);
      if (listenerRequired(subject)) throw badRequest(`Revision ${revisionId} cannot be redeployed: ${LISTENER_REQUIRED}`);
      if (issues.length > 0) {
        throw badRequest(`Revision ${revisionId} cannot be redeployed: ${issues.map((i) => `${i.loc.slice(1).join(".")}: ${i.msg}`).join("; ")}`);
      }
      await this.checkReferences(tx, tenant, subject, null);
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
    await this.revisions.announce(revision);
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
    // Through AWAITING_DELETE, published, before the rows go.
    const foundIds = await markDeleting(this.deps, tenant.workspaceId, ids);
    if (foundIds.length > 0) {
      await this.deps.prisma.deployment.deleteMany({ where: { id: { in: foundIds }, workspaceId: tenant.workspaceId } });
      // Their uploads' rows went with them; the bytes of a folder store go now.
      await this.deps.blobs.removeDeployments(foundIds);
    }
    return foundIds;
  }

  /**
   * PATCH and create-revision: refuse changes to fixed fields (400), update the deployment, and when
   * a revision is due (or forced) validate what it will be built from and record it.
   */
  private async change(tenant: Tenant, id: string, input: DeploymentUpdateInput | Omit<DeploymentUpdateInput, "name" | "source">, force: boolean) {
    const sealed = input.secrets ? this.deps.secrets.sealAll(input.secrets) : null;
    const result = await this.deps.prisma.$transaction(async (tx) => {
      const current = await this.lock(tx, tenant, id);
      const currentConfig = deploymentSourceConfig(current);
      const fixed = fixedFieldIssues({ ...current, sourceConfig: currentConfig }, input);
      if (fixed.length > 0) {
        const fields = fixed.map((i) => i.loc.slice(1).join(".")).join(", ");
        throw new CoreError("BAD_REQUEST", `${fields} cannot be changed once the deployment is created.`, fixed);
      }
      const nextConfig = overlay(currentConfig, shownUrlUnchanged(input.source_config, currentConfig, current.url));
      const revisionInputs = input.source_revision_config;
      const due =
        force ||
        SOURCE_REVISION_FIELDS.some((f) => revisionInputs?.[f] != null) ||
        input.secrets != null ||
        REVISION_TRIGGER_FIELDS.some((f) => !sameJson(currentConfig[f], nextConfig[f]));
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
        return { deployment, latestRevision: latest, created: null };
      }
      if (input.revision_source && current.source === "external_container") {
        throw badRequest("revision_source is only available for managed cloud deployments; this deployment is self-hosted (external_container).");
      }
      const source = input.revision_source ?? (current.source as RevisionSubject["source"]);
      refuseUnavailableBuild(this.deps, source);
      // Unset revision fields carry over from the newest revision of the same source.
      const previous = await tx.revision.findFirst({ where: { deploymentId: id, source }, orderBy: newestFirst });
      const inherited = previous ? readSourceRevisionConfig(previous.sourceRevisionConfig) : emptySourceRevisionConfig();
      const subject: RevisionSubject = { source, sourceConfig: nextConfig, sourceRevisionConfig: overlay(inherited, revisionInputs) };
      if (listenerRequired(subject)) throw badRequest(LISTENER_REQUIRED);
      const issues = sourceRuleIssues(subject);
      if (issues.length > 0) throw invalid(issues);
      await this.checkReferences(tx, tenant, subject, "body");
      const updated = await tx.deployment.update({ where: { id }, data });
      const { deployment, revision } = await this.revisions.createRecord(tx, current, {
        ...subject,
        secrets: readStoredSecrets(updated.secrets),
        secretReferences: readSecretReferences(updated.secretReferences),
        shareable: updated.shareable,
        routeThroughGateway: updated.routeThroughGateway,
      });
      return { deployment, latestRevision: revision, created: revision };
    });
    if (result.created) await this.revisions.announce(result.created);
    return result;
  }

  /** Reads the deployment with its row locked, so that concurrent changes to it run one after another. */
  private async lock(tx: Tx, tenant: Tenant, id: string): Promise<Deployment> {
    await tx.$queryRaw`SELECT id FROM deployments WHERE id = ${id}::uuid AND workspace_id = ${tenant.workspaceId}::uuid FOR UPDATE`;
    const deployment = await tx.deployment.findFirst({ where: { id, workspaceId: tenant.workspaceId } });
    if (!deployment) throw notFound("Deployment", id);
    if (deployment.status === "AWAITING_DELETE") throw badRequest(`Deployment ID ${id} is being deleted.`);
    return deployment;
  }

  /**
   * The installation and listener a revision names, whatever its source, must be the workspace's own
   * (400 "not found" otherwise, as if another workspace's did not exist).
   */
  private async checkReferences(db: Tx, tenant: Tenant, s: RevisionSubject, loc: "body" | null): Promise<void> {
    const refuse = (field: string, message: string) =>
      new CoreError("BAD_REQUEST", message, loc ? [{ loc: [loc, "source_config", field], msg: message, type: "value_error" }] : []);
    const integrationId = s.sourceConfig.integration_id;
    if (integrationId) {
      const found = await db.codehostInstallation.findFirst({ where: { id: integrationId, workspaceId: tenant.workspaceId }, select: { id: true } });
      if (!found) throw refuse("integration_id", `Integration ID ${integrationId} not found.`);
    }
    const listenerId = s.sourceConfig.listener_id;
    if (listenerId) {
      const found = await db.listener.findFirst({ where: { id: listenerId, workspaceId: tenant.workspaceId }, select: { id: true } });
      if (!found) throw refuse("listener_id", `Listener ID ${listenerId} not found.`);
    }
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

/**
 * Where the operator has turned internal image builds off (INTERNAL_IMAGE_BUILDS=off: the cloud
 * provider cannot run them), a revision built from an image the command-line tool pushed
 * (internal_container) is refused, pointing to a remote build from source instead.
 */
function refuseUnavailableBuild(deps: CoreDeps, source: string): void {
  if (source !== "internal_container" || deps.internalImageBuilds.available) return;
  const where = deps.internalImageBuilds.provider ? `on ${deps.internalImageBuilds.provider}` : "on this cloud provider";
  throw badRequest(
    `Internal image builds (internal_container) are not yet available ${where}. Build remotely from source instead: ` +
      `revision_source "internal_source" with source_revision_config.framework_config_path and source_tarball_path.`,
  );
}
