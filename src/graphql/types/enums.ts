import { AGENT_ENVIRONMENTS } from "../../core/schemas/agent.js";
import { LOG_KINDS, LOG_LEVELS } from "../../core/schemas/logs.js";
import { DEPLOYMENT_STATUSES, DEPLOYMENT_TYPES, REVISION_SOURCES, SOURCES } from "../../core/schemas/source.js";
import { REVISION_STATUSES } from "../../core/revision-machine.js";
import { builder } from "../builder.js";

/**
 * GraphQL enum names are UPPER_CASE; their values are core's own strings (the REST ones), so inputs
 * reach core in its words and stored values show without translation tables.
 */
function coreEnum<const V extends string>(name: string, description: string, values: readonly V[]) {
  return builder.enumType(name, {
    description,
    values: Object.fromEntries(values.map((v) => [v.toUpperCase(), { value: v }])) as Record<string, { value: V }>,
  });
}

export const SourceEnum = coreEnum(
  "Source",
  "Where a deployment's code comes from: a code repository, an external image (self-hosted), an image pushed by the command-line tool, uploaded source, or a template.",
  SOURCES,
);

export const RevisionSourceEnum = coreEnum("RevisionSource", "A source one revision may override the deployment's with.", REVISION_SOURCES);

export const RevisionStatusEnum = coreEnum(
  "RevisionStatus",
  "A revision's status. A full build goes CREATING, QUEUED, AWAITING_BUILD, BUILDING, AWAITING_DEPLOY, DEPLOYING, DEPLOYED; the FAILED statuses, DEPLOYED, SKIPPED and INTERRUPTED are terminal.",
  REVISION_STATUSES,
);

export const DeploymentStatusEnum = coreEnum("DeploymentStatus", "A deployment's own status.", DEPLOYMENT_STATUSES);

export const DeploymentTypeEnum = coreEnum("DeploymentType", "The kind of deployment.", DEPLOYMENT_TYPES);

export const AgentEnvironmentEnum = coreEnum("AgentEnvironment", "The environment an agent runs in.", AGENT_ENVIRONMENTS);

export const ComputeTypeEnum = coreEnum("ComputeType", "Where a listener runs workloads.", ["k8s"] as const);

export const RepositorySelectionEnum = coreEnum(
  "RepositorySelection",
  "Which repositories an installation may access: ALL, or only SELECTED ones (new repositories must be added at the provider).",
  ["all", "selected"] as const,
);

export const LogLevelEnum = coreEnum("LogLevel", "A log line's level, from least to most severe: DEBUG, INFO, WARNING, ERROR, CRITICAL.", LOG_LEVELS);

export const LogKindEnum = coreEnum("LogKind", "A revision's two logs: BUILD (creating, queueing and building) and DEPLOY (deploying; all of a revision with nothing to build).", LOG_KINDS);
