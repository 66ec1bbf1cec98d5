/**
 * The revision state machine: the single source of truth for revision statuses. Pure: a status, an
 * event and the kind of source in, the next status or a refusal with its reason out.
 */

export const REVISION_STATUSES = [
  "CREATING",
  "QUEUED",
  "AWAITING_BUILD",
  "BUILDING",
  "AWAITING_DEPLOY",
  "DEPLOYING",
  "CREATE_FAILED",
  "BUILD_FAILED",
  "DEPLOY_FAILED",
  "DEPLOYED",
  "SKIPPED",
  "INTERRUPTED",
  "UNKNOWN",
] as const;
export type RevisionStatus = (typeof REVISION_STATUSES)[number];

export const TERMINAL_STATUSES: ReadonlySet<RevisionStatus> = new Set([
  "CREATE_FAILED",
  "BUILD_FAILED",
  "DEPLOY_FAILED",
  "DEPLOYED",
  "SKIPPED",
  "INTERRUPTED",
]);

export const isTerminal = (status: RevisionStatus) => TERMINAL_STATUSES.has(status);

export const REVISION_EVENTS = ["advance", "fail", "skip", "interrupt"] as const;
/**
 * advance: the current step finished; fail: it failed; skip: a newer revision superseded this one
 * before it started building; interrupt: a user stopped it.
 */
export type RevisionEvent = (typeof REVISION_EVENTS)[number];

/**
 * The one self-hosted source: an image the customer's cluster runs, reconciled by a listener there.
 * Everything else is managed by the cloud.
 */
export const isSelfHosted = (source: string) => source === "external_container";

/** Self-hosted images (`external_container`) have nothing to build; every other source is built. */
export interface Route {
  build: boolean;
}

export type Transition = { ok: true; to: RevisionStatus } | { ok: false; reason: string };

const BUILT: Partial<Record<RevisionStatus, RevisionStatus>> = {
  CREATING: "QUEUED",
  QUEUED: "AWAITING_BUILD",
  AWAITING_BUILD: "BUILDING",
  BUILDING: "AWAITING_DEPLOY",
  AWAITING_DEPLOY: "DEPLOYING",
  DEPLOYING: "DEPLOYED",
};

const IMAGE_ONLY: Partial<Record<RevisionStatus, RevisionStatus>> = {
  CREATING: "QUEUED",
  QUEUED: "AWAITING_DEPLOY",
  AWAITING_DEPLOY: "DEPLOYING",
  DEPLOYING: "DEPLOYED",
};

const FAILURE: Partial<Record<RevisionStatus, RevisionStatus>> = {
  CREATING: "CREATE_FAILED",
  QUEUED: "CREATE_FAILED",
  AWAITING_BUILD: "BUILD_FAILED",
  BUILDING: "BUILD_FAILED",
  AWAITING_DEPLOY: "DEPLOY_FAILED",
  DEPLOYING: "DEPLOY_FAILED",
};

/** Statuses in which no build (or, for image-only sources, no deploy) has started yet. */
const NOT_STARTED_BUILT: ReadonlySet<RevisionStatus> = new Set(["CREATING", "QUEUED", "AWAITING_BUILD"]);
const NOT_STARTED_IMAGE: ReadonlySet<RevisionStatus> = new Set(["CREATING", "QUEUED", "AWAITING_DEPLOY"]);
const NOT_STARTED = (route: Route) => (route.build ? NOT_STARTED_BUILT : NOT_STARTED_IMAGE);

/** A newer revision of the same deployment makes a revision in one of these statuses SKIPPED. */
export const canBeSkipped = (status: RevisionStatus, route: Route) => NOT_STARTED(route).has(status);

/** Every status in which some route can still be skipped: where to look for revisions to supersede. */
export const SKIPPABLE_STATUSES: readonly RevisionStatus[] = [...new Set([...NOT_STARTED_BUILT, ...NOT_STARTED_IMAGE])];

/**
 * Past the queue and not finished: the deployment's one revision in flight. A QUEUED revision waits
 * while another revision of its deployment is in one of these.
 */
export const IN_FLIGHT_STATUSES: readonly RevisionStatus[] = ["AWAITING_BUILD", "BUILDING", "AWAITING_DEPLOY", "DEPLOYING"];

export function transition(from: RevisionStatus, event: RevisionEvent, route: Route): Transition {
  if (isTerminal(from)) return { ok: false, reason: `revision is already ${from}` };
  if (from === "UNKNOWN") {
    return event === "interrupt"
      ? { ok: true, to: "INTERRUPTED" }
      : { ok: false, reason: "revision status is UNKNOWN; it can only be interrupted" };
  }
  if (!route.build && (from === "AWAITING_BUILD" || from === "BUILDING")) {
    return event === "interrupt"
      ? { ok: true, to: "INTERRUPTED" }
      : { ok: false, reason: `a revision without a build is never ${from}` };
  }
  switch (event) {
    case "advance": {
      const to = (route.build ? BUILT : IMAGE_ONLY)[from];
      return to ? { ok: true, to } : { ok: false, reason: `no step follows ${from}` };
    }
    case "fail": {
      const to = FAILURE[from];
      return to ? { ok: true, to } : { ok: false, reason: `cannot fail from ${from}` };
    }
    case "skip":
      return NOT_STARTED(route).has(from)
        ? { ok: true, to: "SKIPPED" }
        : { ok: false, reason: `revision has already started (${from})` };
    case "interrupt":
      return { ok: true, to: "INTERRUPTED" };
  }
}

export const routeFor = (source: string): Route => ({ build: !isSelfHosted(source) });
