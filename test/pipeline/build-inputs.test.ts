import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { uploadSource } from "../support/uploads.js";
import { waitFor } from "../support/wait.js";

/**
 * The build step for real: a revision with nothing to build waits to be superseded (or fails), and
 * an uploaded tarball is opened and checked, every failure naming the file (no registry here: the
 * image itself is checked in test/e2e/deploy-command.test.ts).
 */

let t: TestApp;
let ws: NewWorkspace;

beforeAll(async () => {
  t = await startTestApp();
  ws = await t.workspace();
});
afterAll(() => t.close());

const call = (method: string, path: string, body?: unknown) => t.request(method, path, { key: ws.apiKey, body });
/** A revision as REST answers it (the fields these tests read). */
interface RevisionBody {
  id: string;
  status: string;
  status_message: string;
  source_revision_config: Record<string, string | null>;
}

const revision = (id: string, rid: string): Promise<RevisionBody> => call("GET", `/v2/deployments/${id}/revisions/${rid}`).then((r) => r.body);
const finished = (r: RevisionBody) => ["DEPLOYED", "BUILD_FAILED", "DEPLOY_FAILED", "CREATE_FAILED", "SKIPPED", "INTERRUPTED"].includes(r.status);

async function create(source: string, sourceRevisionConfig: object = {}) {
  const res = await call("POST", "/v2/deployments", { name: `b-${randomUUID().slice(0, 8)}`, source, source_config: { deployment_type: "dev" }, source_revision_config: sourceRevisionConfig });
  expect(res.status, res.text).toBe(201);
  return res.body as { id: string; latest_revision_id: string };
}

async function buildFrom(files: Record<string, string> | Buffer, configPath = "langgraph.json") {
  const d = await create("internal_source");
  const path = await uploadSource(t, ws.apiKey, d.id, files);
  const patched = await call("PATCH", `/v2/deployments/${d.id}`, { revision_source: "internal_source", source_revision_config: { source_tarball_path: path, framework_config_path: configPath } });
  expect(patched.status, patched.text).toBe(200);
  return { path, deploymentId: d.id, done: await waitFor(() => revision(d.id, patched.body.latest_revision_id), finished) };
}

describe("a revision with nothing to build", () => {
  it("waits in AWAITING_BUILD, saying for what, until the tool's PATCH supersedes it", async () => {
    const d = await create("internal_container");
    const waiting = await waitFor(() => revision(d.id, d.latest_revision_id), (r) => r.status_message.startsWith("Waiting for an image"));
    expect(waiting.status).toBe("AWAITING_BUILD");
    expect(waiting.status_message).toContain("POST /v2/deployments/{deployment_id}/push-token");
    const patched = await call("PATCH", `/v2/deployments/${d.id}`, { revision_source: "internal_container", source_revision_config: { image_uri: "registry.example/a:1" } });
    expect((await revision(d.id, d.latest_revision_id)).status).toBe("SKIPPED");
    expect((await waitFor(() => revision(d.id, patched.body.latest_revision_id), finished)).status).toBe("DEPLOYED");
  });

  it("is accepted for internal_source without framework_config_path (201), and waits for source", async () => {
    const d = await create("internal_source");
    const waiting = await waitFor(() => revision(d.id, d.latest_revision_id), (r) => r.status_message.startsWith("Waiting for source"));
    expect(waiting.status).toBe("AWAITING_BUILD");
    expect(waiting.source_revision_config).toMatchObject({ framework_config_path: null, source_tarball_path: null });
  });

  it("fails with a clear status_message when nothing comes in time", async () => {
    const impatient = await startTestApp({}, undefined, { pipeline: { awaitSourceMs: 200 } });
    try {
      const { apiKey } = await impatient.workspace();
      const d = (await impatient.request("POST", "/v2/deployments", { key: apiKey, body: { name: "never", source: "internal_container", source_revision_config: {} } })).body;
      const done = await waitFor((): Promise<RevisionBody> => impatient.request("GET", `/v2/deployments/${d.id}/revisions/${d.latest_revision_id}`, { key: apiKey }).then((r) => r.body), finished);
      expect(done.status).toBe("BUILD_FAILED");
      expect(done.status_message).toMatch(/^Nothing to build: this revision was created without an image, and none came within 200 ms\. To deploy, push one/);
      expect((await impatient.request("GET", `/v2/deployments/${d.id}`, { key: apiKey })).body.status).toBe("AWAITING_DATABASE");
    } finally {
      await impatient.close();
    }
  });
});

describe("the build step of an uploaded tarball", () => {
  it("records its files, size and graphs, and deploys", async () => {
    const { path, deploymentId, done } = await buildFrom({ "./langgraph.json": '{"graphs": {"a": "./a.py:g", "b": {"path": "./b.py:g"}}}', "./a.py": "g = 1\n", "./b.py": "g = 2\n" }, "./langgraph.json");
    expect(done.status).toBe("DEPLOYED");
    const [row] = await t.app.db.sql.query<{ build_report: any }>(`SELECT build_report FROM revisions WHERE id = $1`, [done.id]);
    expect(row!.build_report).toEqual({
      source: {
        object_path: path, size_bytes: expect.any(Number), sha256: expect.stringMatching(/^[0-9a-f]{64}$/), file_count: 3, files: ["langgraph.json", "a.py", "b.py"],
        unpacked_bytes: expect.any(Number), framework_config_path: "./langgraph.json", graphs: { a: "./a.py:g", b: "./b.py:g" },
      },
    });
    // What it found is in the build log, as the command-line tool prints it while it waits.
    const logs = await call("POST", `/v1/projects/${deploymentId}/revisions/${done.id}/build_logs`, { order: "asc", limit: 100 });
    expect(logs.status, logs.text).toBe(200);
    const lines = (logs.body.logs as { message: string }[]).map((l) => l.message);
    expect(lines).toEqual(
      expect.arrayContaining([
        expect.stringMatching(new RegExp(`^Opening the uploaded source ${path} \\(\\d+ bytes, sha256 [0-9a-f]{64}\\)$`)),
        expect.stringMatching(/^3 files, \d+ bytes unpacked$/),
        "  langgraph.json",
        "  a.py",
        "./langgraph.json names 2 graphs: a (./a.py:g), b (./b.py:g)",
      ]),
    );
  });

  for (const [what, files, says] of [
    ["a configuration that is not JSON", { "langgraph.json": "{graphs:" }, "langgraph.json does not parse as JSON"],
    ["a configuration with no graphs", { "langgraph.json": '{"graphs": {}}' }, "langgraph.json names no graphs"],
    ["a graph with no place", { "langgraph.json": '{"graphs": {"a": 1}}' }, "langgraph.json names graph 'a' without saying where it is"],
    ["a configuration that is elsewhere", { "src/langgraph.json": '{"graphs": {"a": "./a.py:g"}}' }, "langgraph.json is not in it (1 files)"],
  ] as const) {
    it(`fails with BUILD_FAILED naming the file: ${what}`, async () => {
      const { path, deploymentId, done } = await buildFrom(files);
      expect(done.status).toBe("BUILD_FAILED");
      expect(done.status_message.startsWith(`Build failed: the tarball ${path}: ${says}`), done.status_message).toBe(true);
      // The tool shows the last lines of a failed build: the newest names the reason.
      const logs = await call("POST", `/v1/projects/${deploymentId}/revisions/${done.id}/build_logs`, { order: "desc", limit: 30 });
      expect(logs.body.logs[0]).toMatchObject({ level: "ERROR", message: `[BUILD_FAILED] ${done.status_message}` });
    });
  }

  it("fails on a corrupt tarball", async () => {
    const { done } = await buildFrom(Buffer.concat([Buffer.from([0x1f, 0x8b]), Buffer.from("garbage that is not deflate")]));
    expect(done.status).toBe("BUILD_FAILED");
    expect(done.status_message).toMatch(/is not a valid gzip tarball/);
  });

  it("fails when the path is not an upload of this deployment (another's, or none at all)", async () => {
    const other = await create("internal_source");
    const theirs = await uploadSource(t, ws.apiKey, other.id, { "langgraph.json": '{"graphs": {"a": "./a.py:g"}}' });
    for (const path of [theirs, "uploads/my-agent.tgz"]) {
      const d = await create("internal_source");
      const patched = await call("PATCH", `/v2/deployments/${d.id}`, { revision_source: "internal_source", source_revision_config: { source_tarball_path: path, framework_config_path: "langgraph.json" } });
      const done = await waitFor(() => revision(d.id, patched.body.latest_revision_id), finished);
      expect(done.status).toBe("BUILD_FAILED");
      expect(done.status_message).toBe(
        `Build failed: source_tarball_path '${path}' cannot be read: no upload of this deployment has that path (POST /v2/deployments/{deployment_id}/upload-url gives one).`,
      );
    }
  });
});
