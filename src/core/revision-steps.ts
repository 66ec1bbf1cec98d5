import type { CoreDeps } from "./context.js";
import { CLOSED_STATUSES } from "./log-queries.js";
import { appendLines, logKindOf } from "./log-writer.js";
import { DELETING } from "./deployment-status.js";
import { commitThenPublish } from "./publish.js";
import { canBeSkipped, IN_FLIGHT_STATUSES, type RevisionStatus, routeFor } from "./revision-machine.js";
import { missingReferences } from "./revision-rules.js";
import { LISTENER_REQUIRED, listenerRequired } from "./schemas/source-rules.js";
import { lockDeploymentStatus, newerThan, transitionInTx, type Tx } from "./transitions.js";
import type { DomainEvent } from "../events/types.js";
import { Prisma, type Revision } from "../generated/prisma/client.js";
import { objectOf, textOf } from "./stored-json.js";

/**
 * Another revision of the deployment in flight (building or deploying), which a queued one waits
 * for; found among the deployment's few unfinished revisions by their status, not its whole history.
 */
export const inFlightAhead = (tx: Tx, queued: Pick<Revision, "id" | "deploymentId">): Promise<Revision | null> =>
  tx.revision.findFirst({ where: { deploymentId: queued.deploymentId, status: { in: [...IN_FLIGHT_STATUSES] }, id: { not: queued.id } } });

export type StepOutcome =
  | {
      ok: true;
      /** status_message of the next status; the pipeline's default when omitted. */
      message?: string;
      /** The commit a codehost source resolved to (CREATING step). */
      commit?: { sha: string; title: string };
      /** What the build step found (BUILDING step). */
      findings?: BuildFindings;
    }
  /** The step failed; `message` tells a person what to change. */
  | { ok: false; message: string; findings?: BuildFindings };

/**
 * What the build step found, kept on the revision for the build log: the image's digest, and a
 * report (`image`: the manifest looked up; `source`: the uploaded tarball's files, size and graphs).
 */
export interface BuildFindings {
  imageDigest?: string | null;
  report: Record<string, unknown>;
}

/** What became of a leased step. */
export type StepResult = "committed" | "skipped" | "waiting" | "lost";

type Decision = { kind: "lost" } | { kind: "drop" } | { kind: "skip"; current: Revision } | { kind: "wait"; current: Revision; blocker: Revision } | { kind: "go"; current: Revision };

/**
 * The pipeline's decisions, each in one transaction under the deployment's row lock (the lock that
 * revision creation and every transition take too), so that "is there a newer revision?" and "is
 * another one in flight?" cannot change between the answer and the write; and under the revision's,
 * so that "is its lease still ours?" cannot either.
 */
export class Steps {
  constructor(
    private readonly deps: CoreDeps,
    private readonly owner: string,
    /** How long a queued revision waits before looking again (a finishing revision wakes it sooner). */
    private readonly queuedRecheckMs: number,
  ) {}

  /** Before the work: a superseded revision is skipped, a queued one behind another waits; "go" otherwise. */
  async gate(claimed: Revision): Promise<StepResult | "go"> {
    const status = claimed.status as RevisionStatus;
    // Past the queue nothing can hold a revision back; the commit's checks suffice.
    if (status !== "QUEUED" && !canBeSkipped(status, routeFor(claimed.source))) return "go";
    return this.run(claimed, { kind: "gate" });
  }

  /** After the work: the same checks again, then the step's outcome as a transition. */
  async commit(claimed: Revision, outcome: StepOutcome): Promise<StepResult> {
    return this.run(claimed, { kind: "commit", outcome });
  }

  /**
   * Not yet: the revision stays in its status (still skippable by a newer one), saying what it waits
   * for, and its step is due again at `until`.
   */
  async hold(claimed: Revision, message: string, until: Date): Promise<StepResult> {
    return this.run(claimed, { kind: "hold", message, until });
  }

  /** CREATING needs what the revision refers to: a failure a person can act on when it is gone. */
  async checkReferences(revision: Revision): Promise<StepOutcome | null> {
    const deployment = await this.deps.prisma.deployment.findUnique({ where: { id: revision.deploymentId } });
    if (!deployment) return null; // deleted meanwhile: the commit finds nothing and drops the step
    const config = objectOf(revision.sourceConfig);
    const integrationId = textOf(config.integration_id) ?? deployment.integrationId ?? null;
    const listenerId = textOf(config.listener_id) ?? deployment.listenerId ?? null;
    // The same rules the API applied when the revision was made; what it names may have gone since.
    if (revision.source === "codehost" && !integrationId) return { ok: false, message: integrationGone("(none)") };
    if (listenerRequired({ source: revision.source, sourceConfig: { listener_id: listenerId } })) return { ok: false, message: LISTENER_REQUIRED };
    const [missing] = await missingReferences(this.deps.data(revision), { integrationId, listenerId });
    if (!missing) return null;
    return { ok: false, message: missing.field === "integration_id" ? integrationGone(missing.id) : listenerGone(missing.id) };
  }

  /** The checks under the deployment's lock, then what the action asks when they pass (gate: "go" alone). */
  private run(claimed: Revision, action: { kind: "gate" }): Promise<StepResult | "go">;
  private run(claimed: Revision, action: Exclude<StepAction, { kind: "gate" }>): Promise<StepResult>;
  private async run(claimed: Revision, action: StepAction): Promise<StepResult | "go"> {
    const outcome = action.kind === "commit" ? action.outcome : null;
    const { result } = await commitThenPublish(this.deps, async (tx) => {
      const decision = await this.decide(tx, claimed, outcome);
      switch (decision.kind) {
        case "lost":
          return { result: "lost" as const, events: [] };
        case "drop":
          // Still ours (a compare-and-set on the lease): parked, as quietly as a lost step.
          await tx.$executeRaw`
            UPDATE revisions SET lease_owner = NULL, lease_until = NULL, next_step_at = NULL
            WHERE id = ${claimed.id}::uuid AND lease_owner = ${this.owner}`;
          return { result: "lost" as const, events: [] };
        case "skip": {
          const t = await transitionInTx(tx, this.request(decision.current, "skip"));
          return { result: "skipped" as const, events: t.events };
        }
        case "wait": {
          const { blocker } = decision;
          const message = `Queued: waiting for revision ${blocker.id} (${blocker.status}) of this deployment to finish`;
          return { result: "waiting" as const, events: await this.putBack(tx, decision.current, message, this.queuedRecheckMs) };
        }
        case "go": {
          if (action.kind === "hold") return { result: "waiting" as const, events: await this.putBack(tx, decision.current, action.message, action.until) };
          if (action.kind === "gate") return { result: "go" as const, events: [] };
          const { outcome } = action;
          const t = await transitionInTx(tx, {
            ...this.request(decision.current, outcome.ok ? "advance" : "fail"),
            message: outcome.message,
            patch: {
              ...(outcome.ok && outcome.commit && { repoCommitSha: outcome.commit.sha, repoCommitTitle: outcome.commit.title }),
              ...(outcome.findings && findingsPatch(outcome.findings)),
            },
          });
          return { result: "committed" as const, events: t.events };
        }
      }
    });
    return result;
  }

  private async decide(tx: Tx, claimed: Revision, outcome: StepOutcome | null): Promise<Decision> {
    const deploymentStatus = await lockDeploymentStatus(tx, claimed.deploymentId);
    if (deploymentStatus === null) return { kind: "lost" };
    // Claimed before its deployment was marked for deletion: the step is dropped, and not due again.
    if (deploymentStatus === DELETING) return { kind: "drop" };
    // The revision's row as well: a claim takes no deployment lock, so without this another worker
    // could take the lease over between the check below and the write that follows it.
    await tx.$queryRaw`SELECT 1 FROM revisions WHERE id = ${claimed.id}::uuid FOR UPDATE`;
    const current = await tx.revision.findUnique({ where: { id: claimed.id } });
    // Interrupted, deleted, or taken over by another worker after our lease ran out: not ours to move.
    if (!current || current.status !== claimed.status || current.leaseOwner !== this.owner) return { kind: "lost" };
    const status = current.status as RevisionStatus;
    if (canBeSkipped(status, routeFor(current.source))) {
      const newer = await tx.revision.count({ where: { deploymentId: current.deploymentId, ...newerThan(current) } });
      if (newer > 0) return { kind: "skip", current };
    }
    if (status === "QUEUED" && (outcome === null || outcome.ok)) {
      const blocker = await inFlightAhead(tx, current);
      if (blocker) return { kind: "wait", current, blocker };
    }
    return { kind: "go", current };
  }

  private request(current: Revision, event: "advance" | "fail" | "skip") {
    return { revisionId: current.id, event, expectedFrom: current.status as RevisionStatus, leaseOwner: this.owner };
  }

  /**
   * Back to wait, saying what for (in its log too, when that changed), due again at `until` (or that
   * many milliseconds from the database's now); a raw write, so updated_at keeps showing transitions only.
   */
  private async putBack(tx: Tx, current: Revision, message: string, until: Date | number): Promise<DomainEvent[]> {
    const due = typeof until === "number" ? Prisma.sql`now() + ${until}::double precision * interval '1 millisecond'` : Prisma.sql`${until}`;
    await tx.$executeRaw`
      UPDATE revisions SET lease_owner = NULL, lease_until = NULL, status_message = ${message}, next_step_at = ${due}
      WHERE id = ${current.id}::uuid AND lease_owner = ${this.owner}`;
    if (message === current.statusMessage) return [];
    const kind = logKindOf(current.status as RevisionStatus, routeFor(current.source));
    if ((await appendLines(tx, current.id, [{ kind, level: "INFO", message }], CLOSED_STATUSES)) === 0) return [];
    return [{ type: "revision.logs", workspaceId: current.workspaceId, deploymentId: current.deploymentId, revisionId: current.id, kind }];
  }
}

/** What a step asks of the checks: only them (gate), its outcome committed, or to wait in its status until `until` (hold). */
type StepAction = { kind: "gate" } | { kind: "commit"; outcome: StepOutcome } | { kind: "hold"; message: string; until: Date };

/** The build step's findings as revision columns. */
const findingsPatch = (f: BuildFindings) => ({
  ...(f.imageDigest !== undefined && { imageDigest: f.imageDigest }),
  buildReport: f.report as Prisma.InputJsonValue,
});

const integrationGone = (id: string) =>
  `The code-hosting integration ${id} of this deployment no longer exists in the workspace. ` +
  "Register the installation again (POST /v2/integrations/forge-codehost/installations), then create a new deployment that uses it.";
const listenerGone = (id: string) =>
  `The listener ${id} of this deployment no longer exists in the workspace. ` +
  "Register a listener in the target cluster (POST /v2/listeners), then create a new deployment that uses it.";
