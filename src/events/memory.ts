import type { Logger } from "../logger.js";
import { type DomainEvent, type EventBus, topicsOf, type Unsubscribe } from "./types.js";

/** What a bus does with a subscriber that threw. */
export type SubscriberErrors = (err: unknown, event: DomainEvent) => void;

/** A subscriber that threw, logged: a fault of the service's own, with the event it was told. */
export const loggedSubscriberErrors =
  (logger: Logger): SubscriberErrors =>
  (err, event) =>
    logger.error({ err, event: event.type }, "events: a subscriber failed");

/**
 * Delivery within one process: the embedded default, and the local fan-out of the PostgreSQL bus.
 * Every subscriber of a topic is told, even if another throws. The service's buses log such a fault
 * (loggedSubscriberErrors): the publisher's change is committed already, and must not fail for it.
 * Without `onSubscriberError` (tests), the errors are thrown together once every subscriber is told.
 */
export class MemoryEventBus implements EventBus {
  private readonly handlers = new Map<string, Set<(event: DomainEvent) => void>>();
  private readonly resyncHandlers = new Set<() => void>();

  constructor(private readonly onSubscriberError?: SubscriberErrors) {}

  async publish(event: DomainEvent): Promise<void> {
    this.deliver(event);
  }

  deliver(event: DomainEvent): void {
    const errors: unknown[] = [];
    for (const topic of topicsOf(event)) {
      const set = this.handlers.get(topic);
      if (!set) continue;
      for (const handler of set) {
        try {
          handler(event);
        } catch (err) {
          if (this.onSubscriberError) this.onSubscriberError(err, event);
          else errors.push(err);
        }
      }
    }
    throwTogether(errors, "subscribers failed");
  }

  subscribe(topic: string, handler: (event: DomainEvent) => void): Unsubscribe {
    let set = this.handlers.get(topic);
    if (!set) this.handlers.set(topic, (set = new Set()));
    set.add(handler);
    return () => {
      set.delete(handler);
      if (set.size === 0) this.handlers.delete(topic);
    };
  }

  onResync(handler: () => void): Unsubscribe {
    this.resyncHandlers.add(handler);
    return () => void this.resyncHandlers.delete(handler);
  }

  /**
   * Tells every resync handler that events may have been lost (the PostgreSQL bus, once it listens
   * again). Each handler is called even if another throws; their errors are thrown together after.
   */
  resync(): void {
    const errors: unknown[] = [];
    for (const handler of [...this.resyncHandlers]) {
      try {
        handler();
      } catch (err) {
        errors.push(err);
      }
    }
    throwTogether(errors, "resync handlers failed");
  }

  /** How many topics have at least one subscriber (diagnostics and tests). */
  get topicCount(): number {
    return this.handlers.size;
  }

  /** How many resync handlers are registered (diagnostics and tests). */
  get resyncHandlerCount(): number {
    return this.resyncHandlers.size;
  }

  async close(): Promise<void> {
    this.handlers.clear();
    this.resyncHandlers.clear();
  }
}

/** Nothing, one error as it is, or several as one AggregateError. */
function throwTogether(errors: unknown[], what: string): void {
  if (errors.length === 1) throw errors[0];
  if (errors.length > 1) throw new AggregateError(errors, `${errors.length} ${what}`);
}
