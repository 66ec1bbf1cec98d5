import { type DomainEvent, type EventBus, topicsOf, type Unsubscribe } from "./types.js";

/** Delivery within one process: the embedded default, and the local fan-out of the PostgreSQL bus. */
export class MemoryEventBus implements EventBus {
  private readonly handlers = new Map<string, Set<(event: DomainEvent) => void>>();

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

  /** How many topics have at least one subscriber (diagnostics and tests). */
  get topicCount(): number {
    return this.handlers.size;
  }

  async close(): Promise<void> {
    this.handlers.clear();
  }
}
