import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { buildLogsPath, newDeployment, read, readAll, stored, type Target, write } from "./support.js";
import { createListener } from "../support/fixtures.js";

/**
 * Paging a log through REST: both orders, every page size, to the end, with many lines sharing one
 * timestamp; no line lost, none repeated. The pipeline is off: lines are written as it writes them.
 */

let t: TestApp;
let ws: NewWorkspace;
/** A finished revision whose build log has 201 lines in batches that share a timestamp each. */
let done: Target;
let expected: string[];

beforeAll(async () => {
  t = await startTestApp({ PIPELINE_WORKER: "off", RATE_LIMIT_PER_MINUTE: "0" });
  ws = await t.workspace();
  done = await newDeployment(t, ws.apiKey);
  // One statement per batch: 60 lines with one timestamp, then 1, then 60, then 78 …
  for (const size of [60, 1, 60, 78]) {
    expect(await write(t, done, Array.from({ length: size }, (_, i) => ({ message: `batch of ${size}, line ${i}` })))).toBe(size);
  }
  const interrupt = await t.request("POST", `/v2/deployments/${done.deploymentId}/revisions/${done.revisionId}/interrupt`, { key: ws.apiKey });
  expect(interrupt.status).toBe(200);
  expected = (await stored(t, done.revisionId)).map((l) => l.id);
});
afterAll(() => t.close());

describe("a finished revision's build log", () => {
  it("holds its creation line, every written line, and its final status line last", async () => {
    const lines = await stored(t, done.revisionId);
    expect(lines).toHaveLength(1 + 60 + 1 + 60 + 78 + 1);
    expect(lines[0]!.message).toBe("[CREATING] Revision created");
    expect(lines.at(-1)!.message).toBe("[INTERRUPTED] Interrupted by a user");
    // The batches share timestamps: the order must not rest on timestamps alone.
    expect(new Set(lines.map((l) => l.timestamp.getTime())).size).toBeLessThan(lines.length / 10);
  });

  it("reads back whole in both orders, in (timestamp, id) order, with ids and ISO timestamps", async () => {
    const asc = await read(t, ws.apiKey, buildLogsPath(done), { order: "asc", limit: 1000 });
    expect(asc.logs.map((l) => l.id)).toEqual(expected);
    expect(asc.next_offset).toBeNull();
    const desc = await read(t, ws.apiKey, buildLogsPath(done), { order: "desc", limit: 1000 });
    expect(desc.logs.map((l) => l.id)).toEqual([...expected].reverse());
    expect(desc.next_offset).toBeNull();
    expect(asc.logs[1]).toEqual({ id: expected[1], timestamp: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/), level: "INFO", message: "batch of 60, line 0" });
  });

  it("pages to the end with any page size, in both orders, losing and repeating no line", async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 70 }), fc.constantFrom("asc", "desc"), async (limit, order) => {
        const { lines, pages } = await readAll(t, ws.apiKey, buildLogsPath(done), { order, limit });
        expect(lines.map((l) => l.id)).toEqual(order === "asc" ? expected : [...expected].reverse());
        expect(pages).toBe(Math.ceil(expected.length / limit));
      }),
      { numRuns: 12 },
    );
  });

  it("pages a page size that cuts through a batch of one timestamp, from either end", async () => {
    for (const order of ["asc", "desc"]) {
      const first = await read(t, ws.apiKey, buildLogsPath(done), { order, limit: 30 });
      const second = await read(t, ws.apiKey, buildLogsPath(done), { order, limit: 30, offset: first.next_offset });
      expect(first.logs[29]!.timestamp === second.logs[0]!.timestamp || order === "desc").toBe(true);
      const ids = [...first.logs, ...second.logs].map((l) => l.id);
      expect(ids).toEqual((order === "asc" ? expected : [...expected].reverse()).slice(0, 60));
    }
  });

  it("answers an empty body with the newest 100 lines, newest first (order desc, limit 100)", async () => {
    const res = await t.request("POST", buildLogsPath(done), { key: ws.apiKey });
    expect(res.status).toBe(200);
    expect(res.body.logs.map((l: { id: string }) => l.id)).toEqual([...expected].reverse().slice(0, 100));
    expect(res.body.next_offset).toEqual(expect.any(String));
  });
});

describe("a revision still in progress", () => {
  it("keeps next_offset on the last line in asc order, so that polling with it gets each new line once", async () => {
    const live = await newDeployment(t, ws.apiKey);
    const first = await read(t, ws.apiKey, buildLogsPath(live), { order: "asc", limit: 50 });
    expect(first.logs.map((l) => l.message)).toEqual(["[CREATING] Revision created"]);
    expect(first.next_offset).toEqual(expect.any(String));

    const idle = await read(t, ws.apiKey, buildLogsPath(live), { order: "asc", limit: 50, offset: first.next_offset });
    expect(idle).toEqual({ logs: [], next_offset: first.next_offset });

    await write(t, live, Array.from({ length: 70 }, (_, i) => ({ message: `step ${i}` })));
    const full = await read(t, ws.apiKey, buildLogsPath(live), { order: "asc", limit: 50, offset: idle.next_offset });
    expect(full.logs.map((l) => l.message)).toEqual(Array.from({ length: 50 }, (_, i) => `step ${i}`));
    const rest = await read(t, ws.apiKey, buildLogsPath(live), { order: "asc", limit: 50, offset: full.next_offset });
    expect(rest.logs.map((l) => l.message)).toEqual(Array.from({ length: 20 }, (_, i) => `step ${i + 50}`));
    expect(rest.next_offset).toEqual(expect.any(String));

    // In desc order the end is the oldest line, which does not move: null there.
    const desc = await read(t, ws.apiKey, buildLogsPath(live), { order: "desc", limit: 100 });
    expect(desc.logs).toHaveLength(71);
    expect(desc.next_offset).toBeNull();
  });

  it("writes no line once the revision has ended: its final status line stays the last", async () => {
    const live = await newDeployment(t, ws.apiKey);
    const path = `/v2/deployments/${live.deploymentId}/revisions/${live.revisionId}/interrupt`;
    expect((await t.request("POST", path, { key: ws.apiKey })).status).toBe(200);
    expect(await write(t, live, [{ message: "too late" }])).toBe(0);
    const lines = await stored(t, live.revisionId);
    expect(lines.map((l) => l.message)).toEqual(["[CREATING] Revision created", "[INTERRUPTED] Interrupted by a user"]);
  });
});

describe("the deploy logs of every revision of a deployment", () => {
  it("interleaves the revisions' deploy lines in order, and ends once every revision has", async () => {
    const d = await newDeployment(t, ws.apiKey, { source: "external_container", source_config: { listener_id: await listener() } });
    await write(t, d, [{ kind: "deploy", message: "first revision, line 1" }]);
    const second = await t.request("POST", `/v2/deployments/${d.deploymentId}/revisions`, { key: ws.apiKey, body: { source_revision_config: { image_uri: "r.example/a:2" } } });
    expect(second.status, second.text).toBe(201);
    const b: typeof d = { deploymentId: d.deploymentId, revisionId: second.body.id };
    await write(t, b, [{ kind: "deploy", message: "second revision, line 1" }]);
    const path = `/v1/projects/${d.deploymentId}/deploy_logs`;
    const all = await readAll(t, ws.apiKey, path, { order: "asc", limit: 2 });
    // The first revision was SKIPPED when the second was created: its line comes before the second's.
    expect(all.lines.map((l) => l.message)).toEqual([
      "[CREATING] Revision created",
      "first revision, line 1",
      `[SKIPPED] Skipped: revision ${b.revisionId}, created after it, supersedes it`,
      "[CREATING] Revision created",
      "second revision, line 1",
    ]);
    // The second revision is unfinished: asc stays open.
    const tail = await read(t, ws.apiKey, path, { order: "asc", limit: 10 });
    expect(tail.next_offset).toEqual(expect.any(String));
    expect((await t.request("POST", `/v2/deployments/${b.deploymentId}/revisions/${b.revisionId}/interrupt`, { key: ws.apiKey })).status).toBe(200);
    const closed = await read(t, ws.apiKey, path, { order: "asc", limit: 10 });
    expect(closed.logs.at(-1)!.message).toBe("[INTERRUPTED] Interrupted by a user");
    expect(closed.next_offset).toBeNull();
  });
});

const listener = () => createListener(t, ws.apiKey);

describe("an open log with nothing to read yet", () => {
  // null says there is nothing more to read: a client stopping on it would stop before the first line.
  it("answers asc with a next_offset from its start, which reads every line once they come", async () => {
    const d = await newDeployment(t, ws.apiKey);
    const deployLogs = `/v1/projects/${d.deploymentId}/deploy_logs`;
    const empty = await read(t, ws.apiKey, deployLogs, { order: "asc", limit: 10 });
    expect(empty.logs).toEqual([]);
    expect(empty.next_offset).toEqual(expect.any(String));
    // The same for a filter nothing passes yet.
    const filtered = await read(t, ws.apiKey, buildLogsPath(d), { order: "asc", limit: 10, level: "ERROR" });
    expect(filtered).toEqual({ logs: [], next_offset: expect.any(String) });

    expect(await write(t, d, [{ kind: "deploy", message: "deploy line 1" }, { kind: "deploy", message: "deploy line 2" }])).toBe(2);
    const next = await read(t, ws.apiKey, deployLogs, { order: "asc", limit: 10, offset: empty.next_offset });
    expect(next.logs.map((l) => l.message)).toEqual(["deploy line 1", "deploy line 2"]);
    expect(await write(t, d, [{ kind: "build", level: "ERROR", message: "it broke" }])).toBe(1);
    const errors = await read(t, ws.apiKey, buildLogsPath(d), { order: "asc", limit: 10, level: "ERROR", offset: filtered.next_offset });
    expect(errors.logs.map((l) => l.message)).toEqual(["it broke"]);
  });
});

describe("log reads and Idempotency-Key", () => {
  it("are reads: a retry with the same key reads the log as it is now, and nothing is stored for the key", async () => {
    const live = await newDeployment(t, ws.apiKey);
    const path = buildLogsPath(live);
    const headers = { "idempotency-key": "log-read-retry" };
    const first = await t.request("POST", path, { key: ws.apiKey, body: { order: "asc" }, headers });
    expect(first.status).toBe(200);
    expect(await write(t, live, [{ message: "written after the first read" }])).toBe(1);
    const retry = await t.request("POST", path, { key: ws.apiKey, body: { order: "asc" }, headers });
    expect(retry.status).toBe(200);
    expect(retry.headers.get("idempotent-replayed")).toBeNull();
    expect(retry.body.logs.map((l: { message: string }) => l.message)).toEqual([...first.body.logs.map((l: { message: string }) => l.message), "written after the first read"]);
    expect(await t.app.db.prisma.idempotencyKey.count({ where: { key: "log-read-retry" } })).toBe(0);
  });
});
