import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { buildLogsPath, newDeployment, read, type RestLine, stored, type Target, write } from "./support.js";
import { createListener } from "../support/fixtures.js";

/**
 * The official tool's two ways of following a log (COMPAT.md "Logs"), run against a log that grows
 * while they poll: `deploy logs --follow` (start_time = newest timestamp seen, order asc, ids
 * already printed dropped) and the build-log streaming of `deploy` (offset = next_offset, or the
 * previous offset when it is null). Each must print every line exactly once, in order.
 */

let t: TestApp;
let ws: NewWorkspace;

beforeAll(async () => {
  t = await startTestApp({ PIPELINE_WORKER: "off", RATE_LIMIT_PER_MINUTE: "0" });
  ws = await t.workspace();
});
afterAll(() => t.close());

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Writes batches of lines (some large, written in one statement), pausing between some, then ends the revision. */
async function writeWhileFollowed(x: Target, sizes: number[]): Promise<void> {
  let n = 0;
  for (const [i, size] of sizes.entries()) {
    await write(t, x, Array.from({ length: size }, () => ({ kind: "deploy" as const, message: `line ${n++}` })));
    if (i % 3 === 0) await pause(7);
  }
  const res = await t.request("POST", `/v2/deployments/${x.deploymentId}/revisions/${x.revisionId}/interrupt`, { key: ws.apiKey });
  expect(res.status).toBe(200);
}

const SIZES = [1, 3, 1, 120, 2, 1, 1, 60, 5, 300, 1, 1, 1, 49, 50, 51, 2, 1];

describe("deploy logs --follow", () => {
  it("sees every line exactly once while lines are written, bursts of hundreds included", async () => {
    const x = await newDeployment(t, ws.apiKey, { source: "external_container", source_config: { listener_id: await listener() } });
    const path = buildLogsPath(x, "deploy");
    const printed: RestLine[] = [];
    const seen = new Set<string>();
    // The tool's first fetch: the newest lines (order desc), printed oldest first.
    const initial = await read(t, ws.apiKey, path, { order: "desc", limit: 100 });
    printed.push(...[...initial.logs].reverse());
    for (const l of initial.logs) seen.add(l.id);
    let startTime = initial.logs[0]?.timestamp;

    let writing = true;
    const writer = writeWhileFollowed(x, SIZES).finally(() => (writing = false));
    let quietPolls = 0;
    // Polls as the tool does (every 2 s there; far more often here, to meet the writer mid-burst).
    while (writing || quietPolls < 2) {
      const page = await read(t, ws.apiKey, path, { order: "asc", limit: 100, ...(startTime && { start_time: startTime }) });
      const fresh = page.logs.filter((l) => !seen.has(l.id));
      printed.push(...fresh);
      for (const l of fresh) seen.add(l.id);
      if (fresh.length > 0) startTime = fresh.at(-1)!.timestamp;
      quietPolls = !writing && fresh.length === 0 ? quietPolls + 1 : 0;
      await pause(3);
    }
    await writer;

    const all = await stored(t, x.revisionId, "deploy");
    expect(printed.map((l) => l.id)).toEqual(all.map((l) => l.id));
    expect(printed.at(-1)!.message).toBe("[INTERRUPTED] Interrupted by a user");
    expect(all.filter((l) => l.message.startsWith("line "))).toHaveLength(SIZES.reduce((a, b) => a + b, 0));
  });

  it("never has more than 50 lines of a deployment share a timestamp, so a page of 100 always moves on", async () => {
    const x = await newDeployment(t, ws.apiKey);
    await write(t, x, Array.from({ length: 230 }, (_, i) => ({ message: `burst ${i}` })));
    await write(t, x, Array.from({ length: 30 }, (_, i) => ({ message: `next ${i}` })));
    const perTimestamp = new Map<number, number>();
    for (const l of await stored(t, x.revisionId)) perTimestamp.set(l.timestamp.getTime(), (perTimestamp.get(l.timestamp.getTime()) ?? 0) + 1);
    expect(Math.max(...perTimestamp.values())).toBeLessThanOrEqual(50);
    expect(perTimestamp.size).toBeGreaterThanOrEqual(Math.ceil(261 / 50));
    // Timestamps never go back: in (timestamp, id) order, ids only grow.
    const ids = (await stored(t, x.revisionId)).map((l) => BigInt(l.id));
    expect(ids).toEqual([...ids].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)));
  });
});

describe("the build logs streamed by deploy", () => {
  it("print every line exactly once, polling with next_offset (or the previous offset when it is null)", async () => {
    const x = await newDeployment(t, ws.apiKey);
    const path = buildLogsPath(x);
    const printed: string[] = [];
    let offset: string | null = null;
    let writing = true;
    const writer = (async () => {
      let n = 0;
      for (const size of [2, 70, 1, 1, 130, 3]) {
        await write(t, x, Array.from({ length: size }, () => ({ message: `build line ${n++}` })));
        await pause(5);
      }
    })().finally(() => (writing = false));
    let quietPolls = 0;
    while (writing || quietPolls < 2) {
      const page = await read(t, ws.apiKey, path, offset ? { order: "asc", limit: 50, offset } : { order: "asc", limit: 50 });
      printed.push(...page.logs.map((l) => l.message));
      offset = page.next_offset ?? offset;
      quietPolls = !writing && page.logs.length === 0 ? quietPolls + 1 : 0;
      await pause(3);
    }
    await writer;
    expect(printed).toEqual((await stored(t, x.revisionId)).map((l) => l.message));
    expect(printed).toHaveLength(1 + 207);
  });
});

const listener = () => createListener(t, ws.apiKey);
