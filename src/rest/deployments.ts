import { Hono } from "hono";
import { z } from "zod";
import type { DeploymentService, DeploymentWithLatestConfig } from "../core/deployments.js";
import { revisionSourceRevisionConfig } from "../core/revisions.js";
import { deploymentBulkDeleteQuerySchema, deploymentDeleteQuerySchema, deploymentListQuerySchema } from "../core/schemas/deployment.js";
import { maskedSecrets, readSecretReferences, secretReferenceSchema } from "../core/schemas/secrets.js";
import { deploymentSourceConfig, emptySourceRevisionConfig } from "../core/schemas/source-config.js";
import { type DeploymentStatus, deploymentStatusSchema, sourceConfigSchema, sourceRevisionConfigSchema } from "../core/schemas/source.js";
import { type Env, iso, pathParams, queryParams, readJson } from "./http.js";
import { deploymentCreateSchema, deploymentUpdateSchema } from "../core/schemas/deployment.js";
import { describe, notFound, refused, timestamp } from "./docs.js";

const idParam = z.object({ deployment_id: z.guid() });

/** SPEC.md's Deployment (list item); source_revision_config is the latest revision's. */
export const presentDeployment = (d: DeploymentWithLatestConfig): z.input<typeof deploymentSchema> => ({
  id: d.id,
  tenant_id: d.workspaceId,
  created_at: iso(d.createdAt),
  updated_at: iso(d.updatedAt),
  name: d.name,
  display_name: d.displayName,
  source: d.source,
  // custom_url shows where the deployment is served: the custom URL when set, else the generated one.
  source_config: { ...deploymentSourceConfig(d), custom_url: d.url },
  source_revision_config: d.latestRevision
    ? revisionSourceRevisionConfig(d.latestRevision)
    : { ...emptySourceRevisionConfig(), repo_commit_sha: null, repo_commit_title: null },
  secrets: maskedSecrets(d.secrets),
  secret_references: readSecretReferences(d.secretReferences),
  // Stored as text; only core's transitions write it (as GraphQL's DeploymentStatus reads it).
  status: d.status as DeploymentStatus,
  latest_revision_id: d.latestRevisionId,
  active_revision_id: d.activeRevisionId,
  agent: d.agentId && d.agentEnvironment ? { agent_id: d.agentId, environment: d.agentEnvironment } : null,
  shareable: d.shareable,
  route_through_gateway: d.routeThroughGateway,
  tracer_session_id: d.tracerSessionId,
  url: d.url,
  is_preview: d.isPreview,
  image_version: d.imageVersion,
  is_managed_deep_agent: d.isManagedDeepAgent,
  deployment_tier: d.deploymentTier,
  compute_tier: d.computeTier,
  database_tier: d.databaseTier,
});

/**
 * A source config as answers show it: every key the request's has, present (null when unset, as
 * readSourceConfig fills it), each holding what the request's schema let in.
 */
const sourceConfigAnswer = sourceConfigSchema
  .required()
  .extend({
    // Where the deployment is served: the custom URL when set, else the generated one (presentDeployment).
    custom_url: z.string(),
  })
  .meta({ id: "SourceConfig" });

/** A revision's source_revision_config as answers show it (revisionSourceRevisionConfig): the request's keys, and the commit built. */
export const sourceRevisionConfigAnswer = sourceRevisionConfigSchema
  .required()
  .extend({
    repo_commit_sha: z.string().nullable(),
    repo_commit_title: z.string().nullable(),
  })
  .meta({ id: "SourceRevisionConfig" });

export const deploymentSchema = z.object({
  id: z.uuid(),
  tenant_id: z.uuid(),
  created_at: timestamp,
  updated_at: timestamp,
  name: z.string(),
  display_name: z.string(),
  source: z.string(),
  source_config: sourceConfigAnswer,
  source_revision_config: sourceRevisionConfigAnswer,
  secrets: z.array(z.object({ name: z.string(), value: z.string().describe("Always masked") })),
  // readSecretReferences keeps the stored references this schema reads.
  secret_references: z.array(secretReferenceSchema.meta({ id: "SecretReference" })),
  status: deploymentStatusSchema,
  latest_revision_id: z.uuid().nullable(),
  active_revision_id: z.uuid().nullable(),
  agent: z.object({ agent_id: z.string(), environment: z.string() }).nullable(),
  shareable: z.boolean(),
  route_through_gateway: z.boolean(),
  tracer_session_id: z.string(),
  url: z.string(),
  is_preview: z.boolean(),
  image_version: z.string(),
  is_managed_deep_agent: z.boolean(),
  deployment_tier: z.string(),
  compute_tier: z.string(),
  database_tier: z.string(),
}).meta({ id: "Deployment" });
const deploymentPage = z.object({ resources: z.array(deploymentSchema), offset: z.number().int() });
const bulkDeleted = z.object({ deleted_ids: z.array(z.uuid()), missing_ids: z.array(z.string()) });
const tag = "Deployments (v2)";

export function deploymentRoutes(deployments: DeploymentService) {
  return new Hono<Env>()
    .get("/v2/deployments", describe({ tag, operationId: "list_deployments_v2_deployments_get", summary: "List deployments", query: deploymentListQuerySchema, responses: { 200: { description: "A page of deployments", schema: deploymentPage } } }, async (c) => {
      const page = await deployments.list(c.var.tenant, queryParams(c, deploymentListQuerySchema));
      return c.json({ resources: page.resources.map(presentDeployment), offset: page.offset });
    }))
    .post("/v2/deployments", describe({ tag, operationId: "create_deployment_v2_deployments_post", summary: "Create a deployment (and its first revision)", body: deploymentCreateSchema, idempotent: true, responses: { 201: { description: "The deployment", schema: deploymentSchema }, 400: refused("The source cannot be used here: a build this service cannot run, a self-hosted source without a listener, or an integration or listener not found"), 409: refused("A deployment of that name exists in the workspace, or the custom_url's host serves another deployment") } }, async (c) => {
      const deployment = await deployments.create(c.var.tenant, await readJson(c));
      return c.json(presentDeployment(deployment), 201);
    }))
    .delete("/v2/deployments", describe({ tag, operationId: "delete_deployments_v2_deployments_delete", summary: "Delete several deployments", query: deploymentBulkDeleteQuerySchema, responses: { 200: { description: "All were deleted", schema: bulkDeleted }, 207: { description: "Some were not found: missing_ids names them", schema: bulkDeleted }, 404: refused("None of the deployment IDs were found") } }, async (c) => {
      const { deployment_ids } = queryParams(c, deploymentBulkDeleteQuerySchema);
      const { deleted, missing } = await deployments.deleteMany(c.var.tenant, deployment_ids);
      return c.json({ deleted_ids: deleted, missing_ids: missing }, missing.length > 0 ? 207 : 200);
    }))
    .get("/v2/deployments/:deployment_id", describe({ tag, operationId: "get_deployment_v2_deployments__deployment_id__get", summary: "Get a deployment", params: idParam, responses: { 200: { description: "The deployment", schema: deploymentSchema }, 404: notFound } }, async (c) => {
      const { deployment_id } = pathParams(c, idParam);
      return c.json(presentDeployment(await deployments.get(c.var.tenant, deployment_id)));
    }))
    .patch("/v2/deployments/:deployment_id", describe({ tag, operationId: "patch_deployment_v2_deployments__deployment_id__patch", summary: "Update a deployment (a new revision when its source changes)", params: idParam, body: deploymentUpdateSchema, responses: { 200: { description: "The deployment", schema: deploymentSchema }, 404: notFound, 400: refused("A field that cannot change once created, a source that cannot be used, revision_source on a self-hosted deployment, or a deployment being deleted"), 409: refused("The custom_url's host serves another deployment") } }, async (c) => {
      const { deployment_id } = pathParams(c, idParam);
      return c.json(presentDeployment(await deployments.update(c.var.tenant, deployment_id, await readJson(c))));
    }))
    .delete("/v2/deployments/:deployment_id", describe({ tag, operationId: "delete_deployment_v2_deployments__deployment_id__delete", summary: "Delete a deployment", params: idParam, query: deploymentDeleteQuerySchema, responses: { 204: { description: "Deleted" }, 404: notFound } }, async (c) => {
      const { deployment_id } = pathParams(c, idParam);
      queryParams(c, deploymentDeleteQuerySchema);
      await deployments.delete(c.var.tenant, deployment_id);
      return c.body(null, 204);
    }));
}
