import type { Database } from "../db/client.js";
import type { Logger } from "../logger.js";
import { loggedSubscriberErrors, MemoryEventBus } from "./memory.js";
import { PostgresEventBus } from "./postgres.js";
import type { EventBus } from "./types.js";

/**
 * The event bus for a database: in-process with embedded PGlite (one process by construction),
 * LISTEN/NOTIFY with PostgreSQL, so that replicas sharing the database see each other's events.
 */
export async function createEventBus(db: Database, url: string | null, logger: Logger, observeLag?: (seconds: number) => void): Promise<EventBus> {
  if (db.kind !== "postgres" || !db.pool || !url) return new MemoryEventBus(loggedSubscriberErrors(logger));
  const bus = new PostgresEventBus(db.pool, url, logger, observeLag);
  await bus.start();
  return bus;
}
