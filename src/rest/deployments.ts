import { Hono } from "hono";
import { z } from "zod";
import type { DeploymentService, DeploymentWithLatestConfig } from "../core/deployments.js";
import { revisionSourceRevisionConfig } from "../core/revisions.js";
import { deploymentBulkDeleteQuerySchema, deploymentDeleteQuerySchema, deploymentListQuerySchema } from "../core/schemas/deployment.js";
import { maskedSecrets, readSecretReferences } from "../core/schemas/secrets.js";
import { deploymentSourceConfig, emptySourceRevisionConfig } from "../core/schemas/source-config.js";
import { type Env, iso, pathParams, queryParams, readJson } from "./http.js";

const idParam = z.object({ deployment_id: z.uuid() });

/** SPEC.md's Deployment (list item); source_revision_config is the latest revision's. */
export const presentDeployment = (d: DeploymentWithLatestConfig) => ({
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
  status: d.status,
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

export function deploymentRoutes(deployments: DeploymentService) {
  return new Hono<Env>()
    .get("/v2/deployments", async (c) => {
      const page = await deployments.list(c.var.tenant, queryParams(c, deploymentListQuerySchema));
      return c.json({ resources: page.resources.map(presentDeployment), offset: page.offset });
    })
    .post("/v2/deployments", async (c) => {
      const deployment = await deployments.create(c.var.tenant, await readJson(c));
      return c.json(presentDeployment(deployment), 201);
    })
    .delete("/v2/deployments", async (c) => {
      const { deployment_ids } = queryParams(c, deploymentBulkDeleteQuerySchema);
      const { deleted, missing } = await deployments.deleteMany(c.var.tenant, deployment_ids);
      return c.json({ deleted_ids: deleted, missing_ids: missing }, missing.length > 0 ? 207 : 200);
    })
    .get("/v2/deployments/:deployment_id", async (c) => {
      const { deployment_id } = pathParams(c, idParam);
      return c.json(presentDeployment(await deployments.get(c.var.tenant, deployment_id)));
    })
    .patch("/v2/deployments/:deployment_id", async (c) => {
      const { deployment_id } = pathParams(c, idParam);
      return c.json(presentDeployment(await deployments.update(c.var.tenant, deployment_id, await readJson(c))));
    })
    .delete("/v2/deployments/:deployment_id", async (c) => {
      const { deployment_id } = pathParams(c, idParam);
      queryParams(c, deploymentDeleteQuerySchema);
      await deployments.delete(c.var.tenant, deployment_id);
      return c.body(null, 204);
    });
}
