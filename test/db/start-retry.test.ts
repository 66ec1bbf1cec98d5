import { describe, expect, it } from "vitest";
import { startRetry } from "../../src/db/start-retry.js";
import { createLogger } from "../../src/logger.js";

const lines: string[] = [];
const logger = createLogger("warn", { write: (line: string) => void lines.push(line) });
const transient = (err: unknown) => err instanceof Error && err.message === "unreachable";

describe("startRetry", () => {
  it("retries a step while the database cannot be reached, logging each retry, then returns its result", async () => {
    lines.length = 0;
    let calls = 0;
    const step = startRetry({ transient, logger, waitMs: 10_000 });
    const result = await step("migrations", async () => {
      if (++calls < 3) throw new Error("unreachable");
      return "applied";
    });
    expect(result).toBe("applied");
    expect(calls).toBe(3);
    expect(lines.map((l) => JSON.parse(l))).toEqual([
      expect.objectContaining({ level: 40, step: "migrations", attempt: 1, reason: "unreachable", msg: "database unavailable at start; retrying" }),
      expect.objectContaining({ level: 40, step: "migrations", attempt: 2 }),
    ]);
  });

  it("gives up at once on any other error, and on transient ones once the wait is spent", async () => {
    const step = startRetry({ transient, logger, waitMs: 0 });
    await expect(step("x", () => Promise.reject(new Error("syntax error")))).rejects.toThrow("syntax error");
    await expect(step("x", () => Promise.reject(new Error("unreachable")))).rejects.toThrow("unreachable");
  });
});
