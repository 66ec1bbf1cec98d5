import { isRetryableDatabaseError } from "../core/prisma-errors.js";

/** How many revisions' failures in a row a worker keeps count of at most (the oldest count is forgotten). */
const MAX_COUNTED = 1_000;

/**
 * How many times in a row each revision's step has failed on this worker on an internal error that
 * is not transient: what decides when a step that keeps failing gives up (WorkerOptions.giveUpAfter).
 * Transient errors (a lost database, a write that met another's) say nothing of the step: they are
 * not counted, and leave the count as it was. A step of another status starts a new count.
 */
export class FailuresInARow {
  private readonly counts = new Map<string, { status: string; count: number }>();

  /** Counts this failure of the revision's step: how many in a row now (0 for a transient one). */
  count(revision: { id: string; status: string }, err: unknown): number {
    if (isRetryableDatabaseError(err)) return 0;
    const last = this.counts.get(revision.id);
    const count = last && last.status === revision.status ? last.count + 1 : 1;
    this.counts.delete(revision.id);
    // Bounded: a revision another worker took over may never come back to this one.
    if (this.counts.size >= MAX_COUNTED) this.counts.delete(this.counts.keys().next().value!);
    this.counts.set(revision.id, { status: revision.status, count });
    return count;
  }

  /** The revision's step ended (or was dropped, or gave up): the next failure starts a new count. */
  clear(revisionId: string): void {
    this.counts.delete(revisionId);
  }
}
