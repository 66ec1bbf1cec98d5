import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import type { CoreDeps } from "../core/context.js";
import type { Revision } from "../generated/prisma/client.js";
import type { Logger } from "../logger.js";
import { Leases } from "./leases.js";
import { type RevisionStatus, routeFor, transition } from "./machine.js";
import type { Runtime, StepOutcome } from "./runtime.js";
import { type StepResult, Steps } from "./steps.js";

export interface WorkerOptions {
  /** How often to look for due steps when there was nothing to do. */
  pollMs: number;
  /** How long a claimed step stays ours without renewal: the delay before a dead worker's step is retried. */
  leaseMs: number;
  /** Steps run at once by this worker. */
  concurrency: number;
  /** A queued revision behind another one looks again after this long (a finishing one wakes it sooner). */
  queuedRecheckMs: number;
  /** A step whose runtime or database call failed unexpectedly is retried after this long. */
  retryMs: number;
  /** Lease owner name; unique per worker. */
  owner: string;
}

export const defaultWorkerOptions = (): WorkerOptions => ({
  pollMs: 100,
  leaseMs: 10_000,
  concurrency: 16,
  queuedRecheckMs: 5_000,
  retryMs: 1_000,
  owner: `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`,
});

export interface WorkerStats {
  claimed: number;
  committed: number;
  skipped: number;
  waiting: number;
  /** Steps whose result was dropped: the revision moved on without us (interrupt, lease lost). */
  lost: number;
  errors: number;
}

/**
 * Moves revisions through the pipeline: claims due steps with a lease, has the runtime perform each,
 * then commits the outcome through core's transition (compare-and-set on status and lease). Any number
 * of workers on one database share the work; none advances a revision twice.
 */
export class PipelineWorker {
  readonly options: WorkerOptions;
  readonly stats: WorkerStats = { claimed: 0, committed: 0, skipped: 0, waiting: 0, lost: 0, errors: 0 };
  private readonly leases: Leases;
  private readonly steps: Steps;
  private readonly inFlight = new Map<string, { abort: AbortController; done: Promise<void> }>();
  private running = false;
  private loopDone: Promise<void> | null = null;
  private wakeUp: (() => void) | null = null;
  /** Set by a crash-like stop: nothing more is written, as if the process had died. */
  private silenced = false;

  constructor(
    private readonly deps: CoreDeps,
    private readonly runtime: Runtime,
    private readonly logger: Logger,
    options: Partial<WorkerOptions> = {},
  ) {
    this.options = { ...defaultWorkerOptions(), ...options };
    this.leases = new Leases(deps.prisma, this.options.owner, this.options.leaseMs);
    this.steps = new Steps(deps, this.options.owner, this.options.queuedRecheckMs);
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.silenced = false;
    this.loopDone = this.loop();
  }

  /**
   * Stops claiming, aborts the steps in progress and waits for them. By default their leases are given
   * back so that another worker continues at once; `release: false` leaves them to expire, as a crash would.
   */
  async stop(options: { release?: boolean } = {}): Promise<void> {
    const release = options.release ?? true;
    if (!this.running) return;
    this.running = false;
    this.silenced = !release;
    this.wake();
    // The loop ends first, so that no step starts after the aborts below.
    await this.loopDone;
    for (const { abort } of this.inFlight.values()) abort.abort(new Error("worker stopping"));
    await Promise.all([...this.inFlight.values()].map((s) => s.done));
    if (release) {
      try {
        await this.leases.releaseAll();
      } catch (err) {
        this.logger.warn({ err }, "pipeline: could not release leases; they expire by themselves");
      }
    }
  }

  /** Revisions whose step this worker is performing now. */
  get busy(): number {
    return this.inFlight.size;
  }

  private async loop(): Promise<void> {
    while (this.running) {
      const free = this.options.concurrency - this.inFlight.size;
      let claimed: string[] = [];
      if (free > 0) {
        try {
          claimed = await this.leases.claim(free);
        } catch (err) {
          this.stats.errors++;
          this.logger.warn({ err }, "pipeline: claiming due steps failed; retrying");
        }
      }
      if (claimed.length > 0) {
        this.stats.claimed += claimed.length;
        await this.launch(claimed);
      }
      // A full batch may mean more is due: look again at once; otherwise sleep until a step finishes.
      if (claimed.length === 0 || claimed.length < free) await this.sleep(this.options.pollMs);
    }
  }

  private async launch(ids: string[]): Promise<void> {
    let revisions: Revision[] = [];
    try {
      revisions = await this.deps.prisma.revision.findMany({ where: { id: { in: ids } } });
    } catch (err) {
      this.stats.errors++;
      this.logger.warn({ err }, "pipeline: reading claimed revisions failed; their leases expire");
    }
    // Stopping meanwhile: leave the claimed steps to releaseAll (or to their leases running out).
    if (!this.running) return;
    for (const revision of revisions) {
      const abort = new AbortController();
      const done = this.perform(revision, abort.signal).finally(() => {
        this.inFlight.delete(revision.id);
        this.wake();
      });
      this.inFlight.set(revision.id, { abort, done });
    }
  }

  private async perform(revision: Revision, signal: AbortSignal): Promise<void> {
    const renew = setInterval(() => {
      this.leases.renew(revision.id).then(
        (held) => held || this.abortStep(revision.id, "lease lost"),
        (err) => this.logger.warn({ err, revision_id: revision.id }, "pipeline: lease renewal failed"),
      );
    }, Math.max(10, Math.floor(this.options.leaseMs / 3)));
    const log = { revision_id: revision.id, status: revision.status };
    try {
      if (!transition(revision.status as RevisionStatus, "advance", routeFor(revision.source)).ok) {
        // Nothing for a runtime to do; retrying would spin. Counted with the dropped steps.
        await this.leases.park(revision.id);
        return this.count("lost");
      }
      const gate = await this.steps.gate(revision);
      if (gate !== "go") return this.count(gate);
      let outcome: StepOutcome = await this.runtime.perform({ revision, status: revision.status as RevisionStatus, signal });
      // What the revision refers to is checked as the create step ends, when it would be used.
      if (outcome.ok && revision.status === "CREATING") outcome = (await this.steps.checkReferences(revision)) ?? outcome;
      if (signal.aborted || this.silenced) return;
      this.count(await this.steps.commit(revision, outcome));
    } catch (err) {
      if (signal.aborted || this.silenced) return;
      this.stats.errors++;
      this.logger.warn({ err, ...log }, "pipeline: step failed unexpectedly; retrying later");
      await this.leases.release(revision.id, this.options.retryMs).catch(() => {});
    } finally {
      clearInterval(renew);
    }
  }

  private count(result: StepResult) {
    this.stats[result]++;
  }

  private abortStep(revisionId: string, reason: string) {
    this.inFlight.get(revisionId)?.abort.abort(new Error(reason));
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.wakeUp = null;
        resolve();
      }, ms);
      this.wakeUp = () => {
        clearTimeout(timer);
        this.wakeUp = null;
        resolve();
      };
    });
  }

  private wake() {
    this.wakeUp?.();
  }
}
