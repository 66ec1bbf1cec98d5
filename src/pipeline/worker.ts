import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import { DELETE_GRACE_MS, DELETE_SWEEP_EVERY_MS } from "../core/deletion-sweep.js";
import { logKindOf, type SecretMask, type StepLog } from "../core/log-writer.js";
import { isDatabaseUnavailable } from "../core/prisma-errors.js";
import type { Revision } from "../generated/prisma/client.js";
import type { Logger } from "../logger.js";
import { AloneLine } from "./alone.js";
import { FailuresInARow } from "./step-failures.js";
import { type RevisionStatus, routeFor, transition } from "../core/revision-machine.js";
import type { Runtime, StepOutcome, StepRequest } from "./runtime.js";
import type { MissingInput, BuildInputs } from "./build-inputs.js";
import type { StepResult } from "../core/revision-steps.js";
import type { RevisionWork, RevisionWorkOptions } from "../core/revision-work.js";

export interface WorkerOptions {
  /** How often to look for due steps when there was nothing to do. */
  pollMs: number;
  /** How long a claimed step stays ours without renewal: the delay before a dead worker's step is retried. */
  leaseMs: number;
  /** Steps run at once by this worker. */
  concurrency: number;
  /** A queued revision behind another one looks again after this long (a finishing one wakes it sooner). */
  queuedRecheckMs: number;
  /**
   * A step whose runtime or database call failed unexpectedly is retried after this long; after
   * twice that when it fails again in a row on an error that is not transient, and so on.
   */
  retryMs: number;
  /**
   * A step that failed this many times in a row on an internal error that is not transient (not a
   * lost database, a deadlock or a conflict) fails its revision, with a generic status_message,
   * instead of being retried for ever (a value the database refuses, a fault of the code).
   */
  giveUpAfter: number;
  /**
   * A step the service crashed in (the process died with it in flight, its lease left held) this many
   * times while running it alone fails its revision instead of taking the service down again; 0: never,
   * and no step runs alone. A step runs alone once it was in flight at CRASHES_BEFORE_ALONE crashes.
   */
  crashLimit: number;
  /** Lease owner name; unique per worker. */
  owner: string;
  /**
   * How long a revision with nothing to build (no image_uri, no source_tarball_path) waits in
   * AWAITING_BUILD for a newer revision to supersede it before it fails.
   */
  awaitSourceMs: number;
  /** Log lines older than this are deleted by the worker's sweep (LOG_RETENTION_DAYS). */
  logRetentionMs: number;
  /** How often the sweep runs. */
  logSweepEveryMs: number;
  /** A deployment AWAITING_DELETE this long is a deletion left half done, which the worker finishes (tests shorten it). */
  deleteGraceMs: number;
  /** How often the worker looks for deletions left half done. */
  deleteSweepEveryMs: number;
  /** Told how long each step this worker performed took, the status it ran in and its result (metrics). */
  onStep?: (status: string, outcome: string, seconds: number) => void;
}

/** The longest pause between claims while they fail: a step due is taken up at most this late once the database is back. */
const MAX_CLAIM_PAUSE_MS = 2_000;

export const defaultWorkerOptions = (): WorkerOptions => ({
  pollMs: 100,
  leaseMs: 10_000,
  concurrency: 16,
  queuedRecheckMs: 5_000,
  retryMs: 1_000,
  giveUpAfter: 5,
  crashLimit: 2,
  owner: `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`,
  awaitSourceMs: 60 * 60_000,
  logRetentionMs: 30 * 24 * 3_600_000,
  logSweepEveryMs: 10 * 60_000,
  deleteGraceMs: DELETE_GRACE_MS,
  deleteSweepEveryMs: DELETE_SWEEP_EVERY_MS,
});

/**
 * Crashes of the service with a step in flight after which the step runs alone (AloneLine): one crash
 * happens to builds in flight beside the one that caused it, and would put every one of them in line.
 */
export const CRASHES_BEFORE_ALONE = 2;

/** The reason a worker's stop aborts its steps in flight with: their logs say they are handed on. */
class WorkerStopping extends Error {
  constructor() {
    super("worker stopping");
  }
}

/**
 * What a step's log says when its run is cut short and a later run starts it again (its lines so far
 * then show twice): as this worker's stop hands it on, and as a run starts after its server died.
 */
export const STEP_HANDED_ON = "This step stopped here as its server shut down: another server runs it again, from its start";
export const STEP_RETRIED = "This step stopped on an internal error; it runs again shortly";
export const STEP_RERUN_AFTER_CRASH = "This step's earlier run was cut short (its server stopped, stalled or lost the database): it runs again, from its start";

/** How many unsaid failures a worker remembers (PipelineWorker.unsaid): far more than one outage leaves. */
const UNSAID_KEPT = 1_000;
/** A step of a revision, as PipelineWorker.unsaid names it: the same revision in another status is another step. */
const unsaidStep = (revision: { id: string; status: string }) => `${revision.id} ${revision.status}`;

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
  /** Claims that failed in a row (a database outage): the pause before the next grows with them. */
  private claimFailures = 0;
  private readonly work: RevisionWork;
  private readonly inFlight = new Map<string, { abort: AbortController; done: Promise<void> }>();
  /** Leases a failed step could not give back (the database was lost): tried again before each claim (giveBack). */
  private readonly unreleased = new Map<string, GiveBack>();
  /** When this worker last found the database unreachable (claiming, renewing, giving back). */
  private troubleAt = Number.NEGATIVE_INFINITY;
  /** Steps this worker saw fail in a row on an internal error that is not transient. */
  private readonly failures = new FailuresInARow();
  /**
   * Steps (revision and status, unsaidStep) that failed here without their log saying so (the database
   * was lost too): this worker's next run of the same step says it. Another worker may run it
   * meanwhile (it cannot know), and the revision move on: the next step has nothing to say of it.
   */
  private readonly unsaid = new Set<string>();
  /** Steps suspected of crashing the service, each waiting to run with no other in flight. */
  private readonly alone = new AloneLine();
  private running = false;
  private loopDone: Promise<void> | null = null;
  private wakeUp: (() => void) | null = null;
  /** Set by a crash-like stop: nothing more is written, as if the process had died. */
  private silenced = false;

  constructor(
    /** Core's revision work for this worker (Core.revisionWork). */
    work: (options: RevisionWorkOptions, logger: Logger) => RevisionWork,
    private readonly runtime: Runtime,
    private readonly logger: Logger,
    options: Partial<WorkerOptions> = {},
    /** The real checks of what a revision is built from; none: the runtime alone decides. */
    private readonly inputs: BuildInputs | null = null,
  ) {
    this.options = { ...defaultWorkerOptions(), ...options };
    this.work = work(this.options, logger);
  }

  /** A step whose failure its log could not tell; the oldest are forgotten past UNSAID_KEPT (runs elsewhere leave theirs). */
  private remember(step: string): void {
    this.unsaid.add(step);
    if (this.unsaid.size > UNSAID_KEPT) this.unsaid.delete(this.unsaid.values().next().value!);
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.silenced = false;
    this.loopDone = this.loop();
    this.work.logSweeper.start(this.options.logSweepEveryMs);
    this.work.deletions.start(this.options.deleteSweepEveryMs);
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
    await this.work.logSweeper.stop();
    await this.work.deletions.stop();
    // The loop ends first, so that no step starts after the aborts below.
    await this.loopDone;
    for (const { abort } of this.inFlight.values()) abort.abort(new WorkerStopping());
    await Promise.all([...this.inFlight.values()].map((s) => s.done));
    if (release) {
      try {
        await this.work.leases.releaseAll();
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
      // Nothing new starts while a suspect waits for the others to end, or runs.
      const free = this.alone.waiting ? 0 : this.options.concurrency - this.inFlight.size;
      for (const back of [...this.unreleased.values()]) {
        if (!this.running) break;
        // Claimed again by this worker meanwhile (its lease ran out): the step in flight holds it now.
        if (this.inFlight.has(back.revisionId)) this.unreleased.delete(back.revisionId);
        // Still no database: the others wait for the next pass, rather than each for its timeout now.
        else if (!(await this.giveBack(back))) break;
      }
      let claimed: string[] = [];
      if (free > 0) {
        try {
          // Just now without a database ourselves: the leases run out meanwhile are an outage's, not deaths.
          claimed = await this.work.leases.claim(free, { countCrashes: Date.now() - this.troubleAt > this.options.leaseMs });
          if (this.claimFailures > 0) this.logger.info({ failed_attempts: this.claimFailures }, "pipeline: claiming due steps works again");
          this.claimFailures = 0;
        } catch (err) {
          this.stats.errors++;
          this.noteTrouble(err);
          // The first of a run of failures is told (an outage would otherwise be a warning every poll).
          if (this.claimFailures++ === 0) {
            this.logger.warn({ reason: err instanceof Error ? err.message : String(err) }, "pipeline: claiming due steps failed; retrying, less often while it fails");
          }
        }
      }
      let started = 0;
      if (claimed.length > 0) {
        this.stats.claimed += claimed.length;
        started = await this.launch(claimed);
      }
      // A full batch may mean more is due: look again at once; otherwise sleep until a step finishes.
      if (started === 0 || started < free) await this.sleep(this.pollPause());
    }
  }

  /** Starts the claimed steps; how many it started. */
  private async launch(claimed: string[]): Promise<number> {
    // A step commits before it ends (it still publishes what it did), so the revision's next step may
    // be due, and claimed here, while that one is in progress. One step of a revision at a time: it is
    // given back, due at once, for this worker (woken as that step ends) or another to claim again.
    const inProgress = claimed.filter((id) => this.inFlight.has(id));
    const ids = claimed.filter((id) => !this.inFlight.has(id));
    if (inProgress.length > 0) {
      await Promise.all(inProgress.map((id) => this.work.leases.release(id, 0))).catch((err: unknown) => {
        this.stats.errors++;
        this.logger.warn({ err, revision_ids: inProgress }, "pipeline: giving back steps claimed while in progress failed; their leases expire");
      });
    }
    let revisions: Revision[] = [];
    try {
      revisions = await this.work.claimed(ids);
    } catch (err) {
      this.stats.errors++;
      this.logger.warn({ err }, "pipeline: reading claimed revisions failed; their leases expire");
    }
    // Stopping meanwhile: leave the claimed steps to releaseAll (or to their leases running out).
    if (!this.running) return 0;
    for (const revision of revisions) {
      const step = { abort: new AbortController(), done: Promise.resolve() };
      step.done = this.perform(revision, step.abort).finally(() => {
        // Only its own entry (a guard: launch() starts no step of a revision already in progress).
        if (this.inFlight.get(revision.id) === step) this.inFlight.delete(revision.id);
        this.alone.ended(revision.id);
        this.wake();
      });
      this.inFlight.set(revision.id, step);
    }
    return revisions.length;
  }

  private async perform(revision: Revision, abort: AbortController): Promise<void> {
    const signal = abort.signal;
    /** A renewal of this step met a lost database: a takeover of its lease was an outage's, not a death. */
    let outage = false;
    /** Set as the step ends: a renewal answered later is not this step's to act on (the revision's next one may be in flight). */
    let ended = false;
    /** The lease given back by a renewal that found it lost: the step ends only once that is done. */
    let givingBack: Promise<boolean> | null = null;
    const renew = setInterval(() => {
      this.work.leases.renew(revision.id).then(
        (held) => {
          if (held || ended || signal.aborted || this.silenced) return;
          abort.abort(new Error("lease lost"));
          // Taken over while we could not reach the database: we were alive, and say so (Leases.absolve).
          // A step that stalled the process as long keeps the crash counted: to the pipeline it was dead.
          givingBack = this.giveBack({ revisionId: revision.id, status: revision.status, delayMs: 0, absolve: outage });
        },
        (err) => {
          if (isDatabaseUnavailable(err)) outage = true;
          this.noteTrouble(err);
          this.logger.warn({ err, revision_id: revision.id }, "pipeline: lease renewal failed");
        },
      );
    }, Math.max(10, Math.floor(this.options.leaseMs / 3)));
    const log = { revision_id: revision.id, status: revision.status };
    let stepLog: StepLog | null = null;
    const started = performance.now();
    let outcomeLabel = "error";
    let failed = false;
    try {
      if (!transition(revision.status as RevisionStatus, "advance", routeFor(revision.source)).ok) {
        // Nothing for a runtime to do; retrying would spin. Counted with the dropped steps.
        await this.work.leases.park(revision.id);
        return this.count("lost");
      }
      const gate = await this.work.steps.gate(revision);
      if (gate !== "go") return this.count(gate);
      if (this.suspect(revision)) {
        // Crashed often enough with nothing else in flight: the step is what takes the service down.
        if (revision.stepCrashesAlone >= this.options.crashLimit) return this.count(await this.giveUpCrashed(revision));
        if (!(await this.runAlone(revision, signal))) return;
      }
      const status = revision.status as RevisionStatus;
      const awaiting = status === "AWAITING_BUILD" ? this.inputs?.awaiting(revision) : null;
      if (awaiting) return this.count(await this.awaitSource(revision, awaiting));
      stepLog = this.work.logs.stepLog(revision, logKindOf(status, routeFor(revision.source)), this.options.owner);
      // Taken over from a holder that stopped renewing (Leases.claim counts it), or failed here with the
      // database gone, unsaid: the earlier run's lines are there already.
      if (this.unsaid.delete(unsaidStep(revision)) || revision.stepCrashes > 0) stepLog.warning(STEP_RERUN_AFTER_CRASH);
      let outcome: StepOutcome = await this.build({ revision, status, signal, log: stepLog });
      // What the revision refers to is checked as the create step ends, when it would be used.
      if (outcome.ok && revision.status === "CREATING") outcome = (await this.work.steps.checkReferences(revision)) ?? outcome;
      if (signal.aborted || this.silenced) return await this.endAborted(stepLog, signal);
      // Every line of the step is stored before its outcome's status line.
      await stepLog.close();
      outcome = masked(outcome, stepLog.mask);
      const result = await this.work.steps.commit(revision, outcome);
      outcomeLabel = outcome.ok ? "ok" : "failed";
      this.count(result);
    } catch (err) {
      failed = true;
      if (signal.aborted || this.silenced) {
        if (stepLog) await this.endAborted(stepLog, signal);
        return;
      }
      stepLog?.abandon();
      this.stats.errors++;
      const inARow = this.failures.count(revision, err);
      if (inARow >= this.options.giveUpAfter && (await this.giveUp(revision, err, inARow))) return;
      this.logger.warn({ err, ...log }, "pipeline: step failed unexpectedly; retrying later");
      // The reason stays in the service's own log: it may name internals.
      if (stepLog) {
        const said = await this.work.logs.append(revision, [{ kind: stepLog.kind, level: "WARNING", message: STEP_RETRIED }]);
        if (said === 0) this.remember(unsaidStep(revision));
      }
      // Again later, and later each time in a row (retryMs, twice that, four times…, at most 64 times):
      // at the defaults the step gives up after waits of 1 + 2 + 4 + 8 s.
      const delay = this.options.retryMs * 2 ** Math.min(Math.max(inARow - 1, 0), 6);
      await this.giveBack({ revisionId: revision.id, status: revision.status, delayMs: delay, absolve: outage || isDatabaseUnavailable(err) });
    } finally {
      ended = true;
      clearInterval(renew);
      // A step that ended (or was dropped) starts the count again; an aborted one says nothing.
      if (!failed && !signal.aborted) this.failures.clear(revision.id);
      // Only the steps that ran (not those gated, parked or abandoned): outcome ok, failed or error.
      if (stepLog && !signal.aborted) this.options.onStep?.(revision.status, outcomeLabel, (performance.now() - started) / 1000);
      // Until its lease is given back the step is still in flight: a claim of the revision meanwhile
      // hands it back at once (launch), so the release cannot land on the lease of its next step.
      await givingBack;
    }
  }

  /**
   * The log of a step cut short: handed on by this worker's stop, what it wrote stays, and says so (the
   * next run repeats it); else (its lease lost, or dying as a crash would) what is pending goes.
   */
  private async endAborted(stepLog: StepLog, signal: AbortSignal): Promise<void> {
    if (this.silenced || !(signal.reason instanceof WorkerStopping)) return stepLog.abandon();
    stepLog.warning(STEP_HANDED_ON);
    await stepLog.close();
  }

  /**
   * Gives a step's lease back, due after `delayMs`; a lease found taken over meanwhile takes back the
   * crash its takeover counted for us (we were alive). A database that cannot be reached: kept in
   * `unreleased` and tried again before the next claim, so that a lost database is not counted as the
   * death of the steps it interrupted, and a lease not given back is not left to run out when it can be.
   */
  private async giveBack(back: GiveBack): Promise<boolean> {
    const { revisionId, status, delayMs, absolve } = back;
    try {
      if (!(await this.work.leases.release(revisionId, delayMs, status)) && absolve) await this.work.leases.absolve(revisionId, status);
      this.unreleased.delete(revisionId);
      return true;
    } catch (err) {
      this.noteTrouble(err);
      if (!this.unreleased.has(revisionId)) this.logger.warn({ err, revision_id: revisionId }, "pipeline: giving a step back failed; trying again");
      this.unreleased.set(revisionId, back);
      return false;
    }
  }

  /** The pause before the next claim: pollMs, doubled for each claim that failed in a row, at most MAX_CLAIM_PAUSE_MS. */
  private pollPause(): number {
    if (this.claimFailures === 0) return this.options.pollMs;
    return Math.min(this.options.pollMs * 2 ** Math.min(this.claimFailures, 16), Math.max(MAX_CLAIM_PAUSE_MS, this.options.pollMs));
  }

  private noteTrouble(err: unknown): void {
    if (isDatabaseUnavailable(err)) this.troubleAt = Date.now();
  }

  /** Whether the revision's step was in flight at enough crashes of the service to run alone. */
  private suspect(revision: Revision): boolean {
    return this.options.crashLimit > 0 && revision.stepCrashes >= CRASHES_BEFORE_ALONE;
  }

  /**
   * Waits until no other step is in flight, then marks the step as run alone (a crash from now on is
   * its own); false when it stopped first (aborted, or its lease lost).
   */
  private async runAlone(revision: Revision, signal: AbortSignal): Promise<boolean> {
    const log = { revision_id: revision.id, status: revision.status, crashes: revision.stepCrashes, crashes_alone: revision.stepCrashesAlone };
    this.logger.warn(log, "pipeline: the service stopped while this step was in flight; it runs alone, after the steps in flight end");
    if (!(await this.alone.turn(revision.id, () => this.inFlight.size, signal))) return false;
    return !this.silenced && (await this.work.leases.markAlone(revision.id));
  }

  /** The revision fails without running its step again: the service crashed in it alone crashLimit times. */
  private giveUpCrashed(revision: Revision): Promise<StepResult> {
    const { stepCrashes: crashes, stepCrashesAlone: alone } = revision;
    this.logger.error({ revision_id: revision.id, status: revision.status, crashes, crashes_alone: alone }, "pipeline: the service keeps stopping in this step; failing its revision");
    const message =
      `The service stopped ${crashes} times while running this step (${alone} of them with no other step running), ` +
      "so the revision was given up: the step itself may be what stops it. Create a new revision to try again.";
    return this.work.steps.commit(revision, { ok: false, message });
  }

  /**
   * The revision fails, saying only that an internal error stopped it (the reason, which may name
   * internals, goes to the service's log). False when that could not be written either: the step
   * is retried as before.
   */
  private async giveUp(revision: Revision, err: unknown, inARow: number): Promise<boolean> {
    const log = { revision_id: revision.id, status: revision.status, failures: inARow };
    this.logger.error({ err, ...log }, "pipeline: step failed on an internal error too many times in a row; failing its revision");
    try {
      const message = `This step stopped on an internal error ${inARow} times in a row, so the revision was given up. Create a new revision to try again.`;
      this.count(await this.work.steps.commit(revision, { ok: false, message }));
      this.failures.clear(revision.id);
      return true;
    } catch (failure) {
      this.logger.warn({ err: failure, ...log }, "pipeline: could not fail the revision of a step that keeps failing; retrying later");
      return false;
    }
  }

  /** The runtime's step; the build step checks what the revision is built from first, for real. */
  private async build(request: StepRequest): Promise<StepOutcome> {
    if (request.status !== "BUILDING" || !this.inputs) return this.runtime.perform(request);
    const inspection = await this.inputs.inspect(request.revision, request.signal, request.log);
    if (!inspection.ok) return inspection;
    const outcome = await this.runtime.perform(request);
    return inspection.findings ? { ...outcome, findings: inspection.findings } : outcome;
  }

  /**
   * A revision created with nothing to build holds in AWAITING_BUILD, where a newer revision (the
   * tool's PATCH) makes it SKIPPED; after awaitSourceMs it fails instead of waiting on.
   */
  private async awaitSource(revision: Revision, { what, how }: MissingInput): Promise<StepResult> {
    const deadline = new Date(revision.createdAt.getTime() + this.options.awaitSourceMs);
    if (deadline.getTime() > Date.now()) return this.work.steps.hold(revision, `Waiting for ${what}: ${how}.`, deadline);
    const after = this.options.awaitSourceMs >= 60_000 ? `${Math.round(this.options.awaitSourceMs / 60_000)} minutes` : `${this.options.awaitSourceMs} ms`;
    const message = `Nothing to build: this revision was created without ${what}, and none came within ${after}. To deploy, ${how}: that creates a new revision.`;
    return this.work.steps.commit(revision, { ok: false, message });
  }

  private count(result: StepResult) {
    this.stats[result]++;
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

/** A step's lease to give back, due again after delayMs; absolve: a takeover of it was an outage's (Leases.absolve). */
interface GiveBack {
  revisionId: string;
  status: string;
  delayMs: number;
  absolve: boolean;
}

/**
 * A step's outcome as it is kept: its message (the status_message) and its findings (build_report),
 * which may quote what the step read, with the revision's secret values masked as its log lines are.
 */
function masked(outcome: StepOutcome, mask: SecretMask): StepOutcome {
  const message = outcome.message === undefined ? {} : { message: mask.apply(outcome.message) };
  const findings = outcome.findings ? { findings: { ...outcome.findings, report: mask.applyToJson(outcome.findings.report) as Record<string, unknown> } } : {};
  return { ...outcome, ...message, ...findings };
}
