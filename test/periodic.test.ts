import { describe, expect, it } from "vitest";
import { PeriodicTask } from "../src/periodic.js";
import { createLogger } from "../src/logger.js";
import { waitFor } from "./support/wait.js";

/** A task whose runs fail as the test says, counting them. */
class Flaky extends PeriodicTask<number> {
  runs = 0;
  constructor(
    lines: string[],
    private readonly fail: () => boolean,
  ) {
    super("flaky task", createLogger("warn", { write: (line: string) => void lines.push(line) }));
  }
  protected async perform(): Promise<number> {
    this.runs++;
    if (this.fail()) throw new Error("boom");
    return this.runs;
  }
}

describe("PeriodicTask", () => {
  it("keeps running on its timer when a run fails, logging the failure, and stops cleanly after one", async () => {
    const lines: string[] = [];
    const rejections: unknown[] = [];
    const onRejection = (reason: unknown) => rejections.push(reason);
    process.on("unhandledRejection", onRejection);
    try {
      const task = new Flaky(lines, () => true).start(5);
      await waitFor(() => task.runs, (runs) => runs >= 3, { what: "three failed runs" });
      await task.stop();
      // A rejection is reported at the end of the turn it was left unhandled in: let one pass.
      await new Promise((resolve) => setImmediate(resolve));
      expect(rejections).toEqual([]);
      const logged = lines.map((line) => JSON.parse(line) as { level: number; msg: string; err?: { message: string } });
      expect(logged.length).toBeGreaterThanOrEqual(3);
      expect(logged[0]).toMatchObject({ level: 50, msg: "flaky task: a run failed; the next one tries again", err: { message: "boom" } });
    } finally {
      process.off("unhandledRejection", onRejection);
    }
  });

  it("hands a run's failure to whoever asked for that run, and its result otherwise", async () => {
    let failing = true;
    const task = new Flaky([], () => failing);
    await expect(task.run()).rejects.toThrow("boom");
    failing = false;
    await expect(task.run()).resolves.toBe(2);
  });

  it("takes a run that throws before it returns a promise (a perform that is not async) as a failed run", async () => {
    const lines: string[] = [];
    let runs = 0;
    const task = new (class extends PeriodicTask<void> {
      protected perform(): Promise<void> {
        runs++;
        throw new Error("thrown at once");
      }
    })("eager task", createLogger("warn", { write: (line: string) => void lines.push(line) }));
    await expect(task.run()).rejects.toThrow("thrown at once");
    // On its timer: logged, and tried again (an exception out of the timer's callback would end the process).
    task.start(5);
    await waitFor(() => runs, (n) => n >= 3, { what: "three failed runs on the timer" });
    await task.stop();
    expect(JSON.parse(lines[0]!)).toMatchObject({ level: 50, msg: "eager task: a run failed; the next one tries again", err: { message: "thrown at once" } });
  });

  it("stop() resolves even when the run in progress fails", async () => {
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const task = new (class extends PeriodicTask<void> {
      protected async perform(): Promise<void> {
        await gate;
        throw new Error("late boom");
      }
    })("gated task", createLogger("silent"));
    const run = task.run().catch((err: unknown) => err);
    const stopped = task.stop();
    release();
    await expect(stopped).resolves.toBeUndefined();
    expect(await run).toEqual(new Error("late boom"));
  });
});
