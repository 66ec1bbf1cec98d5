import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "../logger.js";

export interface StartRetryOptions {
  /** Whether an error means the database cannot be reached now (rather than a mistake to report). */
  transient: (err: unknown) => boolean;
  logger: Logger;
  /** How long start-up keeps trying, all steps together; 0: not at all. */
  waitMs: number;
}

const FIRST_DELAY_MS = 250;
const MAX_DELAY_MS = 5_000;

/**
 * Start-up steps that need the database (migrations, the LISTEN session, the bootstrap key), each
 * retried with exponential backoff (250 ms doubling to 5 s, with jitter) while the database cannot
 * be reached: a replica started during a failover, or before PostgreSQL has come up, waits for it
 * instead of exiting. Each retry is logged. Other errors, and the deadline, end start-up.
 */
export function startRetry({ transient, logger, waitMs }: StartRetryOptions) {
  const deadline = Date.now() + waitMs;
  return async function step<T>(what: string, run: () => Promise<T>): Promise<T> {
    for (let attempt = 1, delay = FIRST_DELAY_MS; ; attempt++, delay = Math.min(delay * 2, MAX_DELAY_MS)) {
      try {
        return await run();
      } catch (err) {
        const wait = Math.round(delay * (0.75 + Math.random() / 2));
        if (!transient(err) || Date.now() + wait > deadline) throw err;
        logger.warn(
          { step: what, attempt, retry_in_ms: wait, reason: err instanceof Error ? err.message : String(err) },
          "database unavailable at start; retrying",
        );
        await sleep(wait);
      }
    }
  };
}
