import { createHash } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import type { Revision } from "../../generated/prisma/client.js";
import { type RevisionStatus, routeFor } from "../../core/revision-machine.js";
import { simulatedLines } from "./simulated-lines.js";
import type { Runtime, StepOutcome, StepRequest } from "../runtime.js";
import { objectOf, textOf } from "../../core/stored-json.js";

/** The resource_spec label that makes the simulator fail a step on purpose (tests, demos). */
export const FAILURE_LABEL = "simulate/failure";

/** Which label value fails which step. */
const FAILING_STEP: Partial<Record<RevisionStatus, "create" | "build" | "deploy">> = {
  CREATING: "create",
  BUILDING: "build",
  DEPLOYING: "deploy",
};

const FAILURE_WHAT = { create: "Creating the revision", build: "The build", deploy: "The deploy" };

/**
 * The embedded runtime. It builds and deploys nothing: every step only takes `stepMs` and writes
 * realistic lines to the revision's logs as it starts and ends, a codehost source "resolves" to a
 * commit derived from its repository and ref, and the resource_spec label
 * `simulate/failure` = create | build | deploy fails that step.
 */
export class SimulatorRuntime implements Runtime {
  readonly name = "simulator";

  constructor(private readonly stepMs: number) {}

  async perform({ revision, status, signal, log }: StepRequest): Promise<StepOutcome> {
    const lines = simulatedLines(revision, status, routeFor(revision.source).build);
    for (const line of lines.start) log.info(line);
    if (this.stepMs > 0) await sleep(this.stepMs, undefined, { signal });
    signal.throwIfAborted();
    const failing = FAILING_STEP[status];
    if (failing && failureLabel(revision) === failing) {
      for (const line of lines.failure) log.error(line);
      return {
        ok: false,
        message:
          `${FAILURE_WHAT[failing]} failed (simulated): source_config.resource_spec.labels has ` +
          `"${FAILURE_LABEL}": "${failing}". Remove that label and create a new revision.`,
      };
    }
    if (status === "CREATING" && revision.source === "codehost") {
      const commit = simulatedCommit(revision);
      if (commit) {
        log.info(`Resolved ${refOf(revision)} to commit ${commit.sha.slice(0, 7)}: ${commit.title}`);
        for (const line of lines.done) log.info(line);
        return { ok: true, commit, message: `Queued: commit ${commit.sha.slice(0, 7)} of ${refOf(revision)}` };
      }
    }
    for (const line of lines.done) log.info(line);
    return { ok: true };
  }
}

/** The same repository and ref always give the same commit: a stand-in for asking the code host. */
export function simulatedCommit(revision: Revision): { sha: string; title: string } | null {
  const repoUrl = textOf(objectOf(revision.sourceConfig).repo_url);
  if (!repoUrl) return null;
  const ref = refOf(revision);
  const sha = createHash("sha1").update(`${repoUrl}\n${ref}`).digest("hex");
  const repo = repoUrl.replace(/\.git$/, "").split("/").filter(Boolean).slice(-2).join("/");
  return { sha, title: `Simulated commit ${sha.slice(0, 7)} on ${ref} of ${repo}` };
}

const refOf = (revision: Revision) =>
  textOf(objectOf(revision.sourceRevisionConfig).repo_ref) ?? textOf(objectOf(revision.sourceConfig).repo_branch) ?? "main";

function failureLabel(revision: Revision): string | undefined {
  const labels = objectOf(objectOf(objectOf(revision.sourceConfig).resource_spec).labels);
  return textOf(labels[FAILURE_LABEL]);
}

