import type { Logger } from "../logger.js";
import type { Revision } from "../generated/prisma/client.js";
import type { CoreDeps } from "./context.js";
import { DeletionSweeper } from "./deletion-sweep.js";
import { LogSweeper } from "./log-retention.js";
import { LogWriter } from "./log-writer.js";
import { Leases } from "./revision-leases.js";
import { Steps } from "./revision-steps.js";

/** Who a worker is and how it paces its work (WorkerOptions' share of them that reaches the database). */
export interface RevisionWorkOptions {
  owner: string;
  leaseMs: number;
  queuedRecheckMs: number;
  logRetentionMs: number;
  deleteGraceMs: number;
}

/**
 * What a pipeline worker does to the database, all of it through core (only core touches Prisma:
 * test/layers.test.ts): it leases due steps, decides and commits them under the deployment's lock
 * (every status change a transition of core's), writes their log lines, and sweeps old lines and
 * deleted deployments. The worker owns the order of things and the runtime the work.
 */
export class RevisionWork {
  readonly leases: Leases;
  readonly steps: Steps;
  readonly logs: LogWriter;
  readonly logSweeper: LogSweeper;
  readonly deletions: DeletionSweeper;

  constructor(
    private readonly deps: CoreDeps,
    options: RevisionWorkOptions,
    logger: Logger,
  ) {
    this.leases = new Leases(deps.prisma, options.owner, options.leaseMs);
    this.steps = new Steps(deps, options.owner, options.queuedRecheckMs);
    this.logs = new LogWriter(deps, logger);
    this.logSweeper = new LogSweeper(deps.prisma, logger, options.logRetentionMs);
    this.deletions = new DeletionSweeper(deps, logger, options.deleteGraceMs);
  }

  /** The revisions just claimed, whole (a step reads its source, config and status from them). */
  claimed(ids: readonly string[]): Promise<Revision[]> {
    return ids.length === 0 ? Promise.resolve([]) : this.deps.prisma.revision.findMany({ where: { id: { in: [...ids] } } });
  }
}
