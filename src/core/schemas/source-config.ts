import type { Deployment } from "../../generated/prisma/client.js";
import type { DeploymentType, SourceConfigInput, SourceRevisionConfigInput } from "./source.js";
import type { ResourceSpec } from "./resource-spec.js";
import { isObj } from "../stored-json.js";

/** A source config with every key present (null when unset): how it is stored and shown. */
export interface SourceConfig {
  integration_id: string | null;
  repo_url: string | null;
  build_on_push: boolean | null;
  custom_url: string | null;
  resource_spec: ResourceSpec | null;
  listener_id: string | null;
  listener_config: { k8s_namespace?: string | null } | null;
  install_command: string | null;
  build_command: string | null;
  deployment_type: DeploymentType | null;
  repo_branch: string | null;
}

export interface SourceRevisionConfig {
  repo_ref: string | null;
  framework_config_path: string | null;
  image_uri: string | null;
  source_tarball_path: string | null;
}

const SOURCE_CONFIG_KEYS = [
  "integration_id",
  "repo_url",
  "build_on_push",
  "custom_url",
  "resource_spec",
  "listener_id",
  "listener_config",
  "install_command",
  "build_command",
  "deployment_type",
  "repo_branch",
] as const satisfies readonly (keyof SourceConfig)[];

const SOURCE_REVISION_CONFIG_KEYS = ["repo_ref", "framework_config_path", "image_uri", "source_tarball_path"] as const;

type Loose<T> = { [K in keyof T]?: T[K] | null | undefined };

/** `base` with every non-null field of `patch` laid over it: clients send null for "leave as is". */
export function overlay<T extends object>(base: T, patch: Loose<T> | null | undefined): T {
  const out = { ...base };
  if (!patch) return out;
  for (const key of Object.keys(base) as (keyof T)[]) {
    const value = patch[key];
    if (value !== null && value !== undefined) out[key] = value as T[keyof T];
  }
  return out;
}

export const emptySourceConfig = (): SourceConfig =>
  Object.fromEntries(SOURCE_CONFIG_KEYS.map((k) => [k, null])) as unknown as SourceConfig;

export const emptySourceRevisionConfig = (): SourceRevisionConfig =>
  Object.fromEntries(SOURCE_REVISION_CONFIG_KEYS.map((k) => [k, null])) as unknown as SourceRevisionConfig;

export const toSourceConfig = (input: SourceConfigInput | null | undefined): SourceConfig =>
  overlay(emptySourceConfig(), input as Loose<SourceConfig> | null | undefined);

export const toSourceRevisionConfig = (input: SourceRevisionConfigInput | null | undefined): SourceRevisionConfig =>
  overlay(emptySourceRevisionConfig(), input);

/** Reads a stored source config (JSON written by core), filling keys it lacks with null. */
const NOTHING: Record<string, unknown> = {};
type Stored<T> = { [K in keyof T]: T[K] };

/**
 * Literal objects, keys in SOURCE_CONFIG_KEYS order (the order answers show them in): read for every
 * deployment and revision of a page, where building them through Object.fromEntries showed in
 * profiles.
 */
export function readSourceConfig(json: unknown): SourceConfig {
  const s = (isObj(json) ? json : NOTHING) as Partial<Stored<SourceConfig>>;
  return {
    integration_id: s.integration_id ?? null,
    repo_url: s.repo_url ?? null,
    build_on_push: s.build_on_push ?? null,
    custom_url: s.custom_url ?? null,
    resource_spec: s.resource_spec ?? null,
    listener_id: s.listener_id ?? null,
    listener_config: s.listener_config ?? null,
    install_command: s.install_command ?? null,
    build_command: s.build_command ?? null,
    deployment_type: s.deployment_type ?? null,
    repo_branch: s.repo_branch ?? null,
  } satisfies Record<(typeof SOURCE_CONFIG_KEYS)[number], unknown>;
}

export function readSourceRevisionConfig(json: unknown): SourceRevisionConfig {
  const s = (isObj(json) ? json : NOTHING) as Partial<Stored<SourceRevisionConfig>>;
  return {
    repo_ref: s.repo_ref ?? null,
    framework_config_path: s.framework_config_path ?? null,
    image_uri: s.image_uri ?? null,
    source_tarball_path: s.source_tarball_path ?? null,
  } satisfies Record<(typeof SOURCE_REVISION_CONFIG_KEYS)[number], unknown>;
}

/** Structural equality of JSON values, whatever the key order. */
export function sameJson(a: unknown, b: unknown): boolean {
  return canonical(a) === canonical(b);
}

function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (isObj(value)) {
    const keys = Object.keys(value).filter((k) => value[k] !== undefined).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical(value[k])}`).join(",")}}`;
  }
  return JSON.stringify(value ?? null);
}

/** https://<name>-<first 8 of id>.<domain>, the name made a valid DNS label; or the custom URL. */
export function servingUrl(name: string, id: string, customUrl: string | null, domain: string): string {
  if (customUrl) return customUrl;
  const label = name.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-+|-+$/g, "").slice(0, 54).replace(/-+$/, "");
  return `https://${label || "deployment"}-${id.slice(0, 8)}.${domain}`;
}

/** The full source config of a deployment: its JSON plus the columns filtered or joined on. */
export const deploymentSourceConfig = (d: Deployment): SourceConfig => ({
  ...readSourceConfig(d.sourceConfig),
  integration_id: d.integrationId,
  listener_id: d.listenerId,
  deployment_type: d.deploymentType as DeploymentType | null,
});

/** What the deployment's JSON column holds: the source config less its column-backed fields. */
export function columnlessSourceConfig(sc: SourceConfig): Omit<SourceConfig, "integration_id" | "listener_id" | "deployment_type"> {
  const { integration_id: _i, listener_id: _l, deployment_type: _t, ...rest } = sc;
  return rest;
}
