import { randomBytes, randomUUID } from "node:crypto";
import { gzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { BlobStore } from "../../src/core/blobs/types.js";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { createTestDatabase, startTestApp, type TestApp } from "../support/app.js";
import { tarOf } from "../support/registry.js";
import { uploadSource } from "../support/uploads.js";
import { waitFor } from "../support/wait.js";
import { startPipelineApp } from "./support.js";

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

async function create(source: string, sourceRevisionConfig: object = {}, extra: object = {}) {
  const res = await call("POST", "/v2/deployments", { name: `b-${randomUUID().slice(0, 8)}`, source, source_config: { deployment_type: "dev" }, source_revision_config: sourceRevisionConfig, ...extra });
  expect(res.status, res.text).toBe(201);
  return res.body as { id: string; latest_revision_id: string };
}

async function buildFrom(files: Record<string, string> | Buffer, configPath = "langgraph.json", extra: object = {}) {
  const d = await create("internal_source", {}, extra);
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

  it("keeps what it found with the deployment's secret values masked, as its build log has them", async () => {
    const secret = t.guard.secret(`s3cr3t-${randomUUID().slice(0, 8)}`);
    const files = { "langgraph.json": `{"graphs": {"g${secret}": "./${secret}.py:graph"}}`, [`${secret}.py`]: "graph = None\n" };
    const { done } = await buildFrom(files, "langgraph.json", { secrets: [{ name: "TOKEN", value: secret }] });
    expect(done.status).toBe("DEPLOYED");
    const [row] = await t.app.db.sql.query<{ build_report: { source: { files: string[]; graphs: Record<string, string> } } }>(`SELECT build_report FROM revisions WHERE id = $1`, [done.id]);
    expect(row!.build_report.source.files).toEqual(["langgraph.json", "********.py"]);
    expect(row!.build_report.source.graphs).toEqual({ "g********": "./********.py:graph" });
  });

  for (const [what, files, says] of [
    ["a configuration that is not JSON", { "langgraph.json": "{graphs:" }, "langgraph.json does not parse as JSON"],
    ["a configuration with no graphs", { "langgraph.json": '{"graphs": {}}' }, "langgraph.json names no graphs"],
    ["a graph with no place", { "langgraph.json": '{"graphs": {"a": 1}}' }, "langgraph.json names graph 'a' without saying where it is"],
    ["a configuration that is elsewhere", { "src/langgraph.json": '{"graphs": {"a": "./a.py:g"}}' }, "langgraph.json is not in it (1 files)"],
    // Text PostgreSQL cannot store (jsonb refuses \u0000): the build fails, it is not retried for ever.
    ["a graph name with a NUL", { "langgraph.json": '{"graphs": {"agent\\u0000": "./agent.py:graph"}}', "agent.py": "graph = None\n" }, "langgraph.json names a graph whose name is not valid text: it holds a NUL (\\u0000) character"],
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

/**
 * Reading an upload can fail midway (PostgreSQL keeps it as 1 MiB chunk rows, one query each; a
 * connection may drop between two). Makes the next read of a chunk after the first fail once with
 * `fault`, or (with `hold`) wait until the test lets it go: on the database store by its queries, on
 * the folder store by its stream.
 */
function faultyChunks(app: TestApp["app"], options: { fault?: Error; hold?: boolean }) {
  const blobs = (app.core.uploads as unknown as { blobs: BlobStore & { prisma?: object } }).blobs;
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  const state = { failed: 0, held: 0, open };
  /** What happens to a chunk read after the first: once, a fault or a wait. */
  const beforeLaterChunk = async () => {
    if (options.fault && state.failed === 0) {
      state.failed++;
      throw options.fault;
    }
    if (options.hold && state.held === 0) {
      state.held++;
      await gate;
    }
  };
  if (blobs.kind === "database") {
    const prisma = blobs.prisma!;
    blobs.prisma = new Proxy(prisma, {
      get(target, prop, receiver) {
        const value = Reflect.get(target, prop, receiver);
        if (prop !== "sourceUploadChunk") return value;
        const chunks = value as { findUnique(args: { where: { objectPath_seq: { seq: number } } }): Promise<unknown> };
        return new Proxy(chunks, {
          get(delegate, name, r) {
            if (name !== "findUnique") return Reflect.get(delegate, name, r);
            return async (args: { where: { objectPath_seq: { seq: number } } }) => {
              if (args.where.objectPath_seq.seq >= 1) await beforeLaterChunk();
              return chunks.findUnique(args);
            };
          },
        });
      },
    });
  } else {
    const read = blobs.read.bind(blobs);
    blobs.read = async (path) => {
      const body = await read(path);
      if (!body) return body;
      return (async function* () {
        let n = 0;
        for await (const chunk of body) {
          if (n++ >= 1) await beforeLaterChunk();
          yield chunk;
        }
      })();
    };
  }
  return state;
}

describe("the build step, when reading the upload fails or stalls midway", () => {
  let app: TestApp;
  let key: string;
  const uncaught: unknown[] = [];
  const onUncaught = (err: unknown) => void uncaught.push(err);

  beforeAll(async () => {
    process.on("uncaughtException", onUncaught);
    process.on("unhandledRejection", onUncaught);
    app = await startPipelineApp({ PIPELINE_STEP_MS: "20", RATE_LIMIT_PER_MINUTE: "0" }, await createTestDatabase(), { pollMs: 10, leaseMs: 600, retryMs: 50 });
    key = (await app.workspace()).apiKey;
  });
  afterAll(async () => {
    try {
      // A stuck step would hold the app's stop (and a SIGTERM shutdown) for ever.
      await app.close();
    } finally {
      process.off("uncaughtException", onUncaught);
      process.off("unhandledRejection", onUncaught);
    }
    expect(uncaught).toEqual([]);
  });

  const get = (id: string, rid: string): Promise<RevisionBody> => app.request("GET", `/v2/deployments/${id}/revisions/${rid}`, { key }).then((r) => r.body);

  /** A deployment with an upload of more than one chunk, and the revision that builds it. */
  async function uploaded() {
    const created = await app.request("POST", "/v2/deployments", {
      key,
      body: { name: `f-${randomUUID().slice(0, 8)}`, source: "internal_source", source_config: { deployment_type: "dev" }, source_revision_config: {} },
    });
    expect(created.status, created.text).toBe(201);
    const id = created.body.id as string;
    // About 1.5 MB that does not compress: two chunk rows on PostgreSQL, many reads from a file.
    const tarball = gzipSync(await tarOf({ "langgraph.json": '{"graphs": {"agent": "./agent.py:graph"}}', "agent.py": "graph = None\n", "data.bin": randomBytes(1_500_000) }));
    const path = await uploadSource(app, key, id, tarball);
    return { id, path };
  }

  const build = async (id: string, path: string): Promise<string> => {
    const patched = await app.request("PATCH", `/v2/deployments/${id}`, {
      key,
      body: { revision_source: "internal_source", source_revision_config: { source_tarball_path: path, framework_config_path: "langgraph.json" } },
    });
    expect(patched.status, patched.text).toBe(200);
    return patched.body.latest_revision_id as string;
  };

  it("is an internal error: the step runs again and the revision deploys, with nothing uncaught", async () => {
    const { id, path } = await uploaded();
    const faults = faultyChunks(app.app, { fault: new Error("Connection terminated unexpectedly") });
    const rid = await build(id, path);
    const done = await waitFor(() => get(id, rid), finished, { what: "the revision to finish" });
    expect(faults.failed).toBe(1);
    expect(done.status).toBe("DEPLOYED");
    // The step said it stopped on an internal error, and not why (that is in the service's log).
    const logs = await app.request("POST", `/v1/projects/${id}/revisions/${rid}/build_logs`, { key, body: { order: "asc", limit: 100 } });
    expect(logs.body.logs).toEqual(expect.arrayContaining([expect.objectContaining({ level: "WARNING", message: "This step stopped on an internal error; it runs again shortly" })]));
    expect(JSON.stringify(logs.body)).not.toContain("Connection terminated");
    // DEPLOYED is visible once its transaction commits; the step ends a moment later. Nothing may stay stuck.
    await waitFor(() => app.app.worker!.busy, (n) => n === 0, { what: "the worker to end its steps" });
    expect(uncaught).toEqual([]);
  });

  it("is handed on at once when the worker stops while a read is pending; it continues once started again", async () => {
    const { id, path } = await uploaded();
    const stall = faultyChunks(app.app, { hold: true });
    const rid = await build(id, path);
    try {
      await waitFor(() => stall.held, (n) => n === 1, { what: "a pending read of the upload" });
      // The read is still pending; stopping aborts the step and gives its lease back without waiting for it.
      await app.app.worker!.stop();
      const [row] = await app.app.db.sql.query<{ status: string; lease_owner: string | null }>(`SELECT status, lease_owner FROM revisions WHERE id = $1`, [rid]);
      expect(row).toEqual({ status: "BUILDING", lease_owner: null });
      expect(app.app.worker!.busy).toBe(0);
    } finally {
      stall.open();
    }
    app.app.worker!.start();
    expect((await waitFor(() => get(id, rid), finished, { what: "the revision to finish" })).status).toBe("DEPLOYED");
    expect(uncaught).toEqual([]);
  });
});
