import type { Revision } from "../generated/prisma/client.js";
import type { RevisionStatus } from "../core/revision-machine.js";
import type { StepOutcome } from "../core/revision-steps.js";

export type { BuildFindings, StepOutcome } from "../core/revision-steps.js";

/** What a runtime is asked to do: the step that moves `revision` on from `status`. */
export interface StepRequest {
  revision: Revision;
  /** The status the step leaves: CREATING resolves the source, BUILDING builds, DEPLOYING deploys, … */
  status: RevisionStatus;
  /** Aborted when the worker stops or loses its lease: the result would be thrown away. */
  signal: AbortSignal;
  /** Where the step says what it does: `log.info("Image digest sha256:…")`. */
  log: StepLogger;
}

/**
 * A step's log: the revision's build log for the steps up to BUILDING, its deploy log after (and for
 * a revision with nothing to build). Each call returns at once; lines are stored in the background
 * and in order, readable (REST) and streamed (GraphQL) while the step still works, and all stored
 * before the step's outcome is. The revision's secret values are masked in them. A failure's
 * reason needs no line of its own: the outcome's message is written as the final status's line.
 */
export interface StepLogger {
  debug(message: string): void;
  info(message: string): void;
  warning(message: string): void;
  error(message: string): void;
}

/**
 * Does the work of pipeline steps. The worker owns ordering, leases and transitions; a runtime only
 * performs one step of one revision and reports how it went. A runtime that throws has the step
 * retried later (a fault of the runtime, not of the revision); one that keeps throwing, other than
 * a lost database or a conflict, fails the revision after WorkerOptions.giveUpAfter times in a row.
 */
export interface Runtime {
  readonly name: string;
  perform(request: StepRequest): Promise<StepOutcome>;
}
