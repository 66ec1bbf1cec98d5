import type { ValidationIssue } from "../errors.js";
import { isSelfHosted } from "../revision-machine.js";
import type { SourceConfig, SourceRevisionConfig } from "./source-config.js";
import { IMMUTABLE_SOURCE_CONFIG_FIELDS, MANAGED_SOURCES, type Source, type SourceConfigInput } from "./source.js";

/** What a revision will be built from, once overrides and inherited values are applied. */
export interface RevisionSubject {
  source: Source;
  sourceConfig: SourceConfig;
  sourceRevisionConfig: SourceRevisionConfig;
}

const TAKES_FRAMEWORK_CONFIG: ReadonlySet<Source> = new Set(["codehost", "internal_source"]);

/**
 * codehost always needs the path of its framework configuration; internal_source only with its
 * tarball (the command-line tool creates the deployment with neither and PATCHes both in).
 */
const needsFrameworkConfig = (source: Source, src: SourceRevisionConfig) =>
  source === "codehost" || (source === "internal_source" && src.source_tarball_path !== null);

const missing = (loc: string[]): ValidationIssue => ({ loc: ["body", ...loc], type: "missing", msg: "Field required" });
const mustBeNull = (loc: string[], input: unknown, why: string): ValidationIssue => ({
  loc: ["body", ...loc],
  type: "value_error",
  msg: `Value error, must be null ${why}`,
  input,
});

/**
 * The per-source rules every revision must satisfy, as 422 issues (all of them). The listener of
 * `external_container` is not among them: COMPAT.md makes its absence a 400 (see listenerRequired).
 */
export function sourceRuleIssues({ source, sourceConfig: sc, sourceRevisionConfig: src }: RevisionSubject): ValidationIssue[] {
  const issues: ValidationIssue[] = [];
  const fcp = src.framework_config_path;
  if (needsFrameworkConfig(source, src) && fcp === null) {
    issues.push(missing(["source_revision_config", "framework_config_path"]));
  }
  if (!TAKES_FRAMEWORK_CONFIG.has(source) && fcp !== null) {
    issues.push(mustBeNull(["source_revision_config", "framework_config_path"], fcp, `for source '${source}'`));
  }
  if (source === "codehost") {
    if (sc.integration_id === null) issues.push(missing(["source_config", "integration_id"]));
    if (sc.repo_url === null) issues.push(missing(["source_config", "repo_url"]));
  }
  if (isSelfHosted(source) && src.image_uri === null) {
    issues.push(missing(["source_revision_config", "image_uri"]));
  }
  if (MANAGED_SOURCES.has(source) && sc.listener_id !== null) {
    issues.push(
      mustBeNull(["source_config", "listener_id"], sc.listener_id, `for source '${source}': listeners serve self-hosted (external_container) deployments`),
    );
  }
  return issues;
}

/** COMPAT.md: a real client parses this exact phrase. */
export const LISTENER_REQUIRED =
  "'source_config.listener_id' is required for source 'external_container': register a listener in the target cluster (POST /v2/listeners) and pass its id.";

/** A self-hosted revision runs where its listener is: without one it cannot be made. */
export const listenerRequired = (subject: { source: string; sourceConfig: Pick<SourceConfig, "listener_id"> }) =>
  isSelfHosted(subject.source) && subject.sourceConfig.listener_id === null;

const sameId = (a: string | null, b: string | null) => (a ?? "").toLowerCase() === (b ?? "").toLowerCase();

/**
 * name, source, integration_id, repo_url, deployment_type and listener_id are fixed at creation:
 * one issue per field the update would change. Sending the current value (or null) is no change.
 */
export function fixedFieldIssues(
  current: { name: string; source: string; sourceConfig: SourceConfig },
  input: { name?: string | null; source?: string | null; source_config?: SourceConfigInput | null },
): ValidationIssue[] {
  const changed: (string | number)[][] = [];
  if (input.name != null && input.name !== current.name) changed.push(["name"]);
  if (input.source != null && input.source !== current.source) changed.push(["source"]);
  for (const field of IMMUTABLE_SOURCE_CONFIG_FIELDS) {
    const value = input.source_config?.[field];
    if (value == null) continue;
    const now = current.sourceConfig[field];
    const same = field === "integration_id" || field === "listener_id" ? sameId(value, now) : value === now;
    if (!same) changed.push(["source_config", field]);
  }
  return changed.map((loc) => ({ loc: ["body", ...loc], msg: "cannot be changed once the deployment is created", type: "value_error" }));
}
