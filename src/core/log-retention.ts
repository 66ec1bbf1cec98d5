import type { PrismaClient } from "../db/client.js";
import type { Logger } from "../logger.js";
import { PeriodicTask } from "../periodic.js";
import type { Tx } from "./transitions.js";

/** Lines a revision's build log, and its deploy log, each keep once the revision has ended: the newest. */
export const MAX_LOG_LINES = 10_000;
/** Lines deleted per statement by the sweep, so that no statement holds locks for long. */
const SWEEP_BATCH = 5_000;

/**
 * When a revision ends, each of its logs keeps its newest MAX_LOG_LINES lines (no line is written
 * after its final status line, so this runs once). One statement, in the ending transaction.
 */
export async function trimRevisionLogs(tx: Tx, revisionId: string, keep = MAX_LOG_LINES): Promise<number> {
  return tx.$executeRaw`
    DELETE FROM revision_logs WHERE id IN (
      SELECT id FROM (
        SELECT id, row_number() OVER (PARTITION BY kind ORDER BY "timestamp" DESC, id DESC) AS newer
        FROM revision_logs WHERE revision_id = ${revisionId}::uuid
      ) ranked WHERE newer > ${keep}
    )`;
}

/**
 * Deletes log lines older than the retention period, a batch at a time. Every pipeline worker runs
 * one on a timer (deleting twice is harmless); the `timestamp` index finds the old lines.
 */
export class LogSweeper extends PeriodicTask<number> {
  constructor(
    private readonly prisma: PrismaClient,
    logger: Logger,
    private readonly retentionMs: number,
  ) {
    super("logs: retention sweep", logger);
  }

  /** One sweep: resolves with the lines deleted. */
  protected async perform(): Promise<number> {
    let total = 0;
    try {
      const cutoff = new Date(Date.now() - this.retentionMs);
      for (;;) {
        const deleted = await this.prisma.$executeRaw`
          DELETE FROM revision_logs WHERE id IN (
            SELECT id FROM revision_logs WHERE "timestamp" < ${cutoff}::timestamptz LIMIT ${SWEEP_BATCH})`;
        total += deleted;
        if (deleted < SWEEP_BATCH) break;
      }
      if (total > 0) this.logger.info({ lines: total, before: cutoff.toISOString() }, "logs: deleted lines past their retention");
    } catch (err) {
      this.logger.warn({ err, deleted: total }, "logs: sweeping old lines failed; the next sweep continues");
    }
    return total;
  }
}
