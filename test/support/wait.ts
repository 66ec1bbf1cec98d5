import { setTimeout as sleep } from "node:timers/promises";

export interface WaitOptions {
  /** Generous by default: the suite must pass on a loaded two-core machine. */
  timeoutMs?: number;
  intervalMs?: number;
  /** Named in the timeout's error. */
  what?: string;
}

/**
 * The one way tests wait: reads until `done` accepts the value (or, without `done`, until the value
 * is truthy), and returns it; past the deadline, fails with the last value seen. Never a sleep on luck.
 */
export async function waitFor<T>(read: () => T | Promise<T>, done: (value: T) => boolean = Boolean, options: WaitOptions = {}): Promise<T> {
  const { timeoutMs = 30_000, intervalMs = 10, what } = options;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what ?? "a condition"}; last value: ${describe(value)}`);
    await sleep(intervalMs);
  }
}

/** Retries an assertion until it passes; past the deadline, throws its last failure. */
export async function eventually<T>(assertion: () => T | Promise<T>, options: Omit<WaitOptions, "what"> = {}): Promise<T> {
  const { timeoutMs = 30_000, intervalMs = 100 } = options;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await assertion();
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await sleep(intervalMs);
    }
  }
}

function describe(value: unknown): string {
  try {
    return JSON.stringify(value, (_k, v: unknown) => (typeof v === "bigint" ? String(v) : v))?.slice(0, 500) ?? String(value);
  } catch {
    return String(value);
  }
}
