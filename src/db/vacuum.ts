import type { Logger } from "../logger.js";
import { PeriodicTask } from "../periodic.js";
import type { Sql } from "./client.js";

/** How often the embedded database is vacuumed. */
export const PGLITE_VACUUM_EVERY_MS = 30_000;

/**
 * Embedded PGlite is PostgreSQL in single-user mode: no autovacuum worker ever runs. The pipeline
 * updates each revision row a dozen times (lease claims and renewals, transitions), and the dead
 * row versions stay where they are: the tables and their indexes grow with every change, and every
 * query, the worker's claim first, reads through them. In a 5-minute soak at 80% of the measured
 * maximum, latency doubled after two minutes and requests timed out after four. This does what
 * autovacuum would: VACUUM (ANALYZE) on a timer (ANALYZE as well: nothing else keeps the planner's
 * statistics up to date). PGlite runs one statement at a time, so it waits for whatever runs.
 */
export class Vacuum extends PeriodicTask<void> {
  constructor(
    private readonly sql: Sql,
    logger: Logger,
  ) {
    super("embedded database: vacuum", logger);
  }

  override start(everyMs: number = PGLITE_VACUUM_EVERY_MS): this {
    return super.start(everyMs);
  }

  /** One vacuum of the whole database. */
  protected async perform(): Promise<void> {
    const started = performance.now();
    try {
      await this.sql.script("VACUUM (ANALYZE)");
      this.logger.debug({ ms: Math.round(performance.now() - started) }, "vacuumed the embedded database");
    } catch (err) {
      this.logger.warn({ err }, "could not vacuum the embedded database");
    }
  }
}
