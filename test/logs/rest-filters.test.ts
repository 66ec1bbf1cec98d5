import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { buildLogsPath, newDeployment, read, readAll, stored, type Target, write } from "./support.js";

let t: TestApp;
let ws: NewWorkspace;
let x: Target;
/** The stored timestamps of the three batches written below. */
let times: Date[];

const messages = (lines: { message: string }[]) => lines.map((l) => l.message);

beforeAll(async () => {
  t = await startTestApp({ PIPELINE_WORKER: "off", RATE_LIMIT_PER_MINUTE: "0" });
  ws = await t.workspace();
  x = await newDeployment(t, ws.apiKey);
  await write(t, x, [
    { level: "DEBUG", message: "resolving deps" },
    { level: "INFO", message: "Downloading 100% done" },
    { level: "INFO", message: "Downloading 100 percent done" },
  ]);
  await new Promise((r) => setTimeout(r, 5)); // distinct timestamps for the three batches
  await write(t, x, [
    { level: "WARNING", message: "No lockfile: versions are not pinned" },
    { level: "INFO", message: "path C:\\build\\out_dir" },
    { level: "INFO", message: "pathCXbuildXoutXdir" },
  ]);
  await new Promise((r) => setTimeout(r, 5));
  await write(t, x, [
    { level: "ERROR", message: "Step 3/4 exited with code 1" },
    { level: "CRITICAL", message: "Builder lost" },
    { kind: "deploy", level: "ERROR", message: "a deploy line" },
  ]);
  const lines = await stored(t, x.revisionId);
  times = [...new Set(lines.slice(1).map((l) => l.timestamp.getTime()))].map((ms) => new Date(ms));
  expect(times).toHaveLength(3);
});
afterAll(() => t.close());

const asc = (body: Record<string, unknown>) => readAll(t, ws.apiKey, buildLogsPath(x), { order: "asc", limit: 3, ...body }).then((r) => messages(r.lines));

describe("filters", () => {
  it("level keeps that level and every more severe one, case-insensitively", async () => {
    expect(await asc({ level: "ERROR" })).toEqual(["Step 3/4 exited with code 1", "Builder lost"]);
    expect(await asc({ level: "warning" })).toEqual(["No lockfile: versions are not pinned", "Step 3/4 exited with code 1", "Builder lost"]);
    expect((await asc({ level: "DEBUG" })).length).toBe(9);
    expect((await asc({ level: null })).length).toBe(9);
  });

  it("query is a case-insensitive substring whose %, _ and \\ are literal", async () => {
    expect(await asc({ query: "100%" })).toEqual(["Downloading 100% done"]);
    expect(await asc({ query: "DOWNLOADING" })).toEqual(["Downloading 100% done", "Downloading 100 percent done"]);
    expect(await asc({ query: "out_dir" })).toEqual(["path C:\\build\\out_dir"]);
    expect(await asc({ query: "C:\\build" })).toEqual(["path C:\\build\\out_dir"]);
    expect(await asc({ query: "%" })).toEqual(["Downloading 100% done"]);
    expect(await asc({ query: "_" })).toEqual(["path C:\\build\\out_dir"]);
    expect((await asc({ query: "" })).length).toBe(9);
  });

  it("start_time and end_time are inclusive, as ISO 8601 with any offset or precision, or epoch milliseconds", async () => {
    const [first, second, third] = times as [Date, Date, Date];
    const secondBatch = ["No lockfile: versions are not pinned", "path C:\\build\\out_dir", "pathCXbuildXoutXdir"];
    expect(await asc({ start_time: second.toISOString(), end_time: second.toISOString() })).toEqual(secondBatch);
    expect(await asc({ start_time: second.getTime(), end_time: second.getTime() })).toEqual(secondBatch);
    // Python's isoformat(): microseconds and +00:00; and another offset.
    const micro = second.toISOString().replace("Z", "000+00:00");
    expect(await asc({ start_time: micro, end_time: micro })).toEqual(secondBatch);
    const plusTwo = new Date(second.getTime() + 2 * 3_600_000).toISOString().replace("Z", "+02:00");
    expect(await asc({ start_time: plusTwo, end_time: plusTwo })).toEqual(secondBatch);
    expect(await asc({ start_time: third.toISOString() })).toEqual(["Step 3/4 exited with code 1", "Builder lost"]);
    expect(await asc({ start_time: first.toISOString(), end_time: new Date(second.getTime() - 1).toISOString(), level: "INFO" })).toEqual([
      "Downloading 100% done",
      "Downloading 100 percent done",
    ]);
  });

  it("combine, and page together: filters in desc order with a small page", async () => {
    const { lines } = await readAll(t, ws.apiKey, buildLogsPath(x), { order: "desc", limit: 1, level: "INFO", query: "o", start_time: times[0]!.toISOString() });
    expect(messages(lines)).toEqual([
      "Builder lost",
      "Step 3/4 exited with code 1",
      "pathCXbuildXoutXdir",
      "path C:\\build\\out_dir",
      "No lockfile: versions are not pinned",
      "Downloading 100 percent done",
      "Downloading 100% done",
    ]);
  });

  it("keep the build and deploy logs apart", async () => {
    const deploy = await read(t, ws.apiKey, buildLogsPath(x, "deploy"), { order: "asc", limit: 10 });
    expect(messages(deploy.logs)).toEqual(["a deploy line"]);
  });
});

describe("bad requests", () => {
  const refused = async (body: unknown, loc: (string | number)[], type: string) => {
    const res = await t.request("POST", buildLogsPath(x), { key: ws.apiKey, body });
    expect(res.status, JSON.stringify(body)).toBe(422);
    expect(res.body.detail, JSON.stringify(body)).toEqual(expect.arrayContaining([expect.objectContaining({ loc, type })]));
  };

  it("answer 422 in FastAPI's shape, naming the field", async () => {
    await refused({ order: "up" }, ["body", "order"], "enum");
    await refused({ limit: 0 }, ["body", "limit"], "greater_than_equal");
    await refused({ limit: 1001 }, ["body", "limit"], "less_than_equal");
    await refused({ limit: 2.5 }, ["body", "limit"], "int_parsing");
    await refused({ level: "LOUD" }, ["body", "level"], "enum");
    await refused({ query: "x".repeat(1001) }, ["body", "query"], "string_too_long");
    await refused({ query: "a\u0000b" }, ["body", "query"], "value_error");
    await refused({ start_time: "yesterday" }, ["body", "start_time"], "datetime_parsing");
    await refused({ start_time: "2026-02-30T00:00:00Z" }, ["body", "start_time"], "datetime_parsing");
    // Before year 1, which PostgreSQL cannot compare with: refused, not a 500.
    await refused({ start_time: -62135596800001 }, ["body", "start_time"], "datetime_parsing");
    await refused({ end_time: "0001-01-01T00:00:00+23:59" }, ["body", "end_time"], "datetime_parsing");
    await refused({ start_time: "2026-03-02T00:00:00Z", end_time: "2026-03-01T00:00:00Z" }, ["body", "end_time"], "value_error");
    await refused([1], ["body"], "dict_type");
  });

  it("refuse an offset that is not one this server gave for the same read", async () => {
    const first = await read(t, ws.apiKey, buildLogsPath(x), { order: "asc", limit: 2 });
    await refused({ order: "asc", limit: 2, offset: "bm90IGEgY3Vyc29y.AAAA" }, ["body", "offset"], "value_error");
    await refused({ order: "asc", limit: 2, offset: `${first.next_offset}x` }, ["body", "offset"], "value_error");
    // Another order, another filter, the other log: the offset was for something else.
    await refused({ order: "desc", limit: 2, offset: first.next_offset }, ["body", "offset"], "value_error");
    await refused({ order: "asc", limit: 2, offset: first.next_offset, query: "a" }, ["body", "offset"], "value_error");
    const deploy = await t.request("POST", buildLogsPath(x, "deploy"), { key: ws.apiKey, body: { order: "asc", limit: 2, offset: first.next_offset } });
    expect(deploy.status).toBe(422);
    // Another page size is the same read.
    expect((await read(t, ws.apiKey, buildLogsPath(x), { order: "asc", limit: 5, offset: first.next_offset })).logs[0]!.message).toBe("Downloading 100% done");
  });

  it("answer malformed JSON with 422 and ids that are not UUIDs with 422", async () => {
    const res = await t.request("POST", buildLogsPath(x), { key: ws.apiKey, rawBody: "{", headers: { "content-type": "application/json" } });
    expect(res.status).toBe(422);
    expect(res.body.detail[0]).toMatchObject({ loc: ["body", 1], type: "json_invalid" });
    const bad = await t.request("POST", `/v1/projects/not-a-uuid/revisions/${x.revisionId}/build_logs`, { key: ws.apiKey, body: {} });
    expect(bad.status).toBe(422);
    expect(bad.body.detail[0]).toMatchObject({ loc: ["path", "deployment_id"], type: "uuid_parsing" });
  });
});

describe("unknown deployments and revisions", () => {
  const nowhere = "00000000-0000-4000-8000-00000000beef";

  it("answer 404 {detail} as the other paths do", async () => {
    const other = await newDeployment(t, ws.apiKey);
    const cases: [string, string][] = [
      [`/v1/projects/${nowhere}/revisions/${x.revisionId}/build_logs`, `Deployment ID ${nowhere} not found.`],
      [`/v1/projects/${x.deploymentId}/revisions/${nowhere}/build_logs`, `Revision ID ${nowhere} not found.`],
      [`/v1/projects/${x.deploymentId}/revisions/${nowhere}/deploy_logs`, `Revision ID ${nowhere} not found.`],
      // A revision of another deployment is not this deployment's.
      [`/v1/projects/${other.deploymentId}/revisions/${x.revisionId}/build_logs`, `Revision ID ${x.revisionId} not found.`],
      [`/v1/projects/${nowhere}/deploy_logs`, `Deployment ID ${nowhere} not found.`],
    ];
    for (const [path, detail] of cases) {
      const res = await t.request("POST", path, { key: ws.apiKey, body: { order: "asc", limit: 10 } });
      expect(res.status, path).toBe(404);
      expect(res.body, path).toEqual({ detail });
    }
  });

  it("answer 401 without credentials", async () => {
    expect((await t.request("POST", buildLogsPath(x), { body: {} })).status).toBe(401);
  });
});
