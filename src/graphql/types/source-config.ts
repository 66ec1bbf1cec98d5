import { DEPLOYMENT_TYPES, type DeploymentType, REVISION_TRIGGER_FIELDS } from "../../core/schemas/source.js";
import type { AgentEnvironment } from "../../core/schemas/agent.js";
import { builder, type Types } from "../builder.js";
import { camelList } from "../input-names.js";
import { SECRET_FIELD } from "../redact.js";
import { readSecretReferences } from "../../core/schemas/secrets.js";
import { bool, isObj, type Obj, obj, str } from "../../core/stored-json.js";
import type { SourceConfig } from "../../core/schemas/source-config.js";
import type { RevisionConfig } from "../../core/revisions.js";
import { AgentEnvironmentEnum, DeploymentTypeEnum, RevisionSourceEnum } from "./enums.js";
import { ResourceSpecInput, ResourceSpecRef, resourceSpecView, type ResourceSpecView } from "./resource-spec.js";

interface ListenerConfigView {
  k8sNamespace: string | null;
}

const ListenerConfig = builder.objectRef<ListenerConfigView>("ListenerConfig").implement({
  fields: (t) => ({ k8sNamespace: t.exposeString("k8sNamespace", { nullable: true }) }),
});

/** Stored deployment types are core's own values; anything else shows as null. */
const isDeploymentType = (v: string | null): v is DeploymentType => (DEPLOYMENT_TYPES as readonly (string | null)[]).includes(v);

/**
 * A source config as GraphQL shows it: each field under its GraphQL name, read once with stored-json's
 * rules (a value of the wrong shape is null), so that answering a field is a property read. Pages
 * show this object for every deployment and revision; resolving its fields one by one cost a
 * resolver call each.
 */
export interface SourceConfigView {
  integrationId: string | null;
  repoUrl: string | null;
  buildOnPush: boolean | null;
  customUrl: string | null;
  resourceSpec: ResourceSpecView | null;
  listenerId: string | null;
  listenerConfig: ListenerConfigView | null;
  installCommand: string | null;
  buildCommand: string | null;
  deploymentType: DeploymentType | null;
  repoBranch: string | null;
}

/** The view of a source config in REST's shape (core's SourceConfig). */
export function sourceConfigView(config: SourceConfig): SourceConfigView {
  const o = config as unknown as Obj;
  const deploymentType = str(o, "deployment_type");
  const resourceSpec = obj(o, "resource_spec");
  const listenerConfig = obj(o, "listener_config");
  return {
    integrationId: str(o, "integration_id"),
    repoUrl: str(o, "repo_url"),
    buildOnPush: bool(o, "build_on_push"),
    customUrl: str(o, "custom_url"),
    resourceSpec: resourceSpec && resourceSpecView(resourceSpec),
    listenerId: str(o, "listener_id"),
    listenerConfig: listenerConfig && { k8sNamespace: str(listenerConfig, "k8s_namespace") },
    installCommand: str(o, "install_command"),
    buildCommand: str(o, "build_command"),
    deploymentType: isDeploymentType(deploymentType) ? deploymentType : null,
    repoBranch: str(o, "repo_branch"),
  };
}

export const SourceConfigRef = builder.objectRef<SourceConfigView>("SourceConfig").implement({
  description: `How a deployment is built and run; changing ${camelList(REVISION_TRIGGER_FIELDS, "or")} creates a revision.`,
  fields: (t) => ({
    integrationId: t.exposeID("integrationId", { nullable: true, description: "REST id of the code-hosting installation." }),
    repoUrl: t.exposeString("repoUrl", { nullable: true }),
    buildOnPush: t.exposeBoolean("buildOnPush", { nullable: true }),
    customUrl: t.exposeString("customUrl", {
      nullable: true,
      description: "The custom URL the deployment is served at; null when none is set (Deployment.url is where it is served: REST's custom_url shows that instead).",
    }),
    resourceSpec: t.expose("resourceSpec", { type: ResourceSpecRef, nullable: true }),
    listenerId: t.exposeID("listenerId", { nullable: true, description: "REST id of the listener (self-hosted)." }),
    listenerConfig: t.expose("listenerConfig", { type: ListenerConfig, nullable: true }),
    installCommand: t.exposeString("installCommand", { nullable: true }),
    buildCommand: t.exposeString("buildCommand", { nullable: true }),
    deploymentType: t.expose("deploymentType", { type: DeploymentTypeEnum, nullable: true }),
    repoBranch: t.exposeString("repoBranch", { nullable: true }),
  }),
});

/** A source revision config as GraphQL shows it (see SourceConfigView): its inputs and the commit the pipeline resolved. */
export interface SourceRevisionConfigView {
  repoRef: string | null;
  frameworkConfigPath: string | null;
  imageUri: string | null;
  sourceTarballPath: string | null;
  repoCommitSha: string | null;
  repoCommitTitle: string | null;
}

/** The view of a revision's source revision config; a deployment without revisions shows all null. */
export function sourceRevisionConfigView(r: RevisionConfig | null): SourceRevisionConfigView {
  const o: Obj = r && isObj(r.sourceRevisionConfig) ? r.sourceRevisionConfig : {};
  return {
    repoRef: str(o, "repo_ref"),
    frameworkConfigPath: str(o, "framework_config_path"),
    imageUri: str(o, "image_uri"),
    sourceTarballPath: str(o, "source_tarball_path"),
    repoCommitSha: r?.repoCommitSha ?? null,
    repoCommitTitle: r?.repoCommitTitle ?? null,
  };
}

export const SourceRevisionConfigRef = builder.objectRef<SourceRevisionConfigView>("SourceRevisionConfig").implement({
  description: "What one revision is built from, and the commit the pipeline resolved for it.",
  fields: (t) => ({
    repoRef: t.exposeString("repoRef", { nullable: true }),
    frameworkConfigPath: t.exposeString("frameworkConfigPath", { nullable: true }),
    imageUri: t.exposeString("imageUri", { nullable: true }),
    sourceTarballPath: t.exposeString("sourceTarballPath", { nullable: true }),
    repoCommitSha: t.exposeString("repoCommitSha", { nullable: true }),
    repoCommitTitle: t.exposeString("repoCommitTitle", { nullable: true }),
  }),
});

export const SecretRef = builder.objectRef<{ name: string }>("Secret").implement({
  description: "A secret given to the deployment as an environment variable. Only its name is ever shown.",
  fields: (t) => ({ name: t.exposeString("name") }),
});

export interface SecretReferenceView {
  name: string;
  secretName: string;
  secretKey: string;
}

/** Stored secret references (REST's shape) under their GraphQL names, so that each field is a property read. */
export const secretReferencesView = (json: unknown): SecretReferenceView[] =>
  readSecretReferences(json).map((r) => ({ name: r.name, secretName: r.secret_name, secretKey: r.secret_key }));

export const SecretReferenceRef = builder.objectRef<SecretReferenceView>("SecretReference").implement({
  description: "An environment variable taken from a key of a Kubernetes secret.",
  fields: (t) => ({
    name: t.exposeString("name"),
    secretName: t.exposeString("secretName"),
    secretKey: t.exposeString("secretKey"),
  }),
});

export const AgentRef = builder.objectRef<{ agentId: string; environment: AgentEnvironment }>("Agent").implement({
  fields: (t) => ({
    agentId: t.exposeString("agentId"),
    environment: t.expose("environment", { type: AgentEnvironmentEnum }),
  }),
});

// Inputs

const ListenerConfigInput = builder.inputType("ListenerConfigInput", { fields: (t) => ({ k8sNamespace: t.string() }) });

export const SourceConfigInput = builder.inputType("SourceConfigInput", {
  description: "Omitted or null fields keep their current value on update.",
  fields: (t) => ({
    integrationId: t.id({ description: "REST id (uuid) of a code-hosting installation." }),
    repoUrl: t.string(),
    buildOnPush: t.boolean(),
    customUrl: t.string(),
    resourceSpec: t.field({ type: ResourceSpecInput }),
    listenerId: t.id({ description: "REST id (uuid) of a listener (self-hosted)." }),
    listenerConfig: t.field({ type: ListenerConfigInput }),
    installCommand: t.string(),
    buildCommand: t.string(),
    deploymentType: t.field({ type: DeploymentTypeEnum }),
    repoBranch: t.string(),
  }),
});

export const SourceRevisionConfigInput = builder.inputType("SourceRevisionConfigInput", {
  fields: (t) => ({
    repoRef: t.string(),
    frameworkConfigPath: t.string(),
    imageUri: t.string(),
    sourceTarballPath: t.string(),
  }),
});

/** Its value is a secret: errors never quote it (redact.ts), nor any input that holds it. */
export const SecretInput = builder.inputType("SecretInput", {
  fields: (t) => ({ name: t.string({ required: true }), value: t.string({ required: true, extensions: SECRET_FIELD }) }),
});

export const SecretReferenceInput = builder.inputType("SecretReferenceInput", {
  fields: (t) => ({ name: t.string({ required: true }), secretName: t.string({ required: true }), secretKey: t.string({ required: true }) }),
});

export const AgentInput = builder.inputType("AgentInput", {
  fields: (t) => ({ agentId: t.string({ required: true }), environment: t.field({ type: AgentEnvironmentEnum, required: true }) }),
});

/**
 * What a new revision can change, shared by DeploymentUpdateInput and RevisionCreateInput (the
 * body of PATCH /v2/deployments/{id} and of POST …/revisions).
 */
export const revisionChangeFields = (t: PothosSchemaTypes.InputFieldBuilder<Types, "InputObject">, revisionSource: string) => ({
  revisionSource: t.field({ type: RevisionSourceEnum, description: revisionSource }),
  sourceConfig: t.field({ type: SourceConfigInput }),
  sourceRevisionConfig: t.field({ type: SourceRevisionConfigInput }),
  secrets: t.field({ type: [SecretInput], description: "Replaces all secrets." }),
  secretReferences: t.field({ type: [SecretReferenceInput] }),
  shareable: t.boolean(),
  routeThroughGateway: t.boolean(),
});
