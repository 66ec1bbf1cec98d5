import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { listenerBody } from "../support/fixtures.js";
import { expectAnswer, expectValidRequest } from "../contract/reference.js";

let t: TestApp;
let ws: NewWorkspace;

beforeAll(async () => {
  t = await startTestApp({ PIPELINE_WORKER: "off" });
  ws = await t.workspace();
});
afterAll(() => t.close());

const SECRET = "patched-secret-91c3";
let counter = 0;

async function create(body: Record<string, unknown> = {}) {
  const res = await t.request("POST", "/v2/deployments", {
    key: ws.apiKey,
    body: { name: `dep-${++counter}`, source: "internal_container", ...body },
  });
  expect(res.status).toBe(201);
  return res.body;
}
const patch = (id: string, body: unknown, key = ws.apiKey) => t.request("PATCH", `/v2/deployments/${id}`, { key, body });
const revisionIds = async (id: string) =>
  (await t.request("GET", `/v2/deployments/${id}/revisions?limit=100`, { key: ws.apiKey })).body.resources.map((r: { id: string }) => r.id);

async function codehostDeployment() {
  const inst = await t.app.db.prisma.codehostInstallation.create({
    data: { workspaceId: ws.workspaceId, installationId: Math.floor(Math.random() * 1e9), name: "acme" },
  });
  return create({
    source: "codehost",
    source_config: { integration_id: inst.id, repo_url: "https://forge.example/acme/agent", deployment_type: "prod" },
    source_revision_config: { repo_ref: "main", framework_config_path: "agent.json" },
  });
}

describe("PATCH /v2/deployments/{id} in place", () => {
  it("updates sharing, gateway routing, references and other source fields without a revision", async () => {
    const d = await create({ source_config: { resource_spec: { cpu: 1, memory_mb: 1024 } } });
    const res = await patch(d.id, {
      shareable: true,
      route_through_gateway: true,
      secret_references: [{ name: "DB_URL", secret_name: "db", secret_key: "url" }],
      source_config: { build_on_push: true, repo_branch: "release", resource_spec: { memory_mb: 1024, cpu: 1 }, custom_url: null },
      source_revision_config: { repo_ref: null, image_uri: null },
      secrets: null,
      revision_source: null,
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      id: d.id,
      shareable: true,
      route_through_gateway: true,
      secret_references: [{ name: "DB_URL", secret_name: "db", secret_key: "url" }],
      latest_revision_id: d.latest_revision_id,
    });
    expect(res.body.source_config).toMatchObject({ build_on_push: true, repo_branch: "release", resource_spec: { cpu: 1, memory_mb: 1024 } });
    expect(await revisionIds(d.id)).toEqual([d.latest_revision_id]);
    expect(Date.parse(res.body.updated_at)).toBeGreaterThan(Date.parse(d.updated_at));
  });

  it("sending the current value of a revision-creating field is no change", async () => {
    const d = await create({
      source_config: { custom_url: "https://same.example.com", install_command: "pip install .", build_command: "make", resource_spec: { labels: { a: "1", b: "2" } } },
    });
    const res = await patch(d.id, {
      source_config: { custom_url: "https://same.example.com", install_command: "pip install .", build_command: "make", resource_spec: { labels: { b: "2", a: "1" } } },
      source_revision_config: {},
    });
    expect(res.status).toBe(200);
    expect(res.body.latest_revision_id).toBe(d.latest_revision_id);
    expect(await revisionIds(d.id)).toHaveLength(1);
  });
});

describe("PATCH /v2/deployments/{id} creating a revision", () => {
  const triggers: [string, Record<string, unknown>][] = [
    ["custom_url", { source_config: { custom_url: "https://new.example.com" } }],
    ["resource_spec", { source_config: { resource_spec: { cpu: 2 } } }],
    ["install_command", { source_config: { install_command: "uv sync" } }],
    ["build_command", { source_config: { build_command: "make build" } }],
    ["a source_revision_config field", { source_revision_config: { image_uri: "registry/agent:2" } }],
    ["secrets, even an empty set", { secrets: [] }],
  ];
  for (const [what, body] of triggers) {
    it(`creates a revision when ${what} changes`, async () => {
      const d = await create();
      const res = await patch(d.id, body);
      expect(res.status).toBe(200);
      expect(res.body.latest_revision_id).not.toBe(d.latest_revision_id);
      const revisions = await revisionIds(d.id);
      expect(revisions).toEqual([res.body.latest_revision_id, d.latest_revision_id]);
      const rev = await t.request("GET", `/v2/deployments/${d.id}/revisions/${res.body.latest_revision_id}`, { key: ws.apiKey });
      expect(rev.body).toMatchObject({ status: "CREATING", source: "internal_container" });
    });
  }

  it("moves the url with custom_url and stores the new resource spec", async () => {
    const d = await create();
    const res = await patch(d.id, { source_config: { custom_url: "https://moved.example.com", resource_spec: { min_scale: 1, max_scale: 3 } } });
    expect(res.body.url).toBe("https://moved.example.com");
    expect(res.body.source_config.resource_spec).toMatchObject({ min_scale: 1, max_scale: 3 });
    const row = await t.app.db.prisma.revision.findUniqueOrThrow({ where: { id: res.body.latest_revision_id } });
    expect(row.sourceConfig).toMatchObject({ custom_url: "https://moved.example.com", resource_spec: { min_scale: 1, max_scale: 3 } });
  });

  it("replaces the set of secrets, shows them masked and never in plain text", async () => {
    const d = await create({ secrets: [{ name: "OLD", value: "old-value" }, { name: "KEEP", value: "v" }] });
    const res = await patch(d.id, { secrets: [{ name: "NEW", value: SECRET }] });
    expect(res.status).toBe(200);
    expect(res.body.secrets).toEqual([{ name: "NEW", value: "********" }]);
    expect(res.text).not.toContain(SECRET);
    const got = await t.request("GET", `/v2/deployments/${d.id}`, { key: ws.apiKey });
    expect(got.text).not.toContain(SECRET);
    const rev = await t.app.db.prisma.revision.findUniqueOrThrow({ where: { id: res.body.latest_revision_id } });
    const [sealed] = rev.secrets as { name: string; value: string }[];
    expect(sealed!.name).toBe("NEW");
    expect(t.app.deps.secrets.open(sealed!.value)).toBe(SECRET);
  });

  it("carries unset revision fields over from the newest revision of the same source", async () => {
    const d = await codehostDeployment();
    const res = await patch(d.id, { source_revision_config: { repo_ref: "feature-x", framework_config_path: null } });
    expect(res.status).toBe(200);
    expect(res.body.source_revision_config).toMatchObject({ repo_ref: "feature-x", framework_config_path: "agent.json" });
  });

  it("applies revision_source to the new revision only; the deployment's source stays", async () => {
    const d = await codehostDeployment();
    const res = await patch(d.id, { revision_source: "internal_source", source_revision_config: { framework_config_path: "agent.json", source_tarball_path: "s3://b/a.tgz" } });
    expect(res.status).toBe(200);
    expect(res.body.source).toBe("codehost");
    const rev = await t.request("GET", `/v2/deployments/${d.id}/revisions/${res.body.latest_revision_id}`, { key: ws.apiKey });
    expect(rev.body).toMatchObject({ source: "internal_source", source_revision_config: { source_tarball_path: "s3://b/a.tgz", repo_ref: null } });
  });

  it("checks the source rules of the revision it would create (422), changing nothing", async () => {
    const d = await create();
    const res = await patch(d.id, { source_revision_config: { framework_config_path: "agent.json" }, shareable: true });
    expect(res.status).toBe(422);
    expect(res.body.detail).toEqual([expect.objectContaining({ loc: ["body", "source_revision_config", "framework_config_path"] })]);
    const after = await t.request("GET", `/v2/deployments/${d.id}`, { key: ws.apiKey });
    expect(after.body).toEqual(d);
  });

  it("refuses revision_source on a self-hosted deployment (400)", async () => {
    const listener = await t.request("POST", "/v2/listeners", { key: ws.apiKey, body: listenerBody({ compute_id: "c1" }) });
    const d = await create({ source: "external_container", source_config: { listener_id: listener.body.id }, source_revision_config: { image_uri: "r/i:1" } });
    const res = await patch(d.id, { revision_source: "internal_container", source_revision_config: { image_uri: "r/i:2" } });
    expect(res.status).toBe(400);
    expect(res.body.detail).toContain("revision_source");
    const ok = await patch(d.id, { source_revision_config: { image_uri: "r/i:2" } });
    expect(ok.status).toBe(200);
    expect(ok.body.source_revision_config.image_uri).toBe("r/i:2");
  });

  it("keeps latest_revision_id and newest-first order in agreement under concurrent changes", async () => {
    const d = await create();
    const results = await Promise.all(
      Array.from({ length: 5 }, (_, i) => patch(d.id, { source_revision_config: { image_uri: `registry/agent:${i}` } })),
    );
    expect(results.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    const revisions = await revisionIds(d.id);
    expect(revisions).toHaveLength(6);
    const got = await t.request("GET", `/v2/deployments/${d.id}`, { key: ws.apiKey });
    expect(got.body.latest_revision_id).toBe(revisions[0]);
  });
});

describe("PATCH /v2/deployments/{id} refusals", () => {
  it("answers 400 for a change to a fixed field, naming them, and accepts their current values", async () => {
    const d = await codehostDeployment();
    const res = await patch(d.id, {
      name: "renamed",
      source: "internal_source",
      source_config: { integration_id: randomUUID(), repo_url: "https://forge.example/other", deployment_type: "dev", listener_id: randomUUID() },
    });
    expect(res.status).toBe(400);
    expect(res.body.detail).toBe(
      "name, source, source_config.integration_id, source_config.repo_url, source_config.deployment_type, source_config.listener_id cannot be changed once the deployment is created.",
    );
    const same = await patch(d.id, {
      name: d.name,
      source: "codehost",
      source_config: { integration_id: d.source_config.integration_id.toUpperCase(), repo_url: d.source_config.repo_url, deployment_type: "prod", listener_id: null },
    });
    expect(same.status).toBe(200);
    expect(same.body.latest_revision_id).toBe(d.latest_revision_id);
  });

  it("answers 404, 422 for a non-UUID id, and 422 for a bad body", async () => {
    const id = randomUUID();
    const missing = await patch(id, { shareable: true });
    expect(missing.status).toBe(404);
    expect(missing.body).toEqual({ detail: `Deployment ID ${id} not found.` });
    const bad = await patch("nope", { shareable: true });
    expect(bad.status).toBe(422);
    expect(bad.body.detail[0]).toMatchObject({ type: "uuid_parsing", loc: ["path", "deployment_id"] });

    const d = await create();
    const body = await patch(d.id, { revision_source: "external_container", source_config: { resource_spec: { cpu: 0, memory_mb: 1.5 } } });
    expect(body.status).toBe(422);
    expect(body.body.detail).toEqual([
      expect.objectContaining({ loc: ["body", "revision_source"], type: "enum" }),
      expect.objectContaining({ loc: ["body", "source_config", "resource_spec", "cpu"], type: "greater_than_equal", ctx: { ge: 0.1 } }),
      expect.objectContaining({ loc: ["body", "source_config", "resource_spec", "memory_mb"], type: "int_parsing" }),
    ]);
    expect(await revisionIds(d.id)).toHaveLength(1);
  });
});

// Fields of the reference's ResourceSpec that SPEC.md's groups do not list: they were once dropped
// without a word (a 201 showing `{"cpu": 1}` for `{"cpu": 1, "orchestrator_cpu": 2}`).
describe("resource_spec's orchestrator and executor fields", () => {
  const WORKLOADS = {
    orchestrator_cpu: 10, orchestrator_cpu_limit: 12, orchestrator_memory_mb: 1024, orchestrator_memory_limit_mb: 2048,
    orchestrator_min_scale: 1, orchestrator_max_scale: 4,
    executor_cpu: 0.25, executor_cpu_limit: 0.5, executor_memory_mb: 512, executor_memory_limit_mb: 1024,
  };
  const get = async (id: string) => {
    const res = await t.request("GET", `/v2/deployments/${id}`, { key: ws.apiKey });
    expect(res.status).toBe(200);
    expectAnswer("GET", "/v2/deployments/{deployment_id}", res);
    return res.body;
  };

  it("stores and shows them through create, get and patch; changing one alone makes a revision", async () => {
    const body = {
      name: `dep-${++counter}`, source: "internal_container", source_config: { resource_spec: { cpu: 1, ...WORKLOADS } }, source_revision_config: {}, secrets: [],
    };
    expectValidRequest("POST", "/v2/deployments", body);
    const created = await t.request("POST", "/v2/deployments", { key: ws.apiKey, body });
    expect(created.status).toBe(201);
    expectAnswer("POST", "/v2/deployments", created);
    expect(created.body.source_config.resource_spec).toEqual({ cpu: 1, ...WORKLOADS });
    expect((await get(created.body.id)).source_config.resource_spec).toEqual({ cpu: 1, ...WORKLOADS });

    // The same spec again is no change; a new executor cpu alone is one, stored on the new revision too.
    const same = await patch(created.body.id, { source_config: { resource_spec: { ...WORKLOADS, cpu: 1 } } });
    expect(same.status).toBe(200);
    expect(same.body.latest_revision_id).toBe(created.body.latest_revision_id);
    const changed = { cpu: 1, ...WORKLOADS, executor_cpu: 0.5 };
    expectValidRequest("PATCH", "/v2/deployments/{deployment_id}", { source_config: { resource_spec: changed } });
    const res = await patch(created.body.id, { source_config: { resource_spec: changed } });
    expect(res.status).toBe(200);
    expectAnswer("PATCH", "/v2/deployments/{deployment_id}", res);
    expect(res.body.latest_revision_id).not.toBe(created.body.latest_revision_id);
    expect(res.body.source_config.resource_spec).toEqual(changed);
    expect((await get(created.body.id)).source_config.resource_spec).toEqual(changed);
    const revision = await t.app.db.prisma.revision.findUniqueOrThrow({ where: { id: res.body.latest_revision_id } });
    expect(revision.sourceConfig).toMatchObject({ resource_spec: changed });
  });

  it("answers bad values with 422 naming each, and creates or changes nothing", async () => {
    const bad = {
      orchestrator_cpu: 0, orchestrator_cpu_limit: "2", orchestrator_memory_mb: 1.5, orchestrator_min_scale: -1, orchestrator_max_scale: 1001,
      executor_cpu: 600, executor_memory_mb: 512, executor_memory_limit_mb: 256,
    };
    const before = await t.request("GET", "/v2/deployments?limit=100", { key: ws.apiKey });
    const refused = await t.request("POST", "/v2/deployments", {
      key: ws.apiKey,
      body: { name: `dep-${++counter}`, source: "internal_container", source_config: { resource_spec: bad } },
    });
    expect(refused.status).toBe(422);
    expectAnswer("POST", "/v2/deployments", refused);
    const at = (field: string) => ["body", "source_config", "resource_spec", field];
    expect(refused.body.detail).toEqual([
      { loc: at("orchestrator_cpu"), type: "greater_than", msg: "Input should be greater than 0", input: 0, ctx: { gt: 0 } },
      { loc: at("orchestrator_cpu_limit"), type: "float_parsing", msg: "Input should be a valid number", input: "2" },
      { loc: at("orchestrator_memory_mb"), type: "int_parsing", msg: "Input should be a valid integer", input: 1.5 },
      { loc: at("orchestrator_min_scale"), type: "greater_than_equal", msg: "Input should be greater than or equal to 0", input: -1, ctx: { ge: 0 } },
      { loc: at("orchestrator_max_scale"), type: "less_than_equal", msg: "Input should be less than or equal to 1000", input: 1001, ctx: { le: 1000 } },
      { loc: at("executor_cpu"), type: "less_than_equal", msg: "Input should be less than or equal to 512", input: 600, ctx: { le: 512 } },
    ]);
    const after = await t.request("GET", "/v2/deployments?limit=100", { key: ws.apiKey });
    expect(after.body.resources).toEqual(before.body.resources);

    // A request above its limit is refused once the fields are each valid.
    const over = await t.request("POST", "/v2/deployments", {
      key: ws.apiKey,
      body: { name: `dep-${++counter}`, source: "internal_container", source_config: { resource_spec: { executor_memory_mb: 512, executor_memory_limit_mb: 256 } } },
    });
    expect(over.status).toBe(422);
    expect(over.body.detail).toEqual([
      expect.objectContaining({ loc: at("executor_memory_mb"), msg: expect.stringContaining("executor_memory_limit_mb (256)"), input: 512 }),
    ]);

    const d = await create({ source_config: { resource_spec: WORKLOADS } });
    const res = await patch(d.id, { source_config: { resource_spec: { ...WORKLOADS, executor_cpu_limit: 1000, orchestrator_min_scale: 5 } } });
    expect(res.status).toBe(422);
    expectAnswer("PATCH", "/v2/deployments/{deployment_id}", res);
    expect(res.body.detail).toEqual([
      expect.objectContaining({ loc: at("executor_cpu_limit"), type: "less_than_equal", input: 1000 }),
      expect.objectContaining({ loc: at("orchestrator_min_scale"), msg: expect.stringContaining("orchestrator_max_scale (4)"), input: 5 }),
    ]);
    expect(await revisionIds(d.id)).toEqual([d.latest_revision_id]);
    expect((await get(d.id)).source_config.resource_spec).toEqual(WORKLOADS);
  });
});

describe("DELETE /v2/deployments/{id}", () => {
  it("answers 204 with an empty body, removes its revisions, then 404", async () => {
    const d = await create();
    const res = await t.request("DELETE", `/v2/deployments/${d.id}`, { key: ws.apiKey });
    expect(res.status).toBe(204);
    expect(res.text).toBe("");
    expect((await t.request("GET", `/v2/deployments/${d.id}`, { key: ws.apiKey })).status).toBe(404);
    expect(await t.app.db.prisma.revision.count({ where: { deploymentId: d.id } })).toBe(0);
    expect(await t.app.db.prisma.revisionEvent.count({ where: { revisionId: d.latest_revision_id } })).toBe(0);
    const again = await t.request("DELETE", `/v2/deployments/${d.id}`, { key: ws.apiKey });
    expect(again.status).toBe(404);
    expect(again.body).toEqual({ detail: `Deployment ID ${d.id} not found.` });
    const bad = await t.request("DELETE", "/v2/deployments/123", { key: ws.apiKey });
    expect(bad.status).toBe(422);
    expect(bad.body.detail[0]).toMatchObject({ type: "uuid_parsing", loc: ["path", "deployment_id"] });
  });
});

describe("DELETE /v2/deployments?deployment_ids=", () => {
  it("answers 200 when all are deleted, repeated or comma separated", async () => {
    const [a, b, c] = [await create(), await create(), await create()];
    const res = await t.request("DELETE", `/v2/deployments?deployment_ids=${a.id}&deployment_ids=${b.id},${c.id}`, { key: ws.apiKey });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ deleted_ids: [a.id, b.id, c.id], missing_ids: [] });
    for (const d of [a, b, c]) expect((await t.request("GET", `/v2/deployments/${d.id}`, { key: ws.apiKey })).status).toBe(404);
  });

  it("answers 207 listing deleted and missing ids when some are missing, another workspace's among them", async () => {
    const mine = await create();
    const stranger = await t.workspace();
    const theirs = await t.request("POST", "/v2/deployments", { key: stranger.apiKey, body: { name: "theirs", source: "internal_container" } });
    const unknown = randomUUID();
    const res = await t.request("DELETE", `/v2/deployments?deployment_ids=${mine.id},${theirs.body.id},${unknown}`, { key: ws.apiKey });
    expect(res.status).toBe(207);
    expect(res.body).toEqual({ deleted_ids: [mine.id], missing_ids: [theirs.body.id, unknown] });
    expect((await t.request("GET", `/v2/deployments/${theirs.body.id}`, { key: stranger.apiKey })).status).toBe(200);
  });

  it("answers 404 when none is found, and 422 without ids, with a bad id or over 100", async () => {
    const none = await t.request("DELETE", `/v2/deployments?deployment_ids=${randomUUID()}`, { key: ws.apiKey });
    expect(none.status).toBe(404);
    expect(typeof none.body.detail).toBe("string");
    const without = await t.request("DELETE", "/v2/deployments", { key: ws.apiKey });
    expect(without.status).toBe(422);
    expect(without.body.detail[0].loc).toEqual(["query", "deployment_ids"]);
    const bad = await t.request("DELETE", "/v2/deployments?deployment_ids=xyz", { key: ws.apiKey });
    expect(bad.status).toBe(422);
    expect(bad.body.detail[0]).toMatchObject({ loc: ["query", "deployment_ids", 0], type: "uuid_parsing" });
    const d = await create();
    const ids = [d.id, ...Array.from({ length: 100 }, () => randomUUID())];
    const tooMany = await t.request("DELETE", `/v2/deployments?deployment_ids=${ids.join(",")}`, { key: ws.apiKey });
    expect(tooMany.status).toBe(422);
    expect(tooMany.body.detail[0]).toMatchObject({ loc: ["query", "deployment_ids"], type: "too_long" });
    expect((await t.request("GET", `/v2/deployments/${d.id}`, { key: ws.apiKey })).status).toBe(200);
  });
});
