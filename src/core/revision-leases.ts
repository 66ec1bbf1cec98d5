import type { PrismaClient } from "../db/client.js";

/**
 * Durable pipeline work lives on the revision row: `next_step_at` says when its next step is due,
 * `lease_owner`/`lease_until` who is doing it. A worker that dies keeps its lease only until
 * `lease_until`; then any worker claims the step again. Plain SQL, so that claiming is one statement
 * with FOR UPDATE SKIP LOCKED and never touches `updated_at` (which shows transitions only).
 *
 * Every way a live worker ends a step clears its lease (a transition, a retry, a wait, a graceful
 * stop); only a process that stopped mid-step leaves one held. So a claim that takes over a held lease
 * counts a crash of that step (`step_crashes`), and of its run alone when the dead holder ran it alone
 * (`step_crashes_alone`); a transition starts both again from 0. A holder that could not renew (it
 * lost the database for longer than its lease, or stalled) looks as dead; if it was not, it finds its
 * lease taken once it is back, and takes back the crash counted for it (`absolve`): a database
 * outage is no crash of the steps that were in flight.
 */
export class Leases {
  constructor(
    private readonly prisma: PrismaClient,
    private readonly owner: string,
    private readonly leaseMs: number,
  ) {}

  /**
   * Leases up to `limit` due steps that nobody holds (or whose holder's lease ran out), but none of a
   * deployment being deleted; their ids. A lease still held by another (run out) counts its step's
   * crash; one of our own (a renewal that came too late) does not: we are alive. Nor does any when
   * `countCrashes` is false: the claimer could not reach the database itself a moment ago, so the
   * holders it takes over from most likely could not either (an outage, not their deaths).
   */
  async claim(limit: number, { countCrashes = true }: { countCrashes?: boolean } = {}): Promise<string[]> {
    const rows = await this.prisma.$queryRaw<{ id: string }[]>`
      WITH due AS (
        SELECT id, (${countCrashes} AND lease_owner IS NOT NULL AND lease_owner <> ${this.owner}) AS taken_over
        FROM revisions
        WHERE next_step_at <= now() AND (lease_until IS NULL OR lease_until < now())
          -- Nothing of a deployment being deleted moves again (its rows go soon).
          AND NOT EXISTS (SELECT 1 FROM deployments d WHERE d.id = revisions.deployment_id AND d.status = 'AWAITING_DELETE')
        ORDER BY next_step_at
        LIMIT ${limit}::int
        FOR UPDATE SKIP LOCKED)
      UPDATE revisions r SET lease_owner = ${this.owner}, lease_until = now() + ${this.leaseMs}::double precision * interval '1 millisecond',
        step_crashes = r.step_crashes + due.taken_over::int,
        step_crashes_alone = r.step_crashes_alone + (due.taken_over AND r.lease_alone)::int,
        lease_taken_from = CASE WHEN due.taken_over THEN r.lease_owner ELSE r.lease_taken_from END,
        lease_taken_alone = CASE WHEN due.taken_over THEN r.lease_alone ELSE r.lease_taken_alone END,
        lease_alone = false
      FROM due WHERE r.id = due.id
      RETURNING r.id`;
    return rows.map((r) => r.id);
  }

  /** Extends a lease still held; false when it was lost (expired and claimed, or the revision moved on). */
  async renew(revisionId: string): Promise<boolean> {
    const count = await this.prisma.$executeRaw`
      UPDATE revisions SET lease_until = now() + ${this.leaseMs}::double precision * interval '1 millisecond'
      WHERE id = ${revisionId}::uuid AND lease_owner = ${this.owner}`;
    return count > 0;
  }

  /** Marks a step held as run alone, so that a crash while it runs is counted as its own; false when the lease was lost. */
  async markAlone(revisionId: string): Promise<boolean> {
    const count = await this.prisma.$executeRaw`
      UPDATE revisions SET lease_alone = true WHERE id = ${revisionId}::uuid AND lease_owner = ${this.owner}`;
    return count > 0;
  }

  /**
   * Gives a step back, due again after `delayMs` (a retry, or a queued revision waiting its turn);
   * false when the lease was no longer ours.
   */
  async release(revisionId: string, delayMs: number, status?: string): Promise<boolean> {
    // With its status, the step's own lease only: never that of the revision's next step, claimed since.
    const count = await this.prisma.$executeRaw`
      UPDATE revisions SET lease_owner = NULL, lease_until = NULL,
        next_step_at = now() + ${delayMs}::double precision * interval '1 millisecond'
      WHERE id = ${revisionId}::uuid AND lease_owner = ${this.owner} AND (${status ?? null}::text IS NULL OR status = ${status ?? null}::text)`;
    return count > 0;
  }

  /**
   * We were alive when our lease of this step was taken over (we find it lost once we can reach the
   * database again): the crash that takeover counted, ours, is taken back.
   */
  async absolve(revisionId: string, status: string): Promise<void> {
    await this.prisma.$executeRaw`
      UPDATE revisions SET step_crashes = greatest(step_crashes - 1, 0),
        step_crashes_alone = greatest(step_crashes_alone - lease_taken_alone::int, 0),
        lease_taken_from = NULL, lease_taken_alone = false
      WHERE id = ${revisionId}::uuid AND status = ${status} AND lease_taken_from = ${this.owner}`;
  }

  /** No step follows (UNKNOWN, or a status its route never enters): not due again until a user acts. */
  async park(revisionId: string): Promise<void> {
    await this.prisma.$executeRaw`
      UPDATE revisions SET lease_owner = NULL, lease_until = NULL, next_step_at = NULL
      WHERE id = ${revisionId}::uuid AND lease_owner = ${this.owner}`;
  }

  /** Gives back every lease of this owner, due at once: a stopping worker hands its work on. */
  async releaseAll(): Promise<number> {
    return this.prisma.$executeRaw`
      UPDATE revisions SET lease_owner = NULL, lease_until = NULL WHERE lease_owner = ${this.owner}`;
  }
}
