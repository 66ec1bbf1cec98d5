import { REVISION_STATUSES } from "../../pipeline/machine.js";
import { builder } from "../builder.js";

/** GraphQL enum names are UPPER_CASE; their values are the REST strings, so core sees its own names. */
function restEnum<const V extends string>(name: string, description: string, values: readonly V[]) {
  return builder.enumType(name, {
    description,
    values: Object.fromEntries(values.map((v) => [v.toUpperCase(), { value: v }])) as Record<string, { value: V }>,
  });
}

export const SOURCES = ["codehost", "external_container", "internal_container", "internal_source", "internal_template"] as const;
export const SourceEnum = restEnum(
  "Source",
  "Where a deployment's code comes from: a code repository, an external image (self-hosted), an image pushed by the command-line tool, uploaded source, or a template.",
  SOURCES,
);

/** The sources a single revision may override the deployment's with. */
export const RevisionSourceEnum = restEnum("RevisionSource", "A source one revision may override the deployment's with.", [
  "codehost",
  "internal_container",
  "internal_source",
] as const);

export const RevisionStatusEnum = restEnum(
  "RevisionStatus",
  "A revision's status. A full build goes CREATING, QUEUED, AWAITING_BUILD, BUILDING, AWAITING_DEPLOY, DEPLOYING, DEPLOYED; the FAILED statuses, DEPLOYED, SKIPPED and INTERRUPTED are terminal.",
  REVISION_STATUSES,
);

export const DeploymentStatusEnum = restEnum("DeploymentStatus", "A deployment's own status.", [
  "AWAITING_DATABASE",
  "READY",
  "UNUSED",
  "AWAITING_DELETE",
  "UNKNOWN",
] as const);

export const DeploymentTypeEnum = restEnum("DeploymentType", "The kind of deployment.", [
  "dev_free",
  "dev",
  "prod",
  "dev_zero",
  "dev_free_zero",
] as const);

export const AgentEnvironmentEnum = restEnum("AgentEnvironment", "The environment an agent runs in.", [
  "local",
  "development",
  "staging",
  "production",
] as const);

export const ComputeTypeEnum = restEnum("ComputeType", "Where a listener runs workloads.", ["k8s"] as const);

export const RepositorySelectionEnum = restEnum(
  "RepositorySelection",
  "Which repositories an installation may access: ALL, or only SELECTED ones (new repositories must be added at the provider).",
  ["all", "selected"] as const,
);
