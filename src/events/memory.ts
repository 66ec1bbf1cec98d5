import { type DomainEvent, type EventBus, topicsOf, type Unsubscribe } from "./types.js";

/** Delivery within one process: the embedded default, and the local fan-out of the PostgreSQL bus. */
export class MemoryEventBus implements EventBus {
  private readonly handlers = new Map<string, Set<(event: DomainEvent) => void>>();
  private readonly resyncHandlers = new Set<() => void>();

  async publish(event: DomainEvent): Promise<void> {
    this.deliver(event);
  }

  deliver(event: DomainEvent): void {
    for (const topic of topicsOf(event)) {
      const set = this.handlers.get(topic);
      if (!set) continue;
      for (const handler of set) handler(event);
    }
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
    if (errors.length === 1) throw errors[0];
    if (errors.length > 1) throw new AggregateError(errors, `${errors.length} resync handlers failed`);
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
