import { describe, expect, it } from "vitest";
import { deferredStart } from "../../src/pipeline/deferred-start.js";

/** Resolves after the immediates queued before it have run. */
const afterImmediates = () => new Promise<void>((resolve) => setImmediate(resolve));

describe("deferredStart", () => {
  it("starts once, on the first ready probe after it is armed", async () => {
    let starts = 0;
    const deferred = deferredStart(() => starts++);
    deferred.ready();
    await afterImmediates();
    expect(starts).toBe(0);
    deferred.arm();
    deferred.ready();
    deferred.ready();
    await afterImmediates();
    expect(starts).toBe(1);
    deferred.disarm();
  });

  it("does not start when disarmed right after a probe fired it (the app stopping meanwhile)", async () => {
    let starts = 0;
    const deferred = deferredStart(() => starts++);
    deferred.arm();
    // The start is on its way (after the probe's answer); the stop disarms, then stops the worker.
    deferred.ready();
    deferred.disarm();
    await afterImmediates();
    expect(starts).toBe(0);
  });
});
