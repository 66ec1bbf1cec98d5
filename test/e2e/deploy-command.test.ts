import { randomUUID } from "node:crypto";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/app.js";
import { freePort } from "../../scripts/lib/processes.js";
import { makeOciImage, missingTools, PortTaken, type RegistryProcess, skopeoPush, startRegistry, tarOf } from "../support/registry.js";

/**
 * The official command-line tool's `deploy`, both paths, exactly as it drives this service
 * (COMPAT.md, The deploy command), against a real registry (docker-registry, this service its token
 * server) with a real push (skopeo), and a real gzip tarball PUT through the signed upload URL.
 */

const missing = missingTools();
// In CI the tools are installed by .ci/run: their absence is a failure there, not a skip.
const skipLocally = missing.length > 0 && process.env.CI !== "true";
if (skipLocally) console.warn(`deploy-command end-to-end tests skipped: ${missing.join(", ")} not installed (apt-get install docker-registry skopeo)`);

const TERMINAL = ["DEPLOYED", "CREATE_FAILED", "BUILD_FAILED", "DEPLOY_FAILED", "SKIPPED", "INTERRUPTED"];

let t: TestApp;
let base: string;
let registry: RegistryProcess;
let key: string;

beforeAll(async () => {
  if (skipLocally) return;
  expect(missing, "docker-registry and skopeo must be installed (.ci/run installs them)").toEqual([]);
  // The registry's port is chosen before either starts (the service is configured with the
  // registry's URL, the registry with the service's token URL and certificate): should another
  // process take the port meanwhile, both start again on another.
  for (let attempt = 1; ; attempt++) {
    const registryPort = await freePort();
    t = await startTestApp({ REGISTRY_URL: `http://127.0.0.1:${registryPort}` });
    base = await t.app.start();
    try {
      registry = await startRegistry(registryPort, `${base}/registry/token`, join(t.app.config.dataDir, "registry-token.crt"));
      break;
    } catch (err) {
      await t.close();
      if (!(err instanceof PortTaken) || attempt === 3) throw err;
    }
  }
  key = (await t.workspace()).apiKey;
}, 60_000);

afterAll(async () => {
  await registry?.stop();
  await t?.close();
});

/**
 * A request as the tool makes it: over HTTP to the running server, JSON in and out. Every answer is
 * shown to the leak guard; push tokens and upload signatures may show only in the answer that issued them.
 */
async function call(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { "x-api-key": key, ...(body !== undefined && { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  const parsed = text ? JSON.parse(text) : null;
  t.guard.record(`${method} ${path} -> ${res.status}`, text);
  if (path.endsWith("/push-token") && res.ok) t.guard.issued(parsed.token);
  // An upload URL's signature is a credential too: no log line may show it.
  if (path.endsWith("/upload-url") && res.ok) t.guard.issued(new URL(parsed.upload_url).searchParams.get("signature")!);
  return { status: res.status, body: parsed };
}

/** Steps 1-2: look the name up (exact match), create the deployment with an empty source_revision_config. */
async function findOrCreate(name: string, source: "internal_container" | "internal_source") {
  const everything = await call("GET", "/v2/deployments?name_contains=");
  expect(everything.status).toBe(200);
  const found = await call("GET", `/v2/deployments?name_contains=${name}`);
  expect(found.status).toBe(200);
  expect(found.body.resources.filter((d: { name: string }) => d.name === name)).toEqual([]);
  const created = await call("POST", "/v2/deployments", {
    name, source, source_config: { deployment_type: "dev" }, source_revision_config: {}, secrets: [{ name: "OPENAI_API_KEY", value: t.guard.secret() }],
  });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  return created.body as { id: string; latest_revision_id: string };
}

/** Step 6: the newest revision, polled to a terminal status. */
async function waitForNewest(id: string) {
  const newest = await call("GET", `/v2/deployments/${id}/revisions?limit=1`);
  expect(newest.body.resources).toHaveLength(1);
  const rid = newest.body.resources[0].id;
  const deadline = Date.now() + 60_000;
  for (;;) {
    const polled = await call("GET", `/v2/deployments/${id}/revisions/${rid}`);
    expect(polled.status).toBe(200);
    if (TERMINAL.includes(polled.body.status)) return polled.body;
    if (Date.now() > deadline) throw new Error(`revision ${rid} still ${polled.body.status}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe.skipIf(skipLocally)("deploy --image: push token, docker login and push to the real registry, PATCH, poll", () => {
  it("deploys the pushed image, and its digest is recorded", async () => {
    const name = `img-${randomUUID().slice(0, 8)}`;
    const d = await findOrCreate(name, "internal_container");
    const token = await call("POST", `/v2/deployments/${d.id}/push-token`);
    expect(token.status).toBe(200);
    expect(token.body).toEqual({ token: expect.any(String), registry_url: expect.stringMatching(/^http:\/\//), expires_at: expect.any(String) });
    const target = `${token.body.registry_url.replace(/^https?:\/\//, "")}/agent:v1`;
    const pushed = await skopeoPush(await makeOciImage(`hello ${name}`), target, token.body.token);
    expect(pushed.ok, `${pushed.output}\n${registry.logTail()}`).toBe(true);

    const patched = await call("PATCH", `/v2/deployments/${d.id}`, {
      revision_source: "internal_container", source_revision_config: { image_uri: target }, tracked_packages: ["langgraph"],
    });
    expect(patched.status).toBe(200);
    const done = await waitForNewest(d.id);
    expect(done.status, done.status_message).toBe("DEPLOYED");
    expect(done.source_revision_config.image_uri).toBe(target);
    // The first revision, made with nothing to build, was superseded, never deployed.
    const first = await call("GET", `/v2/deployments/${d.id}/revisions/${d.latest_revision_id}`);
    expect(first.body.status).toBe("SKIPPED");
    const [row] = await t.app.db.sql.query<{ image_digest: string }>(`SELECT image_digest FROM revisions WHERE id = $1`, [done.id]);
    expect(row!.image_digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    // The build log says what was found, as the tool prints it while it waits.
    const logs = await call("POST", `/v1/projects/${d.id}/revisions/${done.id}/build_logs`, { order: "asc", limit: 50 });
    const found = (logs.body.logs as { message: string }[]).map((l) => l.message).filter((m) => m.startsWith("Found "));
    expect(found).toEqual([expect.stringContaining(`/agent:v1: manifest ${row!.image_digest} (`)]);

    const deployment = await call("GET", `/v2/deployments/${d.id}`);
    expect(deployment.body.source_config.custom_url).toBe(deployment.body.url);
    expect(deployment.body.status).toBe("READY");
  });

  it("fails the build, saying what is missing, for a tag that was never pushed", async () => {
    const d = await findOrCreate(`img-${randomUUID().slice(0, 8)}`, "internal_container");
    const token = await call("POST", `/v2/deployments/${d.id}/push-token`);
    const target = `${token.body.registry_url.replace(/^https?:\/\//, "")}/agent:never-pushed`;
    await call("PATCH", `/v2/deployments/${d.id}`, { revision_source: "internal_container", source_revision_config: { image_uri: target } });
    const done = await waitForNewest(d.id);
    expect(done.status).toBe("BUILD_FAILED");
    expect(done.status_message).toContain(`image_uri '${target}' is not in the registry`);
    expect(done.status_message).toContain("never-pushed");
  });

  it("cannot push into another deployment's repositories with its push token", async () => {
    const mine = await findOrCreate(`img-${randomUUID().slice(0, 8)}`, "internal_container");
    const theirs = await findOrCreate(`img-${randomUUID().slice(0, 8)}`, "internal_container");
    const myToken = (await call("POST", `/v2/deployments/${mine.id}/push-token`)).body;
    const theirUrl = (await call("POST", `/v2/deployments/${theirs.id}/push-token`)).body;
    const target = `${theirUrl.registry_url.replace(/^https?:\/\//, "")}/agent:stolen`;
    const pushed = await skopeoPush(await makeOciImage("intruder"), target, myToken.token);
    expect(pushed.ok, pushed.output).toBe(false);
    // Nor can it name their image.
    await call("PATCH", `/v2/deployments/${mine.id}`, { revision_source: "internal_container", source_revision_config: { image_uri: target } });
    const done = await waitForNewest(mine.id);
    expect(done.status).toBe("BUILD_FAILED");
    expect(done.status_message).toContain("is not one of this deployment's repositories");
  });
});

describe.skipIf(skipLocally)("deploy --remote: upload URL, PUT of the gzip tarball, PATCH, poll", () => {
  async function upload(id: string, files: Record<string, string>) {
    const issued = await call("POST", `/v2/deployments/${id}/upload-url`);
    expect(issued.status).toBe(200);
    expect(issued.body.upload_url.startsWith(`${base}/uploads/${id}/`)).toBe(true);
    const tarball = gzipSync(await tarOf(files));
    const put = await fetch(issued.body.upload_url, {
      method: "PUT",
      headers: { "content-type": "application/gzip", "content-length": String(tarball.length), "x-goog-content-length-range": "0,209715200" },
      body: tarball,
    });
    expect(put.status, await put.clone().text()).toBe(200);
    return issued.body.object_path as string;
  }

  it("deploys from the uploaded source, recording its files and graphs", async () => {
    const d = await findOrCreate(`src-${randomUUID().slice(0, 8)}`, "internal_source");
    const objectPath = await upload(d.id, {
      "./langgraph.json": JSON.stringify({ dependencies: ["."], graphs: { agent: "./agent.py:graph" } }),
      "./agent.py": "graph = None\n",
    });
    const patched = await call("PATCH", `/v2/deployments/${d.id}`, {
      revision_source: "internal_source",
      source_revision_config: { source_tarball_path: objectPath, framework_config_path: "langgraph.json" },
      source_config: { install_command: "pip install -e .", build_command: null },
    });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    const done = await waitForNewest(d.id);
    expect(done.status, done.status_message).toBe("DEPLOYED");
    const [row] = await t.app.db.sql.query<{ build_report: any }>(`SELECT build_report FROM revisions WHERE id = $1`, [done.id]);
    expect(row!.build_report.source).toMatchObject({
      object_path: objectPath, file_count: 2, files: ["langgraph.json", "agent.py"], graphs: { agent: "./agent.py:graph" }, framework_config_path: "langgraph.json",
    });
  });

  it("fails the build naming the file when the configuration is not in the tarball", async () => {
    const d = await findOrCreate(`src-${randomUUID().slice(0, 8)}`, "internal_source");
    const objectPath = await upload(d.id, { "agent.py": "graph = None\n" });
    await call("PATCH", `/v2/deployments/${d.id}`, {
      revision_source: "internal_source", source_revision_config: { source_tarball_path: objectPath, framework_config_path: "langgraph.json" },
    });
    const done = await waitForNewest(d.id);
    expect(done.status).toBe("BUILD_FAILED");
    expect(done.status_message).toBe(`Build failed: the tarball ${objectPath}: langgraph.json is not in it (1 files).`);
  });
});
