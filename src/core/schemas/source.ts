import { z } from "zod";
import { isSelfHosted } from "../revision-machine.js";
import { resourceSpecSchema } from "./resource-spec.js";

export const SOURCES = ["codehost", "external_container", "internal_container", "internal_source", "internal_template"] as const;
export type Source = (typeof SOURCES)[number];
export const sourceSchema = z.enum(SOURCES);

/** Sources only available on the managed cloud: all but the self-hosted one. */
export const MANAGED_SOURCES: ReadonlySet<Source> = new Set(SOURCES.filter((s) => !isSelfHosted(s)));

/** The per-revision source override (`revision_source`) takes only these. */
export const REVISION_SOURCES = ["codehost", "internal_container", "internal_source"] as const;
export const revisionSourceSchema = z.enum(REVISION_SOURCES);

export const DEPLOYMENT_TYPES = ["dev_free", "dev", "prod", "dev_zero", "dev_free_zero"] as const;
export type DeploymentType = (typeof DEPLOYMENT_TYPES)[number];
export const deploymentTypeSchema = z.enum(DEPLOYMENT_TYPES);

/** Deployment statuses of COMPAT.md; clients break on others, so there are no others. */
export const DEPLOYMENT_STATUSES = ["AWAITING_DATABASE", "READY", "UNUSED", "AWAITING_DELETE", "UNKNOWN"] as const;
export type DeploymentStatus = (typeof DEPLOYMENT_STATUSES)[number];
export const deploymentStatusSchema = z.enum(DEPLOYMENT_STATUSES);

const text = (max: number) => z.string().min(1).max(max);

/** Source config as clients send it: every field nullable, validated per source by source-rules.ts. */
export const sourceConfigSchema = z.object({
  integration_id: z.guid().nullish(),
  repo_url: text(2048).nullish(),
  build_on_push: z.boolean().nullish(),
  custom_url: z.url({ protocol: /^https?$/ }).max(2048).nullish(),
  resource_spec: resourceSpecSchema.nullish(),
  listener_id: z.guid().nullish(),
  listener_config: z.object({ k8s_namespace: text(63).nullish() }).nullish(),
  install_command: text(4096).nullish(),
  build_command: text(4096).nullish(),
  deployment_type: deploymentTypeSchema.nullish(),
  repo_branch: text(255).nullish(),
});
export type SourceConfigInput = z.output<typeof sourceConfigSchema>;

/** The revision's own inputs; repo_commit_sha and repo_commit_title are response-only (and ignored). */
export const sourceRevisionConfigSchema = z.object({
  repo_ref: text(255).nullish(),
  framework_config_path: text(1024).nullish(),
  image_uri: text(2048).nullish(),
  source_tarball_path: text(2048).nullish(),
});
export type SourceRevisionConfigInput = z.output<typeof sourceRevisionConfigSchema>;

export const SOURCE_REVISION_FIELDS = ["repo_ref", "framework_config_path", "image_uri", "source_tarball_path"] as const;

/** Changing any of these creates a new revision (SPEC.md, COMPAT.md). */
export const REVISION_TRIGGER_FIELDS = ["custom_url", "resource_spec", "install_command", "build_command"] as const;

/** Fixed when the deployment is created: a PATCH sending another value is refused with 400. */
export const IMMUTABLE_SOURCE_CONFIG_FIELDS = ["integration_id", "repo_url", "deployment_type", "listener_id"] as const;
