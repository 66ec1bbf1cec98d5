import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { uploadSource } from "../support/uploads.js";
import { buildLogsPath, read, type RestLine, type Target } from "./support.js";
import { waitFor } from "../support/wait.js";
import { listenerBody } from "../support/fixtures.js";

/** What the pipeline (the simulator runtime and every status change) writes, read as the tool reads it. */

let t: TestApp;
let ws: NewWorkspace;

beforeAll(async () => {
  t = await startTestApp({ PIPELINE_STEP_MS: "10", RATE_LIMIT_PER_MINUTE: "0" });
  ws = await t.workspace();
});
afterAll(() => t.close());

async function runToEnd(body: Record<string, unknown>): Promise<Target & { status: string; statusMessage: string }> {
  const res = await t.request("POST", "/v2/deployments", { key: ws.apiKey, body: { name: `p-${Math.random().toString(36).slice(2, 9)}`, ...body } });
  expect(res.status, res.text).toBe(201);
  return finished({ deploymentId: res.body.id, revisionId: res.body.latest_revision_id });
}

/** Waits for the revision to end; its final status and message. */
async function finished(x: Target): Promise<Target & { status: string; statusMessage: string }> {
  const done = await waitFor(
    () => t.request("GET", `/v2/deployments/${x.deploymentId}/revisions/${x.revisionId}`, { key: ws.apiKey }),
    (r) => /DEPLOYED|FAILED/.test(r.body.status),
  );
  return { ...x, status: done.body.status, statusMessage: done.body.status_message };
}

const statusLines = (lines: RestLine[]) => lines.filter((l) => l.message.startsWith("[")).map((l) => l.message.slice(1, l.message.indexOf("]")));

describe("a managed revision built and deployed", () => {
  it("writes what each step does to the build log, then the deploy log, each status line before its step's lines", async () => {
    // As the command-line tool deploys from source: create, upload, PATCH. The build step opens it for real.
    const created = await t.request("POST", "/v2/deployments", { key: ws.apiKey, body: { name: `p-${Math.random().toString(36).slice(2, 9)}`, source: "internal_source" } });
    expect(created.status, created.text).toBe(201);
    const path = await uploadSource(t, ws.apiKey, created.body.id, { "agent.json": '{"graphs": {"agent": "./agent.py:graph"}}', "agent.py": "graph = None\n" });
    const patched = await t.request("PATCH", `/v2/deployments/${created.body.id}`, {
      key: ws.apiKey,
      body: {
        revision_source: "internal_source",
        source_revision_config: { source_tarball_path: path, framework_config_path: "agent.json" },
        source_config: { install_command: "uv sync", resource_spec: { min_scale: 2, max_scale: 4 } },
        secrets: [{ name: "OPENAI_API_KEY", value: t.guard.secret() }],
      },
    });
    expect(patched.status, patched.text).toBe(200);
    const x = await finished({ deploymentId: created.body.id, revisionId: patched.body.latest_revision_id });
    expect(x.status).toBe("DEPLOYED");
    const build = (await read(t, ws.apiKey, buildLogsPath(x), { order: "asc", limit: 1000 })).logs;
    const deploy = (await read(t, ws.apiKey, buildLogsPath(x, "deploy"), { order: "asc", limit: 1000 })).logs;
    expect(statusLines(build)).toEqual(["CREATING", "QUEUED", "AWAITING_BUILD", "BUILDING"]);
    expect(statusLines(deploy)).toEqual(["AWAITING_DEPLOY", "DEPLOYING", "DEPLOYED"]);
    const text = build.map((l) => l.message).join("\n");
    expect(text).toContain(`Source: uploaded archive ${path}`);
    expect(text).toContain("agent.json names 1 graph: agent (./agent.py:graph)");
    expect(text).toContain("Secrets: 1 (OPENAI_API_KEY)");
    expect(text).toContain("RUN uv sync");
    expect(text).toMatch(/Built image sha256:[0-9a-f]{64}/);
    // The step that leaves BUILDING writes after the BUILDING line, before the deploy log starts.
    const building = build.findIndex((l) => l.message.startsWith("[BUILDING]"));
    expect(build.slice(building + 1).some((l) => l.message.includes("Built image"))).toBe(true);
    expect(deploy.map((l) => l.message)).toContainEqual(expect.stringContaining("2 to 4 replicas"));
    expect(deploy.at(-1)!.message).toBe("[DEPLOYED] Deployed");
    // Nothing went wrong: no warning or error (the file list is at DEBUG).
    expect([...build, ...deploy].every((l) => l.level === "INFO" || l.level === "DEBUG")).toBe(true);
    expect(build.filter((l) => l.level === "DEBUG").map((l) => l.message)).toEqual(["  agent.json", "  agent.py"]);
    // Nothing more follows: asc paging ends.
    expect((await read(t, ws.apiKey, buildLogsPath(x, "deploy"), { order: "asc", limit: 1000 })).next_offset).toBeNull();
  });

  it("writes everything of a revision with nothing to build to its deploy log", async () => {
    const listener = await t.request("POST", "/v2/listeners", { key: ws.apiKey, body: listenerBody({ compute_id: "self-hosted" }) });
    const x = await runToEnd({ source: "external_container", source_config: { listener_id: listener.body.id }, source_revision_config: { image_uri: "r.example/agent:7" } });
    expect(x.status).toBe("DEPLOYED");
    expect((await read(t, ws.apiKey, buildLogsPath(x), { order: "asc", limit: 100 })).logs).toEqual([]);
    const deploy = (await read(t, ws.apiKey, buildLogsPath(x, "deploy"), { order: "asc", limit: 100 })).logs;
    expect(statusLines(deploy)).toEqual(["CREATING", "QUEUED", "AWAITING_DEPLOY", "DEPLOYING", "DEPLOYED"]);
    expect(deploy.map((l) => l.message)).toContain("Image: r.example/agent:7");
  });
});

describe("a BUILD_FAILED revision", () => {
  it("names the reason in its last lines, read as the tool reads them after a failure (desc, limit 30)", async () => {
    const x = await runToEnd({
      source: "internal_container",
      source_revision_config: { image_uri: "r.example/a:1" },
      source_config: { resource_spec: { labels: { "simulate/failure": "build" } } },
    });
    expect(x.status).toBe("BUILD_FAILED");
    const page = await read(t, ws.apiKey, buildLogsPath(x), { order: "desc", limit: 30 });
    const printed = [...page.logs].reverse();
    const last = printed.at(-1)!;
    expect(last).toMatchObject({ level: "ERROR", message: `[BUILD_FAILED] ${x.statusMessage}` });
    expect(last.message).toContain('"simulate/failure": "build"');
    expect(printed.at(-2)).toMatchObject({ level: "ERROR", message: expect.stringContaining("exited with code 1") });
    // The deploy log never started.
    expect((await read(t, ws.apiKey, buildLogsPath(x, "deploy"), { order: "desc", limit: 30 })).logs).toEqual([]);
  });
});
