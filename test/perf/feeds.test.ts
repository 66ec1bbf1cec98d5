import { describe, expect, it } from "vitest";
import { Channel, Feed } from "../../src/core/feeds.js";
import { MemoryEventBus } from "../../src/events/memory.js";
import { topics } from "../../src/events/types.js";

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

  it("fails waiting consumers with the feed's error, and return() ends a wait at once", async () => {
    const failing = new Channel<number>(() => {});
    const waiting = failing.next();
    failing.end(new Error("read failed"));
    await expect(waiting).rejects.toThrow("read failed");
    await expect(failing.next()).rejects.toThrow("read failed");

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
