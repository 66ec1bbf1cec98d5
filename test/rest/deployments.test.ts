import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import type { DomainEvent } from "../../src/events/types.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { ANY_UUID, listenerBody } from "../support/fixtures.js";
import { globalId, gqlOk } from "../graphql/support.js";

let t: TestApp;
let ws: NewWorkspace;

// The pipeline is another suite's subject: here revisions stay as created.
beforeAll(async () => {
  t = await startTestApp({ PIPELINE_WORKER: "off" });
  ws = await t.workspace();
});
afterAll(() => t.close());

const SECRET = "plain-secret-value-7d1f";
const iso = expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
const uuid = expect.stringMatching(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);

const post = (body: unknown, key = ws.apiKey) => t.request("POST", "/v2/deployments", { key, body });
const installation = (workspaceId: string) =>
  t.app.db.prisma.codehostInstallation.create({
    data: { workspaceId, installationId: Math.floor(Math.random() * 1e9), name: "acme" },
  });
const listener = async (key: string) =>
  (await t.request("POST", "/v2/listeners", { key, body: listenerBody() })).body.id as string;

describe("POST /v2/deployments", () => {
  it("creates a deployment as the command-line tool sends it, with every field of SPEC.md", async () => {
    const res = await post({
      name: "cli-agent",
      source: "internal_container",
      source_config: { deployment_type: "dev" },
      source_revision_config: {},
      tracked_packages: ["ignored"],
    });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      id: uuid,
      tenant_id: ws.workspaceId,
      created_at: iso,
      updated_at: iso,
      name: "cli-agent",
      display_name: "cli-agent",
      source: "internal_container",
      source_config: {
        integration_id: null,
        repo_url: null,
        build_on_push: null,
        // Answers carry the serving URL here (what the command-line tool prints).
        custom_url: expect.stringMatching(/^https:\/\/cli-agent-[0-9a-f]{8}\.deployments\.localhost$/),
        resource_spec: null,
        listener_id: null,
        listener_config: null,
        install_command: null,
        build_command: null,
        deployment_type: "dev",
        repo_branch: null,
      },
      source_revision_config: {
        repo_ref: null,
        framework_config_path: null,
        image_uri: null,
        source_tarball_path: null,
        repo_commit_sha: null,
        repo_commit_title: null,
      },
      secrets: [],
      secret_references: [],
      status: "AWAITING_DATABASE",
      latest_revision_id: uuid,
      active_revision_id: null,
      agent: null,
      shareable: false,
      route_through_gateway: false,
      tracer_session_id: uuid,
      url: `https://cli-agent-${res.body.id.slice(0, 8)}.deployments.localhost`,
      is_preview: false,
      image_version: expect.stringMatching(/^\d+\.\d+\.\d+$/),
      is_managed_deep_agent: false,
      deployment_tier: "SERVERLESS_S",
      compute_tier: "SERVERLESS_S",
      database_tier: "SERVERLESS_S",
    });

    const got = await t.request("GET", `/v2/deployments/${res.body.id}`, { key: ws.apiKey });
    expect(got.status).toBe(200);
    expect(got.body).toEqual(res.body);
  });

  it("records the first revision as CREATING with its event, due for the pipeline now, and announces it", async () => {
    const seen: DomainEvent[] = [];
    const spy = vi.spyOn(t.app.deps.events, "publish").mockImplementation(async (e) => void seen.push(e));
    const before = Date.now();
    const res = await post({ name: "first-revision", source: "internal_container", source_revision_config: { image_uri: "registry/x:1" } });
    spy.mockRestore();
    expect(res.status).toBe(201);
    const revisionId = res.body.latest_revision_id;

    const revisions = await t.request("GET", `/v2/deployments/${res.body.id}/revisions`, { key: ws.apiKey });
    expect(revisions.body.resources).toHaveLength(1);
    expect(revisions.body.resources[0]).toMatchObject({ id: revisionId, status: "CREATING", source: "internal_container" });
    expect(res.body.source_revision_config.image_uri).toBe("registry/x:1");

    const row = await t.app.db.prisma.revision.findUniqueOrThrow({ where: { id: revisionId }, include: { events: true } });
    expect(row.nextStepAt!.getTime()).toBeGreaterThanOrEqual(before - 5);
    expect(row.nextStepAt!.getTime()).toBeLessThanOrEqual(Date.now());
    expect(row.events.map((e) => [e.fromStatus, e.toStatus])).toEqual([[null, "CREATING"]]);
    const ids = { workspaceId: ws.workspaceId, deploymentId: res.body.id, revisionId };
    expect(seen).toEqual([
      { type: "deployment.revisions", ...ids },
      { type: "revision.status", ...ids, status: "CREATING" },
    ]);
  });

  it("accepts explicit nulls everywhere a client leaves a field unused", async () => {
    const res = await post({
      name: "nulls",
      source: "internal_container",
      source_config: {
        integration_id: null, repo_url: null, build_on_push: null, custom_url: null, resource_spec: null,
        listener_id: null, listener_config: null, install_command: null, build_command: null, deployment_type: null,
      },
      source_revision_config: { repo_ref: null, framework_config_path: null, image_uri: null, source_tarball_path: null },
      secrets: null,
      secret_references: null,
      agent: null,
      shareable: null,
      route_through_gateway: null,
    });
    expect(res.status).toBe(201);
    expect(res.body.source_config.deployment_type).toBe("dev");
    expect(res.body.secrets).toEqual([]);
  });

  it("creates from a code repository through one of the workspace's own installations", async () => {
    const inst = await installation(ws.workspaceId);
    const res = await post({
      name: "from-repo",
      source: "codehost",
      source_config: { integration_id: inst.id, repo_url: "https://forge.example/acme/agent", build_on_push: true, deployment_type: "prod" },
      source_revision_config: { repo_ref: "main", framework_config_path: "agent.json" },
      shareable: true,
      route_through_gateway: true,
    });
    expect(res.status).toBe(201);
    expect(res.body.source_config).toMatchObject({
      integration_id: inst.id,
      repo_url: "https://forge.example/acme/agent",
      build_on_push: true,
      deployment_type: "prod",
      repo_branch: "main",
    });
    expect(res.body.source_revision_config).toMatchObject({ repo_ref: "main", framework_config_path: "agent.json", repo_commit_sha: null });
    expect(res.body).toMatchObject({ shareable: true, route_through_gateway: true, source: "codehost" });
  });

  it("treats another workspace's installation, or an unknown one, as missing (400)", async () => {
    const other = await t.workspace();
    const foreign = await installation(other.workspaceId);
    for (const id of [foreign.id, randomUUID(), ANY_UUID]) {
      const res = await post({
        name: `repo-${id.slice(0, 6)}-${randomUUID().slice(0, 4)}`,
        source: "codehost",
        source_config: { integration_id: id, repo_url: "https://forge.example/a/b" },
        source_revision_config: { framework_config_path: "agent.json" },
      });
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ detail: `Integration ID ${id} not found.` });
    }
  });

  it("reports every missing codehost field at once", async () => {
    const res = await post({ name: "bare-repo", source: "codehost", source_config: { repo_url: null }, source_revision_config: {} });
    expect(res.status).toBe(422);
    expect(res.body.detail).toEqual([
      { loc: ["body", "source_revision_config", "framework_config_path"], type: "missing", msg: "Field required" },
      { loc: ["body", "source_config", "integration_id"], type: "missing", msg: "Field required" },
      { loc: ["body", "source_config", "repo_url"], type: "missing", msg: "Field required" },
    ]);
  });

  it("requires framework_config_path for internal_source and refuses it for the other sources", async () => {
    const upload = await post({ name: "upload", source: "internal_source", source_revision_config: { source_tarball_path: "s3://b/k.tgz" } });
    expect(upload.status).toBe(422);
    expect(upload.body.detail).toEqual([expect.objectContaining({ loc: ["body", "source_revision_config", "framework_config_path"], type: "missing" })]);
    const ok = await post({ name: "upload", source: "internal_source", source_revision_config: { framework_config_path: "agent.json" } });
    expect(ok.status).toBe(201);

    for (const source of ["internal_container", "internal_template"]) {
      const res = await post({ name: `fcp-${source}`, source, source_revision_config: { framework_config_path: "agent.json" } });
      expect(res.status, source).toBe(422);
      expect(res.body.detail).toEqual([
        expect.objectContaining({ loc: ["body", "source_revision_config", "framework_config_path"], type: "value_error", input: "agent.json" }),
      ]);
    }
  });

  it("self-hosted: 400 with the exact phrase without a listener, and needs the workspace's listener and an image", async () => {
    const noListener = await post({ name: "self", source: "external_container", source_config: { listener_id: null }, source_revision_config: { image_uri: "r/i:1" } });
    expect(noListener.status).toBe(400);
    expect(noListener.body.detail).toContain("'source_config.listener_id' is required");

    const other = await t.workspace();
    const foreign = await listener(other.apiKey);
    const wrong = await post({ name: "self", source: "external_container", source_config: { listener_id: foreign }, source_revision_config: { image_uri: "r/i:1" } });
    expect(wrong.status).toBe(400);
    expect(wrong.body).toEqual({ detail: `Listener ID ${foreign} not found.` });

    const mine = await listener(ws.apiKey);
    const noImage = await post({ name: "self", source: "external_container", source_config: { listener_id: mine }, source_revision_config: {} });
    expect(noImage.status).toBe(422);
    expect(noImage.body.detail).toEqual([expect.objectContaining({ loc: ["body", "source_revision_config", "image_uri"], type: "missing" })]);

    const ok = await post({
      name: "self",
      source: "external_container",
      source_config: { listener_id: mine, listener_config: { k8s_namespace: "agents" } },
      source_revision_config: { image_uri: "r/i:1" },
    });
    expect(ok.status).toBe(201);
    expect(ok.body.source_config).toMatchObject({ listener_id: mine, listener_config: { k8s_namespace: "agents" } });
    const reconciled = await t.request("GET", `/v2/deployments?remote_reconciled=true&deployment_ids=${ok.body.id}`, { key: ws.apiKey });
    expect(reconciled.body.resources.map((d: { id: string }) => d.id)).toEqual([ok.body.id]);
  });

  it("refuses a listener on a managed cloud source", async () => {
    const mine = await listener(ws.apiKey);
    const res = await post({ name: "managed-listener", source: "internal_container", source_config: { listener_id: mine } });
    expect(res.status).toBe(422);
    expect(res.body.detail[0].loc).toEqual(["body", "source_config", "listener_id"]);
  });

  it("requires a name unless an agent is given, and derives a valid one from the agent", async () => {
    const noName = await post({ source: "internal_container" });
    expect(noName.status).toBe(422);
    expect(noName.body.detail).toEqual([{ loc: ["body", "name"], type: "missing", msg: "Field required" }]);
    // With the body's other problems, all at once (COMPAT), in the order of the fields.
    const missing = { loc: ["body", "name"], type: "missing", msg: "Field required" };
    const empty = await post({});
    expect(empty.status).toBe(422);
    expect(empty.body.detail).toEqual([missing, { loc: ["body", "source"], type: "missing", msg: "Field required" }]);
    const twice = [{ name: "A", value: "v1v1v1" }, { name: "A", value: "v2v2v2" }];
    const duplicated = await post({ source: "internal_container", secrets: twice });
    expect(duplicated.status).toBe(422);
    expect(duplicated.body.detail).toEqual([missing, expect.objectContaining({ loc: ["body", "secrets", 1, "name"] })]);
    // An agent given, even a bad one, stands for the name.
    const badAgent = await post({ source: "ftp", agent: { agent_id: "ok-agent", environment: "nowhere" } });
    expect(badAgent.body.detail.map((d: { loc: unknown[] }) => d.loc)).toEqual([["body", "source"], ["body", "agent", "environment"]]);

    const res = await post({ source: "internal_container", agent: { agent_id: "support-bot", environment: "staging" } });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ name: "support-bot-staging", agent: { agent_id: "support-bot", environment: "staging" } });
    expect(res.body.url).toBe(`https://support-bot-staging-${res.body.id.slice(0, 8)}.deployments.localhost`);

    const bad = await post({ source: "internal_container", agent: { agent_id: "Bad_Id", environment: "prod" } });
    expect(bad.status).toBe(422);
    expect(bad.body.detail).toEqual([
      expect.objectContaining({ loc: ["body", "agent", "agent_id"], type: "string_pattern_mismatch" }),
      expect.objectContaining({ loc: ["body", "agent", "environment"], type: "enum" }),
    ]);
  });

  it("answers 409 for a name taken in the workspace, and allows it in another", async () => {
    expect((await post({ name: "taken", source: "internal_container" })).status).toBe(201);
    const again = await post({ name: "taken", source: "internal_container" });
    expect(again.status).toBe(409);
    expect(again.body).toEqual({ detail: "A deployment named 'taken' already exists in this workspace." });
    const other = await t.workspace();
    expect((await post({ name: "taken", source: "internal_container" }, other.apiKey)).status).toBe(201);
  });

  it("lets exactly one of several concurrent creations of a name win", async () => {
    const results = await Promise.all([1, 2, 3].map(() => post({ name: "race", source: "internal_container" })));
    expect(results.map((r) => r.status).sort()).toEqual([201, 409, 409]);
    const listed = await t.request("GET", "/v2/deployments?name=race", { key: ws.apiKey });
    expect(listed.body.resources).toHaveLength(1);
    expect(await t.app.db.prisma.revision.count({ where: { deployment: { name: "race", workspaceId: ws.workspaceId } } })).toBe(1);
  });

  it("serves a custom URL as the deployment's url", async () => {
    const res = await post({ name: "custom", source: "internal_container", source_config: { custom_url: "https://agent.example.com" } });
    expect(res.status).toBe(201);
    expect(res.body.url).toBe("https://agent.example.com");
    const bad = await post({ name: "custom-bad", source: "internal_container", source_config: { custom_url: "not a url" } });
    expect(bad.status).toBe(422);
    expect(bad.body.detail[0].loc).toEqual(["body", "source_config", "custom_url"]);
  });

  it("answers 422 for bad bodies, all problems at once, creating nothing", async () => {
    const before = await t.request("GET", "/v2/deployments?limit=100", { key: ws.apiKey });
    const res = await post({ name: 7, source: "ftp", shareable: "yes", source_config: { deployment_type: "huge", integration_id: "nope" } });
    expect(res.status).toBe(422);
    expect(res.body.detail).toEqual([
      expect.objectContaining({ loc: ["body", "name"], type: "string_type" }),
      expect.objectContaining({ loc: ["body", "source"], type: "enum", input: "ftp" }),
      expect.objectContaining({ loc: ["body", "source_config", "integration_id"], type: "uuid_parsing" }),
      expect.objectContaining({ loc: ["body", "source_config", "deployment_type"], type: "enum" }),
      expect.objectContaining({ loc: ["body", "shareable"], type: "bool_parsing" }),
    ]);
    const json = await t.request("POST", "/v2/deployments", { key: ws.apiKey, rawBody: "{nope" });
    expect(json.status).toBe(422);
    // As FastAPI answers it: where the body stopped being JSON, and what was wrong there.
    expect(json.body.detail[0]).toMatchObject({ type: "json_invalid", loc: ["body", 1], ctx: { error: expect.stringMatching(/^Expected property name/) } });
    const empty = await t.request("POST", "/v2/deployments", { key: ws.apiKey });
    expect(empty.status).toBe(422);
    const missingSource = await post({ name: "x" });
    expect(missingSource.body.detail).toEqual([{ loc: ["body", "source"], type: "missing", msg: "Field required" }]);
    const after = await t.request("GET", "/v2/deployments?limit=100", { key: ws.apiKey });
    expect(after.body.resources).toEqual(before.body.resources);
  });

  it("bounds every integer of the resource spec to what GraphQL's Int (32-bit) can show, creating nothing past it", async () => {
    const INT_MAX = 2_147_483_647;
    const spec = (value: number) => ({
      autoscaling_behavior: { scale_up: { stabilization_window_seconds: 0, select_policy: "Max", policies: [{ type: "Pods", value, period_seconds: 60 }] } },
    });
    const before = await t.request("GET", "/v2/deployments?limit=100", { key: ws.apiKey });
    const tooBig = await post({ name: "int-too-big", source: "internal_container", source_config: { resource_spec: spec(3_000_000_000) } });
    expect(tooBig.status).toBe(422);
    expect(tooBig.body.detail).toEqual([
      {
        loc: ["body", "source_config", "resource_spec", "autoscaling_behavior", "scale_up", "policies", 0, "value"],
        type: "less_than_equal",
        msg: `Input should be less than or equal to ${INT_MAX}`,
        input: 3_000_000_000,
        ctx: { le: INT_MAX },
      },
    ]);
    const after = await t.request("GET", "/v2/deployments?limit=100", { key: ws.apiKey });
    expect(after.body.resources).toEqual(before.body.resources);

    // The largest value accepted is one GraphQL can answer.
    const atMost = await post({ name: "int-at-most", source: "internal_container", source_config: { resource_spec: spec(INT_MAX) } });
    expect(atMost.status).toBe(201);
    const q = `query($id: ID!) { node(id: $id) { ... on Deployment { sourceConfig { resourceSpec { autoscalingBehavior { scaleUp { policies { value } } } } } } } }`;
    const read = await gqlOk(t, ws.apiKey, q, { id: globalId("Deployment", atMost.body.id) });
    expect(read).toEqual({ node: { sourceConfig: { resourceSpec: { autoscalingBehavior: { scaleUp: { policies: [{ value: INT_MAX }] } } } } } });
  });
});

describe("secrets", () => {
  it("stores secrets sealed and answers only their names with masked values", async () => {
    const res = await post({
      name: "with-secrets",
      source: "internal_container",
      secrets: [{ name: "OPENAI_API_KEY", value: SECRET }],
      secret_references: [{ name: "DB_URL", secret_name: "db", secret_key: "url" }],
    });
    expect(res.status).toBe(201);
    expect(res.text).not.toContain(SECRET);
    expect(res.body.secrets).toEqual([{ name: "OPENAI_API_KEY", value: "********" }]);
    expect(res.body.secret_references).toEqual([{ name: "DB_URL", secret_name: "db", secret_key: "url" }]);

    for (const path of [`/v2/deployments/${res.body.id}`, "/v2/deployments?limit=100", `/v2/deployments/${res.body.id}/revisions`]) {
      const got = await t.request("GET", path, { key: ws.apiKey });
      expect(got.status).toBe(200);
      expect(got.text, path).not.toContain(SECRET);
    }

    const deployment = await t.app.db.prisma.deployment.findUniqueOrThrow({ where: { id: res.body.id } });
    const revision = await t.app.db.prisma.revision.findUniqueOrThrow({ where: { id: res.body.latest_revision_id } });
    for (const stored of [deployment.secrets, revision.secrets]) {
      expect(JSON.stringify(stored)).not.toContain(SECRET);
      const [sealed] = stored as { name: string; value: string }[];
      expect(t.app.deps.secrets.open(sealed!.value)).toBe(SECRET);
    }
  });

  it("never echoes a secret value in a 422", async () => {
    const cases = [
      { secrets: { name: "NOT_A_LIST", value: SECRET } },
      { secrets: [SECRET] },
      { secrets: [{ name: "BAD NAME", value: SECRET }] },
      { secrets: [{ name: "DUP", value: SECRET }, { name: "DUP", value: SECRET }] },
      { secrets: [{ name: "NUM", value: 5 }, { value: SECRET }] },
    ];
    for (const extra of cases) {
      const res = await post({ name: "leak", source: "internal_container", ...extra });
      expect(res.status, JSON.stringify(extra)).toBe(422);
      expect(res.body.detail[0].loc.slice(0, 2)).toEqual(["body", "secrets"]);
      expect(res.text).not.toContain(SECRET);
    }
  });
});

describe("GET /v2/deployments/{deployment_id}", () => {
  it("answers 404 for an unknown id (a UUID of any version or variant) and 422 for a non-UUID", async () => {
    for (const id of [randomUUID(), ANY_UUID]) {
      const missing = await t.request("GET", `/v2/deployments/${id}`, { key: ws.apiKey });
      expect(missing.status).toBe(404);
      expect(missing.body).toEqual({ detail: `Deployment ID ${id} not found.` });
    }
    const bad = await t.request("GET", "/v2/deployments/abc", { key: ws.apiKey });
    expect(bad.status).toBe(422);
    expect(bad.body).toEqual({
      detail: [expect.objectContaining({ type: "uuid_parsing", loc: ["path", "deployment_id"], input: "abc", msg: expect.any(String) })],
    });
  });

  it("answers 401 without credentials", async () => {
    const res = await t.request("GET", "/v2/deployments");
    expect(res.status).toBe(401);
    expect(typeof res.body.detail).toBe("string");
  });
});
