import { Hono } from "hono";
import { z } from "zod";
import type { DeploymentService } from "../core/deployments.js";
import { type Revision, type RevisionService, revisionSourceRevisionConfig } from "../core/revisions.js";
import { revisionListQuerySchema } from "../core/schemas/deployment.js";
import { presentDeployment } from "./deployments.js";
import { type Env, iso, pathParams, queryParams, readJson } from "./http.js";

const deploymentParam = z.object({ deployment_id: z.uuid() });
const revisionParams = z.object({ deployment_id: z.uuid(), revision_id: z.uuid() });

/** SPEC.md's Revision. */
export const presentRevision = (r: Revision) => ({
  id: r.id,
  created_at: iso(r.createdAt),
  updated_at: iso(r.updatedAt),
  status: r.status,
  source: r.source,
  source_revision_config: revisionSourceRevisionConfig(r),
  status_message: r.statusMessage,
});

export function revisionRoutes(services: { deployments: DeploymentService; revisions: RevisionService }) {
  const { deployments, revisions } = services;
  const base = "/v2/deployments/:deployment_id/revisions";
  return new Hono<Env>()
    .get(base, async (c) => {
      const { deployment_id } = pathParams(c, deploymentParam);
      const page = await revisions.list(c.var.tenant, deployment_id, queryParams(c, revisionListQuerySchema));
      return c.json({ resources: page.resources.map(presentRevision), offset: page.offset });
    })
    .post(base, async (c) => {
      const { deployment_id } = pathParams(c, deploymentParam);
      const revision = await deployments.createRevision(c.var.tenant, deployment_id, await readJson(c));
      return c.json(presentRevision(revision), 201);
    })
    .get(`${base}/:revision_id`, async (c) => {
      const { deployment_id, revision_id } = pathParams(c, revisionParams);
      return c.json(presentRevision(await revisions.get(c.var.tenant, deployment_id, revision_id)));
    })
    .post(`${base}/:revision_id/redeploy`, async (c) => {
      const { deployment_id, revision_id } = pathParams(c, revisionParams);
      return c.json(presentDeployment(await deployments.redeploy(c.var.tenant, deployment_id, revision_id)));
    })
    .post(`${base}/:revision_id/interrupt`, async (c) => {
      const { deployment_id, revision_id } = pathParams(c, revisionParams);
      return c.json(presentRevision(await revisions.interrupt(c.var.tenant, deployment_id, revision_id)));
    });
}
