import { DEPLOYMENT_TYPES, type DeploymentType, REVISION_TRIGGER_FIELDS } from "../../core/schemas/source.js";
import type { AgentEnvironment } from "../../core/schemas/agent.js";
import { builder, type Types } from "../builder.js";
import { camelList } from "../input-names.js";
import { SECRET_FIELD } from "../redact.js";
import { bool, type Obj, obj, str } from "../stored-json.js";
import { AgentEnvironmentEnum, DeploymentTypeEnum, RevisionSourceEnum } from "./enums.js";
import { ResourceSpecInput, ResourceSpecRef } from "./resource-spec.js";

const ListenerConfig = builder.objectRef<Obj>("ListenerConfig").implement({
  fields: (t) => ({ k8sNamespace: t.string({ nullable: true, resolve: (o) => str(o, "k8s_namespace") }) }),
});

/** Stored deployment types are core's own values; anything else shows as null. */
const isDeploymentType = (v: string | null): v is DeploymentType => (DEPLOYMENT_TYPES as readonly (string | null)[]).includes(v);

export const SourceConfigRef = builder.objectRef<Obj>("SourceConfig").implement({
  description: `How a deployment is built and run; changing ${camelList(REVISION_TRIGGER_FIELDS, "or")} creates a revision.`,
  fields: (t) => ({
    integrationId: t.id({ nullable: true, description: "REST id of the code-hosting installation.", resolve: (o) => str(o, "integration_id") }),
    repoUrl: t.string({ nullable: true, resolve: (o) => str(o, "repo_url") }),
    buildOnPush: t.boolean({ nullable: true, resolve: (o) => bool(o, "build_on_push") }),
    customUrl: t.string({ nullable: true, resolve: (o) => str(o, "custom_url") }),
    resourceSpec: t.field({ type: ResourceSpecRef, nullable: true, resolve: (o) => obj(o, "resource_spec") }),
    listenerId: t.id({ nullable: true, description: "REST id of the listener (self-hosted).", resolve: (o) => str(o, "listener_id") }),
    listenerConfig: t.field({ type: ListenerConfig, nullable: true, resolve: (o) => obj(o, "listener_config") }),
    installCommand: t.string({ nullable: true, resolve: (o) => str(o, "install_command") }),
    buildCommand: t.string({ nullable: true, resolve: (o) => str(o, "build_command") }),
    deploymentType: t.field({
      type: DeploymentTypeEnum,
      nullable: true,
      resolve: (o) => {
        const v = str(o, "deployment_type");
        return isDeploymentType(v) ? v : null;
      },
    }),
    repoBranch: t.string({ nullable: true, resolve: (o) => str(o, "repo_branch") }),
  }),
});

export const SourceRevisionConfigRef = builder.objectRef<Obj>("SourceRevisionConfig").implement({
  description: "What one revision is built from, and the commit the pipeline resolved for it.",
  fields: (t) => ({
    repoRef: t.string({ nullable: true, resolve: (o) => str(o, "repo_ref") }),
    frameworkConfigPath: t.string({ nullable: true, resolve: (o) => str(o, "framework_config_path") }),
    imageUri: t.string({ nullable: true, resolve: (o) => str(o, "image_uri") }),
    sourceTarballPath: t.string({ nullable: true, resolve: (o) => str(o, "source_tarball_path") }),
    repoCommitSha: t.string({ nullable: true, resolve: (o) => str(o, "repo_commit_sha") }),
    repoCommitTitle: t.string({ nullable: true, resolve: (o) => str(o, "repo_commit_title") }),
  }),
});

export const SecretRef = builder.objectRef<{ name: string }>("Secret").implement({
  description: "A secret given to the deployment as an environment variable. Only its name is ever shown.",
  fields: (t) => ({ name: t.exposeString("name") }),
});

export const SecretReferenceRef = builder.objectRef<{ name: string; secret_name: string; secret_key: string }>("SecretReference").implement({
  description: "An environment variable taken from a key of a Kubernetes secret.",
  fields: (t) => ({
    name: t.exposeString("name"),
    secretName: t.exposeString("secret_name"),
    secretKey: t.exposeString("secret_key"),
  }),
});

export const AgentRef = builder.objectRef<{ agentId: string; environment: string }>("Agent").implement({
  fields: (t) => ({
    agentId: t.exposeString("agentId"),
    environment: t.field({ type: AgentEnvironmentEnum, resolve: (a) => a.environment as AgentEnvironment }),
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
