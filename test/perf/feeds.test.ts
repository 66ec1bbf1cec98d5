import { describe, expect, it, vi } from "vitest";
import { CoreError } from "../../src/core/errors.js";
import { type Backlog, Channel, Feed, RESYNC_SPREAD_MS, Wakeup, wakeOn } from "../../src/core/feeds.js";
import { MemoryEventBus } from "../../src/events/memory.js";
import { topics } from "../../src/events/types.js";
import { waitFor } from "../support/wait.js";

describe("Channel (one per subscriber of a feed)", () => {
  it("hands values to waiting consumers in order, even when their calls overlap, then ends them all", async () => {
    let closed = 0;
    const channel = new Channel<number>(() => closed++);
    const first = channel.next();
    const second = channel.next();
    const third = channel.next();
    channel.push(1);
    channel.push(2);
    channel.end();
    expect(await first).toEqual({ value: 1, done: false });
    expect(await second).toEqual({ value: 2, done: false });
    expect(await third).toEqual({ value: undefined, done: true });
    expect(closed).toBe(1);
  });

  it("queues values pushed before anyone waits, and delivers them before telling of the end", async () => {
    const channel = new Channel<string>(() => {});
    channel.push("a");
    channel.push("b");
    channel.end();
    expect(await channel.next()).toEqual({ value: "a", done: false });
    expect(await channel.next()).toEqual({ value: "b", done: false });
    expect(await channel.next()).toEqual({ value: undefined, done: true });
  });

  it("fails waiting consumers with the feed's error once, then is done, as a generator that threw; return() ends a wait at once", async () => {
    const failing = new Channel<number>(() => {});
    const waiting = failing.next();
    failing.end(new Error("read failed"));
    await expect(waiting).rejects.toThrow("read failed");
    // yoga's SSE answers each rejection as one more error event: rejecting for ever streamed errors for ever.
    expect(await failing.next()).toEqual({ value: undefined, done: true });

    const queued = new Channel<number>(() => {});
    queued.push(1);
    queued.end(new Error("read failed"));
    expect(await queued.next()).toEqual({ value: 1, done: false });
    await expect(queued.next()).rejects.toThrow("read failed");
    expect(await queued.next()).toEqual({ value: undefined, done: true });

    let left = false;
    const leaving = new Channel<number>(() => (left = true));
    const pending = leaving.next();
    await leaving.return();
    expect(await pending).toEqual({ value: undefined, done: true });
    expect(left).toBe(true);
    leaving.push(1);
    expect(await leaving.next()).toEqual({ value: undefined, done: true });
  });
});

describe("a subscriber that falls behind (Backlog)", () => {
  const behind = () => new CoreError("SLOW_CONSUMER", "fell behind");
  /** At most 10 characters queued. */
  const tenCharacters: Backlog<string> = { limit: 10, weigh: (value) => value.length, overflow: behind };

  it("queues up to its limit by weight; one more ends it with the overflow error and drops what it held", async () => {
    let closed = 0;
    const channel = new Channel<string>(() => closed++, tenCharacters);
    channel.push("abcd");
    channel.push("efghij"); // 10: at the limit, still queued
    expect(await channel.next()).toEqual({ value: "abcd", done: false });
    channel.push("klmn"); // read values no longer count: 6 + 4
    expect(closed).toBe(0);
    channel.push("o"); // 11
    expect(closed).toBe(1);
    expect(channel.closed).toBe(true);
    // Nothing it had queued is delivered: the subscriber learns at once that it has fallen behind.
    channel.push("p");
    await expect(channel.next()).rejects.toMatchObject({ code: "SLOW_CONSUMER" });
    expect(await channel.next()).toEqual({ value: undefined, done: true });
  });

  it("never counts what a waiting consumer takes at once", async () => {
    const channel = new Channel<string>(() => {}, tenCharacters);
    for (let i = 0; i < 100; i++) {
      const next = channel.next();
      channel.push("0123456789");
      expect(await next).toEqual({ value: "0123456789", done: false });
    }
    expect(channel.closed).toBe(false);
  });

  it("over a feed: the subscriber that stopped reading is ended and leaves; the others go on", async () => {
    const bus = new MemoryEventBus();
    const feed = new Counter(60_000, () => {});
    feed.open(bus, topics.revision("r"), "ws-1");
    const reading = await feed.join();
    const stopped = await feed.join();
    const received: number[] = [];
    const reader = (async () => {
      for await (const value of reading) received.push(value);
    })();
    for (let n = 1; n <= COUNTER_BACKLOG + 1; n++) {
      await bus.publish({ type: "revision.status", workspaceId: "ws-1", revisionId: "r", deploymentId: "d", status: "QUEUED" });
      await waitFor(() => received.length, (length) => length === n, { what: `change ${n} read` });
    }
    expect(stopped.closed).toBe(true);
    await expect(stopped.next()).rejects.toMatchObject({ code: "SLOW_CONSUMER" });
    expect(feed.ended).toBe(false);
    await reading.return();
    await reader;
    expect(feed.ended).toBe(true);
  });
});

describe("a feed whose read meets a lost database", () => {
  it("keeps its subscribers and reads again, in full, until the database answers", async () => {
    const bus = new MemoryEventBus();
    const feed = new Flaky(60_000, () => {});
    feed.open(bus, topics.revision("r"), "ws-1");
    const channel = await feed.join();
    feed.failures = 2;
    await bus.publish({ type: "revision.status", workspaceId: "ws-1", revisionId: "r", deploymentId: "d", status: "QUEUED" });
    expect(await channel.next()).toEqual({ value: 1, done: false });
    // Read three times: the event's step, then again (in full: what was told meanwhile may be lost).
    expect(feed.steps).toEqual([false, true, true]);
    expect(channel.closed).toBe(false);
    await channel.return();
  });

  it("ends its subscribers with the error when the error is not a lost database", async () => {
    const bus = new MemoryEventBus();
    const feed = new Flaky(60_000, () => {});
    feed.open(bus, topics.revision("r"), "ws-1");
    const channel = await feed.join();
    feed.failures = 1;
    feed.fault = new TypeError("a bug");
    await bus.publish({ type: "revision.status", workspaceId: "ws-1", revisionId: "r", deploymentId: "d", status: "QUEUED" });
    await expect(channel.next()).rejects.toThrow("a bug");
    expect(feed.ended).toBe(true);
  });
});

/** Publishes a count of its successful steps; its next `failures` steps throw `fault` (a lost connection). */
class Flaky extends Feed<number> {
  failures = 0;
  fault: Error = Object.assign(new Error("Connection terminated unexpectedly"), { code: "ECONNRESET" });
  readonly steps: boolean[] = [];
  private n = 0;
  protected async load(): Promise<void> {}
  protected async step(full: boolean): Promise<void> {
    this.steps.push(full);
    if (this.failures > 0) {
      this.failures--;
      throw this.fault;
    }
    this.publish(++this.n, true);
  }
}

/** Publishes 1, 2, 3… one a step; a subscriber may be 3 behind. */
const COUNTER_BACKLOG = 3;
class Counter extends Feed<number> {
  private n = 0;
  protected override readonly backlog: Backlog<number> = { limit: COUNTER_BACKLOG, weigh: () => 1, overflow: () => new CoreError("SLOW_CONSUMER", "fell behind") };
  protected async load(): Promise<void> {}
  protected async step(): Promise<void> {
    this.publish(++this.n, true);
  }
}

/** A feed whose load publishes nothing and whose step publishes one terminal value, then finishes. */
class OneLastChange extends Feed<string> {
  protected async load(): Promise<void> {}
  protected async step(): Promise<void> {
    this.publish("last", true);
    this.finish();
  }
}

describe("Feed.finish", () => {
  it("lets the last change reach every subscriber before any subscriber's stream completes", async () => {
    const bus = new MemoryEventBus();
    const feed = new OneLastChange(60_000, () => {});
    feed.open(bus, topics.revision("r"), "ws-1");
    const log: string[] = [];
    // A consumer that pulls at once, and one that is busy (writing to its socket) until the next turn.
    const consume = async (name: string, busy: boolean) => {
      const channel = await feed.join();
      for (;;) {
        if (busy) await new Promise((r) => setImmediate(r));
        const { value, done } = await channel.next();
        log.push(`${name}:${done ? "done" : value}`);
        if (done) return;
      }
    };
    const consumers = [consume("quick", false), consume("busy", true)];
    await new Promise((r) => setImmediate(r));
    await bus.publish({ type: "revision.status", workspaceId: "ws-1", revisionId: "r", deploymentId: "d", status: "DEPLOYED" });
    await Promise.all(consumers);
    expect(log.filter((l) => l.endsWith(":last")).sort()).toEqual(["busy:last", "quick:last"]);
    expect(log.findIndex((l) => l.endsWith(":done"))).toBeGreaterThan(Math.max(log.indexOf("quick:last"), log.indexOf("busy:last")));
  });
});

/** A feed of a value kept elsewhere (a database row, say) that no event tells of: each step reads it. */
class Unannounced extends Feed<number> {
  value = 0;
  reads = 0;
  private sent = 0;

  protected async load(): Promise<void> {}

  protected async step(): Promise<void> {
    this.reads++;
    await new Promise((r) => setImmediate(r)); // a read takes its time
    if (this.value !== this.sent) this.publish((this.sent = this.value), true);
  }
}

describe("Feed.settle (a server stopping)", () => {
  it("reads once more, though no event told of a change, and resolves once every subscriber has taken what that sent", async () => {
    const feed = new Unannounced(600_000, () => {});
    feed.open(new MemoryEventBus(), topics.revision("r"), "ws-1");
    const quick = await feed.join();
    const slow = await feed.join();
    const taken: string[] = [];
    const first = quick.next().then(({ value }) => taken.push(`quick:${value}`));
    feed.value = 7; // written, told to nobody: without settle() the feed would see it at its re-check, ten minutes on
    let settled = false;
    const settling = feed.settle().then(() => (settled = true));
    await first;
    // The slow subscriber has not taken its value yet: settle() waits for it.
    await waitFor(() => feed.reads, (n) => n >= 1, { what: "the settling read" });
    await new Promise((r) => setImmediate(r));
    expect(settled).toBe(false);
    taken.push(`slow:${(await slow.next()).value}`);
    await settling;
    expect(taken).toEqual(["quick:7", "slow:7"]);
  });

  it("steps in full: a feed that reads only what events told of reads everything then", async () => {
    const feed = new StepRecorder(600_000, () => {});
    feed.open(new MemoryEventBus(), topics.revision("r"), "ws-1");
    await feed.join();
    await feed.settle();
    expect(feed.steps).toEqual([true]);
  });

  it("resolves at once for a feed that has ended", async () => {
    const feed = new Unannounced(600_000, () => {});
    feed.open(new MemoryEventBus(), topics.revision("r"), "ws-1");
    const channel = await feed.join();
    await channel.return();
    expect(feed.ended).toBe(true);
    await feed.settle();
  });
});

describe("Channel.drained", () => {
  it("resolves once the consumer has taken every value pushed so far, or they were dropped", async () => {
    const empty = new Channel<number>(() => {});
    await empty.drained();

    const channel = new Channel<number>(() => {});
    channel.push(1);
    channel.push(2);
    let drained = false;
    const draining = channel.drained().then(() => (drained = true));
    await channel.next();
    await new Promise((r) => setImmediate(r));
    expect(drained).toBe(false);
    await channel.next();
    await draining;

    const left = new Channel<number>(() => {});
    left.push(1);
    const leaving = left.drained();
    await left.return();
    await leaving;
  });
});

describe("Wakeup", () => {
  it("tells a wait rung by an event apart from a re-check: its time, or the bus's resync", async () => {
    const wakeup = new Wakeup(60_000);
    wakeup.ring();
    expect(await wakeup.wait()).toBe(false);
    const waiting = wakeup.wait();
    wakeup.ring();
    expect(await waiting).toBe(false);
    // A resync while the loop steps is not lost: the next wait returns at once, in full.
    wakeup.resync();
    expect(await wakeup.wait()).toBe(true);
    const resynced = wakeup.wait();
    wakeup.ring();
    wakeup.resync();
    expect(await resynced).toBe(true);
    // Covered by that step: the next event's wait is not a full one.
    const next = wakeup.wait();
    wakeup.ring();
    expect(await next).toBe(false);
    // The re-check's time.
    expect(await new Wakeup(5).wait()).toBe(true);
  });

  it("wakes for a resync at a random point of its spread, not at once; an event meanwhile wakes it sooner", async () => {
    vi.useFakeTimers();
    const random = vi.spyOn(Math, "random").mockReturnValue(0.5);
    try {
      const wakeup = new Wakeup(60_000, 2_000);
      let full: boolean | undefined;
      void wakeup.wait().then((f) => (full = f));
      wakeup.resync();
      await vi.advanceTimersByTimeAsync(999);
      expect(full).toBeUndefined();
      await vi.advanceTimersByTimeAsync(1);
      expect(full).toBe(true);

      const sooner = wakeup.wait();
      wakeup.resync();
      wakeup.ring();
      expect(await sooner).toBe(true);
    } finally {
      random.mockRestore();
      vi.useRealTimers();
    }
  });

  it("wakeOn rings for its topic's events in its workspace, re-checks in full on a resync, and unsubscribes from both", async () => {
    const bus = new MemoryEventBus();
    const wakeup = new Wakeup(60_000);
    const off = wakeOn(bus, topics.oauthFlow("f1"), "ws-1", wakeup);
    const pending = wakeup.wait();
    await bus.publish({ type: "oauth.flow", workspaceId: "ws-2", flowId: "f1", status: "completed" });
    await bus.publish({ type: "oauth.flow", workspaceId: "ws-1", flowId: "f2", status: "completed" });
    await bus.publish({ type: "oauth.flow", workspaceId: "ws-1", flowId: "f1", status: "completed" });
    expect(await pending).toBe(false);
    const full = wakeup.wait();
    bus.resync();
    expect(await full).toBe(true);
    off();
    expect(bus.topicCount).toBe(0);
    expect(bus.resyncHandlerCount).toBe(0);
  });
});

/** Records its steps; publishes nothing. */
class StepRecorder extends Feed<string> {
  readonly steps: boolean[] = [];
  protected async load(): Promise<void> {}
  protected async step(full: boolean): Promise<void> {
    this.steps.push(full);
  }
}

describe("Feed and the bus's resync", () => {
  it("steps in full when the bus resyncs; an event's step is not full; a feed that ends stops listening", async () => {
    const bus = new MemoryEventBus();
    const feed = new StepRecorder(600_000, () => {});
    feed.open(bus, topics.revision("r"), "ws-1");
    const channel = await feed.join();
    expect(bus.resyncHandlerCount).toBe(1);
    await bus.publish({ type: "revision.status", workspaceId: "ws-1", revisionId: "r", deploymentId: "d", status: "QUEUED" });
    await waitFor(() => feed.steps.length, (n) => n === 1, { what: "the event's step" });
    bus.resync();
    await waitFor(() => feed.steps.length, (n) => n === 2, { what: "the resync's step" });
    expect(feed.steps).toEqual([false, true]);
    await channel.return();
    expect(feed.ended).toBe(true);
    expect(bus.resyncHandlerCount).toBe(0);
    expect(bus.topicCount).toBe(0);
  });

  it("spreads the full steps of a replica's feeds over RESYNC_SPREAD_MS after a resync, rather than all at once", async () => {
    vi.useFakeTimers();
    // Each feed's point in the spread: 0, 0.1, … 0.9 of it.
    let draw = 0;
    const random = vi.spyOn(Math, "random").mockImplementation(() => (draw++ % 10) / 10);
    try {
      const bus = new MemoryEventBus();
      const feeds = Array.from({ length: 10 }, () => new StepRecorder(600_000, () => {}));
      feeds.forEach((feed, i) => feed.open(bus, topics.revision(`r${i}`), "ws-1"));
      const channels = await Promise.all(feeds.map((feed) => feed.join()));
      bus.resync();
      const stepped = () => feeds.filter((feed) => feed.steps.length > 0).length;
      await vi.advanceTimersByTimeAsync(0);
      expect(stepped()).toBe(1);
      await vi.advanceTimersByTimeAsync(RESYNC_SPREAD_MS / 2);
      expect(stepped()).toBe(6);
      await vi.advanceTimersByTimeAsync(RESYNC_SPREAD_MS / 2);
      expect(stepped()).toBe(10);
      expect(feeds.map((feed) => feed.steps)).toEqual(feeds.map(() => [true]));
      await Promise.all(channels.map((channel) => channel.return()));
    } finally {
      random.mockRestore();
      vi.useRealTimers();
    }
  });

  it("a resync during the first read is stepped after it", async () => {
    const bus = new MemoryEventBus();
    let loaded!: () => void;
    class SlowLoad extends StepRecorder {
      protected override load(): Promise<void> {
        return new Promise((resolve) => (loaded = resolve));
      }
    }
    const feed = new SlowLoad(600_000, () => {});
    feed.open(bus, topics.revision("r"), "ws-1");
    const joined = feed.join();
    bus.resync();
    loaded();
    const channel = await joined;
    await waitFor(() => feed.steps, (s) => s.length === 1, { what: "the step after the first read" });
    expect(feed.steps).toEqual([true]);
    await channel.return();
  });
});
