import { describe, expect, it } from "vitest";
import { Channel } from "../../src/core/feeds.js";

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
