import { z } from "zod";
import { REVISION_STATUSES } from "../revision-machine.js";
import { offsetQuery } from "../pagination.js";
import { agentEnvironmentSchema, agentIdSchema, agentSchema } from "./agent.js";
import { commaList, emptyFiltersUnset, queryBool } from "./query.js";
import { secretReferencesSchema, secretsSchema } from "./secrets.js";
import {
  deploymentTypeSchema,
  revisionSourceSchema,
  sourceConfigSchema,
  sourceRevisionConfigSchema,
  sourceSchema,
} from "./source.js";

export const deploymentNameSchema = z.string().min(1).max(128).regex(/^\S(.*\S)?$/);

/**
 * POST /v2/deployments. `name` is required unless `agent` is given: checked with the source rules
 * (DeploymentService.create) once the body's fields are valid, or here, with the fields' problems.
 */
export const deploymentCreateSchema = z
  .object({
    name: deploymentNameSchema.nullish(),
    // Through z.string() first so that an absent source reads "Field required" (type missing), not an enum error.
    source: z.string().pipe(sourceSchema),
    source_config: sourceConfigSchema.nullish(),
    source_revision_config: sourceRevisionConfigSchema.nullish(),
    secrets: secretsSchema.nullish(),
    secret_references: secretReferencesSchema.nullish(),
    agent: agentSchema.nullish(),
    shareable: z.boolean().nullish(),
    route_through_gateway: z.boolean().nullish(),
  })
  .superRefine(
    ({ name, agent }, ctx) => {
      // First, where pydantic reports a missing field: in the order of the fields, name being the first.
      if (name == null && agent == null) {
        ctx.issues.unshift({ code: "custom", path: ["name"], input: undefined, message: "Field required", params: { type: "missing" } });
      }
    },
    // Only with other problems (else the service tells it with the source rules), and of an object: a
    // body that is none is told so, and has no fields to read.
    { when: ({ issues, value }) => issues.length > 0 && typeof value === "object" && value !== null && !Array.isArray(value) },
  );
export type DeploymentCreateInput = z.output<typeof deploymentCreateSchema>;

/** POST /v2/deployments/{id}/revisions: the revision-relevant subset of an update. */
export const revisionCreateSchema = z.object({
  revision_source: revisionSourceSchema.nullish(),
  source_config: sourceConfigSchema.nullish(),
  source_revision_config: sourceRevisionConfigSchema.nullish(),
  secrets: secretsSchema.nullish(),
  secret_references: secretReferencesSchema.nullish(),
  shareable: z.boolean().nullish(),
  route_through_gateway: z.boolean().nullish(),
});

/** PATCH /v2/deployments/{id}. `name` and `source` are read only to refuse a change (400). */
export const deploymentUpdateSchema = revisionCreateSchema.extend({
  name: z.string().nullish(),
  source: z.string().nullish(),
});
export type DeploymentUpdateInput = z.output<typeof deploymentUpdateSchema>;

/** Typed filters of the deployment listing (GraphQL builds these directly). */
export const deploymentFilterSchema = z.object({
  name: z.string().min(1).max(128).optional(),
  name_contains: z.string().min(1).max(128).optional(),
  /** A plain string, as in the real API: a status no deployment has matches nothing. */
  status: z.string().min(1).max(64).optional(),
  remote_reconciled: z.boolean().optional(),
  tag_value_ids: z.array(z.guid()).max(100).optional(),
  image_version: z.string().min(1).max(128).optional(),
  deployment_type: deploymentTypeSchema.optional(),
  deployment_ids: z.array(z.guid()).max(100).optional(),
  url: z.string().min(1).max(2048).optional(),
  agent_id: agentIdSchema.optional(),
  agent_environment: agentEnvironmentSchema.optional(),
});
export type DeploymentFilter = z.output<typeof deploymentFilterSchema>;

/** GET /v2/deployments query string: the same filters, with lists comma separated and booleans as text; empty ones unset. */
export const deploymentListQuerySchema = emptyFiltersUnset(
  deploymentFilterSchema.extend({
    ...offsetQuery,
    remote_reconciled: queryBool.optional(),
    tag_value_ids: commaList(z.guid()).pipe(z.array(z.guid()).max(100).optional()),
    deployment_ids: commaList(z.guid()).pipe(z.array(z.guid()).max(100).optional()),
  }),
);

/** DELETE /v2/deployments?deployment_ids=a&deployment_ids=b (or a,b): 1 to 100 ids. */
export const deploymentBulkDeleteQuerySchema = z.object({
  deployment_ids: commaList(z.guid()).pipe(z.array(z.guid()).min(1).max(100)),
});

/** DELETE /v2/deployments/{id}: `delete_tracing_project` must be a boolean (there is no tracing project to delete here). */
export const deploymentDeleteQuerySchema = z.object({ delete_tracing_project: queryBool.default(false) });

export const revisionStatusSchema = z.enum(REVISION_STATUSES);

export const revisionFilterSchema = z.object({
  status: z.array(revisionStatusSchema).max(REVISION_STATUSES.length).optional(),
  remote_reconciled: z.boolean().optional(),
});
export type RevisionFilter = z.output<typeof revisionFilterSchema>;

const isRevisionStatus = (s: string): s is z.output<typeof revisionStatusSchema> => revisionStatusSchema.safeParse(s).success;

/**
 * GET /v2/deployments/{id}/revisions query string; empty filters unset. `status` is plain strings,
 * as in the real API: statuses no revision has match nothing.
 */
export const revisionListQuerySchema = emptyFiltersUnset(
  z.object({
    ...offsetQuery,
    status: commaList(z.string().max(64))
      .pipe(z.array(z.string()).max(100).optional())
      .transform((list) => list?.filter(isRevisionStatus)),
    remote_reconciled: queryBool.optional(),
  }),
);

