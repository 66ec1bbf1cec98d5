import { Hono } from "hono";
import { z } from "zod";
import type { DeploymentService } from "../core/deployments.js";
import type { RevisionStatus } from "../core/revision-machine.js";
import { type Revision, type RevisionService, revisionSourceRevisionConfig } from "../core/revisions.js";
import { revisionListQuerySchema, revisionStatusSchema } from "../core/schemas/deployment.js";
import { presentDeployment } from "./deployments.js";
import { type Env, iso, pathParams, queryParams, readJson } from "./http.js";
import { revisionCreateSchema } from "../core/schemas/deployment.js";
import { describe, notFound, refused, timestamp } from "./docs.js";
import { deploymentSchema, sourceRevisionConfigAnswer } from "./deployments.js";

const deploymentParam = z.object({ deployment_id: z.guid() });
const revisionParams = z.object({ deployment_id: z.guid(), revision_id: z.guid() });

/** SPEC.md's Revision. */
export const presentRevision = (r: Revision): z.input<typeof revisionSchema> => ({
  id: r.id,
  created_at: iso(r.createdAt),
  updated_at: iso(r.updatedAt),
  // Stored as text; only the state machine (core/revision-machine.ts) writes it.
  status: r.status as RevisionStatus,
  source: r.source,
  source_revision_config: revisionSourceRevisionConfig(r),
  status_message: r.statusMessage,
});

export const revisionSchema = z.object({
  id: z.uuid(),
  created_at: timestamp,
  updated_at: timestamp,
  status: revisionStatusSchema,
  source: z.string(),
  source_revision_config: sourceRevisionConfigAnswer,
  status_message: z.string(),
}).meta({ id: "Revision" });
const revisionPage = z.object({ resources: z.array(revisionSchema), offset: z.number().int() });
// The reference has the revisions under its deployments.
const tag = "Deployments (v2)";

export function revisionRoutes(services: { deployments: DeploymentService; revisions: RevisionService }) {
  const { deployments, revisions } = services;
  const base = "/v2/deployments/:deployment_id/revisions";
  return new Hono<Env>()
    .get(base, describe({ tag, operationId: "list_revisions_v2_deployments__deployment_id__revisions_get", summary: "List a deployment's revisions", params: deploymentParam, query: revisionListQuerySchema, responses: { 200: { description: "A page of revisions, newest first", schema: revisionPage }, 404: notFound } }, async (c) => {
      const { deployment_id } = pathParams(c, deploymentParam);
      const page = await revisions.list(c.var.tenant, deployment_id, queryParams(c, revisionListQuerySchema));
      return c.json({ resources: page.resources.map(presentRevision), offset: page.offset });
    }))
    .post(base, describe({ tag, operationId: "create_deployment_revision", summary: "Create a revision (deploy)", params: deploymentParam, body: revisionCreateSchema, idempotent: true, responses: { 201: { description: "The revision", schema: revisionSchema }, 404: notFound, 400: refused("The revision cannot be made: a source that cannot be used, or a deployment being deleted"), 409: refused("The custom_url's host serves another deployment") } }, async (c) => {
      const { deployment_id } = pathParams(c, deploymentParam);
      const revision = await deployments.createRevision(c.var.tenant, deployment_id, await readJson(c));
      return c.json(presentRevision(revision), 201);
    }))
    .get(`${base}/:revision_id`, describe({ tag, operationId: "get_revision_v2_deployments__deployment_id__revisions__revision_id__get", summary: "Get a revision", params: revisionParams, responses: { 200: { description: "The revision", schema: revisionSchema }, 404: notFound } }, async (c) => {
      const { deployment_id, revision_id } = pathParams(c, revisionParams);
      return c.json(presentRevision(await revisions.get(c.var.tenant, deployment_id, revision_id)));
    }))
    .post(`${base}/:revision_id/redeploy`, describe({ tag, operationId: "redeploy_revision_v2_deployments__deployment_id__revisions__revision_id__redeploy_post", summary: "Redeploy a revision", params: revisionParams, idempotent: true, responses: { 200: { description: "The deployment", schema: deploymentSchema }, 404: notFound, 400: refused("The revision cannot be redeployed: its source cannot be used now, or the deployment is being deleted"), 409: refused("The revision's custom_url has a host that serves another deployment now") } }, async (c) => {
      const { deployment_id, revision_id } = pathParams(c, revisionParams);
      return c.json(presentDeployment(await deployments.redeploy(c.var.tenant, deployment_id, revision_id)));
    }))
    .post(`${base}/:revision_id/interrupt`, describe({ tag, summary: "Interrupt a revision in progress", params: revisionParams, idempotent: true, responses: { 200: { description: "The revision", schema: revisionSchema }, 404: notFound, 400: refused("The revision has ended already") } }, async (c) => {
      const { deployment_id, revision_id } = pathParams(c, revisionParams);
      return c.json(presentRevision(await revisions.interrupt(c.var.tenant, deployment_id, revision_id)));
    }));
}
