import { setTimeout as sleep } from "node:timers/promises";
import type { DomainEvent, EventBus, Unsubscribe } from "../events/types.js";
import { CoreError } from "./errors.js";
import { isDatabaseUnavailable } from "./prisma-errors.js";

type Waiter<T> = { resolve: (r: IteratorResult<T>) => void; reject: (e: unknown) => void };

/**
 * How far behind its feed one subscriber may fall: what a client that stopped reading (a suspended
 * laptop, a stuck tab, a hostile caller) can make the server hold for it. Both transports take a
 * value only once the previous one is written to the socket (graphql-ws awaits each send, and an SSE
 * answer's stream is read as the socket drains), so a subscriber that stops reading backs up into its
 * channel's queue. Past the limit the channel drops what it held and ends with overflow().
 */
export interface Backlog<T> {
  /** The most a subscriber's queued values may weigh together. */
  readonly limit: number;
  /** What one value weighs (1 for every value: the limit is a count). */
  weigh(value: T): number;
  /** What ends a subscriber past the limit. */
  overflow(): unknown;
}

/**
 * How long a feed keeps reading again while the database cannot be reached before it ends its
 * subscribers with SERVICE_UNAVAILABLE (a restart or a failover takes seconds; the statement bound,
 * src/db/client.ts, is 20 s), and the waits between its reads.
 */
const OUTAGE_PATIENCE_MS = 60_000;
const OUTAGE_FIRST_RETRY_MS = 250;
const OUTAGE_MAX_RETRY_MS = 5_000;

/** The changes a subscriber of an object's state may be behind (statuses, revisions): a client that reads is never near it. */
export const MAX_CHANGES_BEHIND = 1000;

const changesBacklog: Backlog<unknown> = {
  limit: MAX_CHANGES_BEHIND,
  weigh: () => 1,
  overflow: () => new CoreError("SLOW_CONSUMER", `This subscription fell behind by more than ${MAX_CHANGES_BEHIND} changes and was ended; subscribe again for the current state.`),
};

/**
 * A stream that one side pushes into and the other iterates. Unlike an async generator, return()
 * takes effect at once even while the consumer is waiting, so an unsubscribing client frees its
 * place in the feed immediately. Its buffers are made on first need: most subscribers of a feed
 * wait with nothing queued, and there may be thousands of them.
 */
export class Channel<T> implements AsyncIterableIterator<T> {
  private queue: T[] | null = null;
  /** The consumer waiting for the next value; `more` holds any further ones (a consumer rarely overlaps its calls). */
  private waiter: Waiter<T> | null = null;
  private more: Waiter<T>[] | null = null;
  private failure: unknown = null;
  /** What the queue weighs (backlog.weigh). */
  private weight = 0;
  /** Told once the consumer has taken every queued value (drained()). */
  private emptied: (() => void)[] | null = null;
  closed = false;

  constructor(
    private readonly onClose: (channel: Channel<T>) => void,
    private readonly backlog?: Backlog<T>,
  ) {}

  push(value: T): void {
    if (this.closed) return;
    const waiter = this.waiter;
    if (waiter) {
      this.waiter = this.more?.shift() ?? null;
      waiter.resolve({ value, done: false });
      return;
    }
    if (this.backlog) {
      this.weight += this.backlog.weigh(value);
      if (this.weight > this.backlog.limit) return this.overflow(this.backlog);
    }
    (this.queue ??= []).push(value);
  }

  /**
   * No more values: a waiting consumer finishes (or fails with `error`) once the queue is drained.
   * The error is told once, then the channel is done, as a generator that threw: yoga's SSE answers
   * each rejection as one more error event, so a channel rejecting every call streamed errors for ever.
   */
  end(error?: unknown): void {
    if (this.closed) return;
    this.closed = true;
    const waiting = this.waiter ? [this.waiter, ...(this.more ?? [])] : [];
    this.waiter = this.more = null;
    if (waiting.length === 0) this.failure = error ?? null;
    for (const waiter of waiting) {
      if (error) waiter.reject(error);
      else waiter.resolve({ value: undefined, done: true });
    }
    this.onClose(this);
  }

  next(): Promise<IteratorResult<T>> {
    if (this.queue && this.queue.length > 0) {
      const value = this.queue.shift()!;
      if (this.backlog) this.weight -= this.backlog.weigh(value);
      if (this.queue.length === 0) this.tellEmptied();
      return Promise.resolve({ value, done: false });
    }
    if (this.closed) {
      const failure = this.failure;
      this.failure = null;
      return failure ? Promise.reject(failure) : Promise.resolve({ value: undefined, done: true });
    }
    return new Promise((resolve, reject) => {
      if (this.waiter) (this.more ??= []).push({ resolve, reject });
      else this.waiter = { resolve, reject };
    });
  }

  /** Resolves once the consumer has taken every value pushed so far, or they were dropped. */
  drained(): Promise<void> {
    if (!this.queue || this.queue.length === 0) return Promise.resolve();
    return new Promise((resolve) => (this.emptied ??= []).push(resolve));
  }

  return(): Promise<IteratorResult<T>> {
    this.queue = null;
    this.tellEmptied();
    this.end();
    return Promise.resolve({ value: undefined, done: true });
  }

  /** Fell too far behind: what it held goes at once, and the consumer is told why it ends. */
  private overflow(backlog: Backlog<T>): void {
    this.queue = null;
    this.tellEmptied();
    this.weight = 0;
    this.end(backlog.overflow());
  }

  private tellEmptied(): void {
    const emptied = this.emptied;
    this.emptied = null;
    for (const resolve of emptied ?? []) resolve();
  }

  [Symbol.asyncIterator]() {
    return this;
  }
}

/**
 * How long after a resync a replica's feeds take their full steps, each at a random point in it: a
 * replica following thousands of objects would otherwise queue thousands of reads on its pool at once,
 * ahead of every request. Short next to the reconnect that caused it.
 */
export const RESYNC_SPREAD_MS = 2_000;

/**
 * Wakes a waiting loop when the bus delivers (ring). A rare re-check (every `recheckMs`) and the bus's
 * resync (it listens again after losing its connection) wake it too, and tell the loop to read the
 * state of what it follows rather than only what the events told: an event may have been lost.
 */
export class Wakeup {
  private wake: (() => void) | null = null;
  private dirty = false;
  /** Resynced since the last wait: the next step reads everything. */
  private stale = false;

  constructor(
    private readonly recheckMs: number,
    /**
     * A resync wakes the loop after a random delay up to this long (0: at once), so that the many
     * loops of one replica, all told at the same instant, do not all read at that instant.
     */
    private readonly resyncSpreadMs = 0,
  ) {}

  ring = (): void => {
    this.dirty = true;
    this.wake?.();
  };

  /** Wakes the loop at once for a full re-check, as if its time had come. */
  recheckNow = (): void => {
    this.stale = true;
    this.ring();
  };

  /**
   * Events may have been lost (the bus resynced): wakes the loop for a full re-check, at once or
   * within the spread. An event rung meanwhile starts that full step sooner.
   */
  resync = (): void => {
    this.stale = true;
    if (this.resyncSpreadMs <= 0) return this.ring();
    setTimeout(this.ring, Math.random() * this.resyncSpreadMs).unref();
  };

  /**
   * Returns at once if rung since the last wait; a ring during the caller's step is never lost.
   * Resolves true when the caller should re-check in full (the re-check's time came, or the bus resynced).
   */
  async wait(): Promise<boolean> {
    if (this.dirty) {
      this.dirty = false;
      return this.takeStale();
    }
    let timedOut = false;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        timedOut = true;
        resolve();
      }, this.recheckMs);
      timer.unref();
      this.wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
    this.wake = null;
    // Rings up to here are covered by the step the caller starts now (it reads after them); later
    // ones set dirty again. Not clearing would cost every change a second, empty step.
    this.dirty = false;
    return this.takeStale() || timedOut;
  }

  private takeStale(): boolean {
    const stale = this.stale;
    this.stale = false;
    return stale;
  }
}

/**
 * Rings `wakeup` on each event of `topic` in the workspace, and has it re-check in full when the bus
 * resyncs: for loops that read what they follow on each wake-up (one subscription each). Returns
 * what ends both.
 */
export function wakeOn(bus: EventBus, topic: string, workspaceId: string, wakeup: Wakeup): Unsubscribe {
  const offTopic = bus.subscribe(topic, (event) => {
    if (event.workspaceId === workspaceId) wakeup.ring();
  });
  const offResync = bus.onResync(wakeup.resync);
  return () => {
    offTopic();
    offResync();
  };
}

/**
 * One live view of one object, shared by every local subscriber of it: one bus subscription per
 * topic it follows, one read per change, one re-check timer, whatever the number of subscribers. A
 * subclass reads the object's state (load), then what changed after each wake-up (step), and
 * publishes it; a subscriber joining later starts from `current`, the last state published (or what
 * greet() gives it, told `J`, what the subscriber asked for). When the bus resyncs (events may have
 * been lost while it was reconnecting), every feed steps in full, each within RESYNC_SPREAD_MS.
 */
export abstract class Feed<T, J = void> {
  private readonly channels = new Set<Channel<T>>();
  /** Subscribers joined or still waiting for the first read: the feed lives while there are any. */
  private holds = 0;
  private readonly wakeup: Wakeup;
  private readonly unsubscribes: Unsubscribe[] = [];
  private bus: EventBus | null = null;
  private workspaceId = "";
  private ready: Promise<void> | null = null;
  private failure: unknown = null;
  /** settle() calls waiting for a step that starts after them. */
  private settlers: (() => void)[] = [];
  /** What a subscriber joining now receives first; undefined: nothing until the next change. */
  protected current: T | undefined = undefined;
  /** How far behind the feed each subscriber may fall (by default MAX_CHANGES_BEHIND changes). */
  protected readonly backlog: Backlog<T> = changesBacklog;
  ended = false;

  constructor(
    recheckMs: number,
    /** Called once when the feed ends, so that its owner drops it. */
    private readonly forget: () => void,
  ) {
    this.wakeup = new Wakeup(recheckMs, Math.min(recheckMs, RESYNC_SPREAD_MS));
  }

  /** The first read, after the bus subscription is in place; throws (NOT_FOUND) if there is nothing to follow. */
  protected abstract load(): Promise<void>;
  /**
   * After each wake-up: reads what changed and publishes it. `full`: woken by the re-check or by the
   * bus's resync, so events may have been lost: read the object's state, not only what events told.
   */
  protected abstract step(full: boolean): Promise<void>;
  /** Each bus event of the feed's topics and workspace, as it arrives (before the wake-up). */
  protected received(_event: DomainEvent): void {}

  /** Subscribes to the bus, then reads; call once. Events arriving during the read are stepped after it. */
  open(bus: EventBus, topic: string, workspaceId: string): void {
    this.bus = bus;
    this.workspaceId = workspaceId;
    this.unsubscribes.push(bus.onResync(this.wakeup.resync));
    this.follow(topic);
    this.ready = this.load();
    void this.run();
  }

  /**
   * Also wakes on (and is told of) the events of `topic`: for an object the feed's own depends on,
   * such as a revision's deployment. Called from load() before that object is read, nothing is missed.
   */
  protected follow(topic: string): void {
    if (!this.bus || this.ended) return;
    const workspaceId = this.workspaceId;
    // Topics are per object id; the workspace check makes tenancy explicit rather than implied.
    const unsubscribe = this.bus.subscribe(topic, (event) => {
      if (event.workspaceId !== workspaceId) return;
      this.received(event);
      this.wakeup.ring();
    });
    this.unsubscribes.push(unsubscribe);
  }

  /**
   * A new subscriber: after the first read, it receives the current state, then every later change.
   * `onClose` is told once when the subscriber's channel ends, however it ends.
   */
  async join(options: J, onClose?: () => void): Promise<Channel<T>> {
    this.holds++;
    try {
      await this.ready;
    } catch (err) {
      this.holds--;
      throw err;
    }
    const leave = onClose
      ? (left: Channel<T>) => {
          this.leave(left);
          onClose();
        }
      : this.leave;
    const channel = new Channel<T>(leave, this.backlog);
    if (!this.failure) this.greet(channel, options);
    if (this.ended) channel.end(this.failure ?? undefined);
    else this.channels.add(channel);
    return channel;
  }

  /**
   * What a subscriber joining now receives first: by default `current`, the last state published, as
   * an object of its own. Subscribers of one event share its execution (graphql/shared-execution.ts,
   * by the event object): a copy has its first message executed for it now, showing what changed since
   * `current` was published that its feed is not told of (its deployment's settings, say).
   */
  protected greet(channel: Channel<T>, _options: J): void {
    const current = this.current;
    if (current === undefined) return;
    channel.push(typeof current === "object" && current !== null ? ({ ...current } as T) : current);
  }

  /**
   * Reads once more in full (events may still be on their way), and resolves once every
   * subscriber has taken what that sent (or the feed ended): for a server stopping, so that what was
   * written just before (the pipeline's last lines as it hands its steps back) reaches subscribers
   * before their streams end. A subscriber that does not read holds it: the caller bounds the wait.
   */
  async settle(): Promise<void> {
    if (!this.ended) {
      await new Promise<void>((resolve) => {
        this.settlers.push(resolve);
        this.wakeup.recheckNow();
      });
    }
    await Promise.all([...this.channels].map((channel) => channel.drained()));
  }

  /** Sends a change to every subscriber; `remember` makes it what later subscribers start from. */
  protected publish(value: T, remember: boolean): void {
    if (remember) this.current = value;
    for (const channel of this.channels) channel.push(value);
  }

  /** The subscribers as they are now: a step that read events sends them to those who were there. */
  protected audience(): Channel<T>[] {
    return [...this.channels];
  }

  /**
   * Nothing more will change (a terminal status, a deleted object): every subscriber completes, on
   * the next turn of the event loop, so that the last change reaches every subscriber before any
   * stream's completion is written (with ten thousand subscribers, writing both per subscriber in
   * turn made the last one wait for twice the writes). A channel keeps its queued values when ended.
   */
  protected finish(): void {
    if (this.ended) return;
    this.close();
    const channels = [...this.channels];
    this.channels.clear();
    setImmediate(() => {
      for (const channel of channels) channel.end();
    });
  }

  private fail(err: unknown): void {
    if (this.ended) return;
    this.failure = err;
    this.close();
    for (const channel of this.channels) channel.end(err);
    this.channels.clear();
  }

  private readonly leave = (channel: Channel<T>): void => {
    if (!this.channels.delete(channel)) return;
    this.holds--;
    if (this.holds === 0) this.close();
  };

  private close(): void {
    if (this.ended) return;
    this.ended = true;
    for (const unsubscribe of this.unsubscribes.splice(0)) unsubscribe();
    this.wakeup.ring();
    for (const settled of this.settlers.splice(0)) settled();
    this.forget();
  }

  private async run(): Promise<void> {
    try {
      await this.ready;
    } catch (err) {
      // Nothing to follow: the joiners see the error; later subscribers start a feed of their own.
      this.failure = err;
      this.close();
      return;
    }
    try {
      while (!this.ended) {
        const full = await this.wakeup.wait();
        // Those who asked before this step began: it reads after their call.
        const settled = this.settlers.splice(0);
        try {
          if (!this.ended) await this.stepThroughOutage(full);
        } finally {
          for (const resolve of settled) resolve();
        }
      }
    } catch (err) {
      this.fail(err);
    }
  }

  /**
   * A step, read again while the database cannot be reached (a restart, a failover, connections cut),
   * at growing intervals for up to OUTAGE_PATIENCE_MS: the subscribers stay, and catch up once it
   * answers. Each read after a failed one is full, as after a resync: what was told meanwhile may be
   * lost. Any other error, or an outage longer than that, ends the feed with it.
   */
  private async stepThroughOutage(full: boolean): Promise<void> {
    const giveUpAt = Date.now() + OUTAGE_PATIENCE_MS;
    for (let delayMs = OUTAGE_FIRST_RETRY_MS; ; delayMs = Math.min(delayMs * 2, OUTAGE_MAX_RETRY_MS)) {
      try {
        return await this.step(full);
      } catch (err) {
        if (!isDatabaseUnavailable(err) || Date.now() + delayMs > giveUpAt) throw err;
      }
      // Spread (half to one and a half times): a replica's feeds all failed at once, and should not all read again at once.
      await sleep(delayMs * (0.5 + Math.random()), undefined, { ref: false });
      if (this.ended) return;
      full = true;
    }
  }
}
