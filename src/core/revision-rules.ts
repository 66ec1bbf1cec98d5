import type { CoreDeps } from "./context.js";
import { badRequest, CoreError, invalid, type ValidationIssue } from "./errors.js";
import type { Tx } from "./publish.js";
import { sameJson, type SourceConfig } from "./schemas/source-config.js";
import { LISTENER_REQUIRED, listenerRequired, type RevisionSubject, sourceRuleIssues } from "./schemas/source-rules.js";
import { REVISION_TRIGGER_FIELDS, SOURCE_REVISION_FIELDS, type SourceRevisionConfigInput } from "./schemas/source.js";

/** What a PATCH or a create-revision asks to change, as far as the revision rule cares. */
export interface RevisionChange {
  /** create-revision always makes one. */
  force: boolean;
  sourceRevisionConfig?: SourceRevisionConfigInput | null;
  secrets?: unknown[] | null;
}

/**
 * PATCH makes a new revision when a source_revision_config field or secrets are given, or one of
 * REVISION_TRIGGER_FIELDS changes (COMPAT.md); otherwise it updates the deployment in place.
 */
export function revisionDue(current: SourceConfig, next: SourceConfig, change: RevisionChange): boolean {
  return (
    change.force ||
    SOURCE_REVISION_FIELDS.some((f) => change.sourceRevisionConfig?.[f] != null) ||
    change.secrets != null ||
    REVISION_TRIGGER_FIELDS.some((f) => !sameJson(current[f], next[f]))
  );
}

/** A reference of a revision that the workspace does not have (deleted, or another workspace's). */
export interface MissingReference {
  field: "integration_id" | "listener_id";
  id: string;
}

/**
 * The installation and listener a revision names, whatever its source, must be the workspace's own:
 * `db` is the workspace's door (CoreDeps.data), or a transaction opened through it.
 */
export async function missingReferences(db: Tx, refs: { integrationId: string | null; listenerId: string | null }): Promise<MissingReference[]> {
  const missing: MissingReference[] = [];
  if (refs.integrationId) {
    const found = await db.codehostInstallation.findFirst({ where: { id: refs.integrationId }, select: { id: true } });
    if (!found) missing.push({ field: "integration_id", id: refs.integrationId });
  }
  if (refs.listenerId) {
    const found = await db.listener.findFirst({ where: { id: refs.listenerId }, select: { id: true } });
    if (!found) missing.push({ field: "listener_id", id: refs.listenerId });
  }
  return missing;
}

/** How a refused revision is told: to the request that made it, or as the redeploy of an earlier one. */
export type SubjectCheck = { kind: "request"; issues?: ValidationIssue[] } | { kind: "redeploy"; revisionId: string };

/**
 * Everything a revision must satisfy before it is recorded, in the order clients rely on: a build
 * this installation can run (400), a listener for a self-hosted source (400, COMPAT.md's phrase),
 * the per-source rules (422 with all issues, or one 400 for a redeploy), then references the
 * workspace owns (400 "not found", as if another workspace's did not exist).
 */
export async function checkRevisionSubject(deps: CoreDeps, db: Tx, subject: RevisionSubject, how: SubjectCheck): Promise<void> {
  const refused = (message: string) => (how.kind === "redeploy" ? badRequest(`Revision ${how.revisionId} cannot be redeployed: ${message}`) : badRequest(message));
  refuseUnavailableBuild(deps, subject.source);
  if (listenerRequired(subject)) {
    if (how.kind === "redeploy") throw refused(LISTENER_REQUIRED);
    throw new CoreError("BAD_REQUEST", LISTENER_REQUIRED, [{ loc: ["body", "source_config", "listener_id"], msg: LISTENER_REQUIRED, type: "value_error" }]);
  }
  const issues = [...(how.kind === "request" ? (how.issues ?? []) : []), ...sourceRuleIssues(subject)];
  if (issues.length > 0) {
    if (how.kind === "request") throw invalid(issues);
    throw refused(issues.map((i) => `${i.loc.slice(1).join(".")}: ${i.msg}`).join("; "));
  }
  const [missing] = await missingReferences(db, {
    integrationId: subject.sourceConfig.integration_id,
    listenerId: subject.sourceConfig.listener_id,
  });
  if (!missing) return;
  const message = `${missing.field === "integration_id" ? "Integration" : "Listener"} ID ${missing.id} not found.`;
  const loc = how.kind === "request" ? [{ loc: ["body", "source_config", missing.field], msg: message, type: "value_error" }] : [];
  throw new CoreError("BAD_REQUEST", message, loc);
}

/**
 * Where the operator has turned internal image builds off (INTERNAL_IMAGE_BUILDS=off: the cloud
 * provider cannot run them), a revision built from an image the command-line tool pushed
 * (internal_container) is refused, pointing to a remote build from source instead.
 */
export function refuseUnavailableBuild(deps: CoreDeps, source: string): void {
  if (source !== "internal_container" || deps.internalImageBuilds.available) return;
  const where = deps.internalImageBuilds.provider ? `on ${deps.internalImageBuilds.provider}` : "on this cloud provider";
  throw badRequest(
    `Internal image builds (internal_container) are not yet available ${where}. Build remotely from source instead: ` +
      `revision_source "internal_source" with source_revision_config.framework_config_path and source_tarball_path.`,
  );
}
