import type { Prisma } from "../generated/prisma/client.js";
import type { DomainEvent, EventBus } from "../events/types.js";
import type { CoreDeps } from "./context.js";
import { markApplied } from "./idempotency.js";

export type Tx = Prisma.TransactionClient;

/** What a change made, with the events that tell of it. */
export interface Told {
  events: DomainEvent[];
}

/**
 * The one way core changes state and tells of it: `change` runs in one transaction and returns what
 * it made together with its events, which are published only once the transaction has committed
 * (never for a change that rolled back).
 */
export async function commitThenPublish<T extends Told>(deps: Pick<CoreDeps, "prisma" | "events">, change: (tx: Tx) => Promise<T>): Promise<T> {
  const result = await deps.prisma.$transaction(async (tx) => {
    const made = await change(tx);
    // A request with an Idempotency-Key: its key says the change was made, committing with it.
    await markApplied(tx);
    return made;
  });
  await publishEvents(deps.events, result.events);
  return result;
}

/** After commit. A lost publication must not undo or fail a committed change: subscribers refetch. */
export async function publishEvents(events: EventBus, list: DomainEvent[]): Promise<void> {
  for (const event of list) await events.publish(event);
}
