import type { Revision } from "../generated/prisma/client.js";
import type { RevisionStatus } from "./machine.js";

/** What a runtime is asked to do: the step that moves `revision` on from `status`. */
export interface StepRequest {
  revision: Revision;
  /** The status the step leaves: CREATING resolves the source, BUILDING builds, DEPLOYING deploys, … */
  status: RevisionStatus;
  /** Aborted when the worker stops or loses its lease: the result would be thrown away. */
  signal: AbortSignal;
}

export type StepOutcome =
  | {
      ok: true;
      /** status_message of the next status; the pipeline's default when omitted. */
      message?: string;
      /** The commit a codehost source resolved to (CREATING step). */
      commit?: { sha: string; title: string };
    }
  /** The step failed; `message` tells a person what to change. */
  | { ok: false; message: string };

/**
 * Does the work of pipeline steps. The worker owns ordering, leases and transitions; a runtime only
 * performs one step of one revision and reports how it went. A runtime that throws has the step
 * retried later (a fault of the runtime, not of the revision).
 */
export interface Runtime {
  readonly name: string;
  perform(request: StepRequest): Promise<StepOutcome>;
}
