import { randomUUID } from "node:crypto";
import { SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, TEST_JWT_SECRET, type TestApp } from "../support/app.js";
import { subscribeSse, subscribeWs, wsClient } from "../graphql/live.js";
import { gql, globalId } from "../graphql/support.js";

/**
 * The tenant isolation matrix: workspace B tries every REST endpoint, every GraphQL query field,
 * node/nodes and every subscription on workspace A's objects. Each attempt is refused as "not
 * found" (REST 404, GraphQL null or a NOT_FOUND userError, a subscription error), B's listings show
 * none of A's objects, and at the end every row of A's is exactly as it was.
 */

let t: TestApp;
let url: string;
let a: NewWorkspace;
let b: NewWorkspace;
/** A's objects. */
const A = { deployment: "", selfHosted: "", revision: "", oldRevision: "", listener: "", installation: "", connection: "", name: "", computeId: "" };
const AGENT = "shared-agent";
const TOKEN = "github:shared-bot";
/** B's own deployment, to pair with A's revision ids in a path. */
let bDeployment: string;
let before: string[];

async function created(key: string, path: string, body: unknown): Promise<Record<string, any>> {
  const res = await t.request("POST", path, { key, body });
  expect(res.status, res.text).toBe(201);
  return res.body;
}

/** Every row that belongs to the workspace, as text, in a fixed order. */
async function rowsOf(workspaceId: string): Promise<string[]> {
  const rows = await t.app.db.sql.query<{ row: string }>(
    `SELECT 'workspace ' || w::text AS row FROM workspaces w WHERE id = $1
     UNION ALL SELECT 'api_key ' || k::text FROM api_keys k WHERE workspace_id = $1
     UNION ALL SELECT 'deployment ' || d::text FROM deployments d WHERE workspace_id = $1
     UNION ALL SELECT 'revision ' || r::text FROM revisions r WHERE workspace_id = $1
     UNION ALL SELECT 'event ' || e::text FROM revision_events e JOIN revisions r ON r.id = e.revision_id WHERE r.workspace_id = $1
     UNION ALL SELECT 'listener ' || l::text FROM listeners l WHERE workspace_id = $1
     UNION ALL SELECT 'installation ' || i::text FROM codehost_installations i WHERE workspace_id = $1
     UNION ALL SELECT 'connection ' || c::text FROM agent_connections c WHERE workspace_id = $1
     UNION ALL SELECT 'idempotency ' || k::text FROM idempotency_keys k WHERE workspace_id = $1
     ORDER BY 1`,
    [workspaceId],
  );
  return rows.map((r) => r.row);
}

beforeAll(async () => {
  // No pipeline: A's rows change only if an attempt below changes them.
  t = await startTestApp({ PIPELINE_WORKER: "off", RATE_LIMIT_PER_MINUTE: "0" });
  url = await t.app.start();
  a = await t.workspace();
  b = await t.workspace();
  A.computeId = `cluster-${randomUUID().slice(0, 8)}`;
  A.listener = (await created(a.apiKey, "/v2/listeners", { compute_type: "k8s", compute_id: A.computeId, version: "1" })).id;
  A.installation = (await created(a.apiKey, "/v2/integrations/forge-codehost/installations", { installation_id: 777, name: "acme" })).id;
  A.connection = (await created(a.apiKey, `/v2/auth/agents/${AGENT}/connections`, { oauth_token_id: TOKEN })).id;
  A.name = "a-private";
  const deployment = await created(a.apiKey, "/v2/deployments", { name: A.name, source: "internal_container", source_revision_config: { image_uri: "r.example/a:1" } });
  A.deployment = deployment.id;
  A.oldRevision = deployment.latest_revision_id;
  A.revision = (await created(a.apiKey, `/v2/deployments/${A.deployment}/revisions`, { source_revision_config: { image_uri: "r.example/a:2" } })).id;
  A.selfHosted = (
    await created(a.apiKey, "/v2/deployments", {
      name: "a-self-hosted", source: "external_container", source_config: { listener_id: A.listener }, source_revision_config: { image_uri: "r.example/a:3" },
    })
  ).id;
  await t.request("POST", "/v2/listeners", { key: a.apiKey, body: { compute_type: "k8s", compute_id: "keyed", version: "1" }, headers: { "idempotency-key": "shared-key" } });
  bDeployment = (await created(b.apiKey, "/v2/deployments", { name: "b-own", source: "internal_container", source_revision_config: { image_uri: "r.example/b:1" } })).id;
  before = await rowsOf(a.workspaceId);
});

afterAll(async () => {
  await t.close();
});

describe("REST: every endpoint, with B's key on A's objects", () => {
  const notFound = () => [
    ["GET", `/v2/deployments/${A.deployment}`],
    ["PATCH", `/v2/deployments/${A.deployment}`, { source_config: { install_command: "steal" }, shareable: true }],
    ["DELETE", `/v2/deployments/${A.deployment}`],
    ["DELETE", `/v2/deployments?deployment_ids=${A.deployment},${A.selfHosted}`],
    ["GET", `/v2/deployments/${A.deployment}/revisions`],
    ["POST", `/v2/deployments/${A.deployment}/revisions`, {}],
    ["GET", `/v2/deployments/${A.deployment}/revisions/${A.revision}`],
    ["POST", `/v2/deployments/${A.deployment}/revisions/${A.oldRevision}/redeploy`],
    ["POST", `/v2/deployments/${A.deployment}/revisions/${A.revision}/interrupt`],
    // B's own deployment with A's revision: the revision is not found either.
    ["GET", `/v2/deployments/${bDeployment}/revisions/${A.revision}`],
    ["POST", `/v2/deployments/${bDeployment}/revisions/${A.oldRevision}/redeploy`],
    ["POST", `/v2/deployments/${bDeployment}/revisions/${A.revision}/interrupt`],
    ["GET", `/v2/listeners/${A.listener}`],
    ["PATCH", `/v2/listeners/${A.listener}`, { version: "stolen" }],
    ["DELETE", `/v2/listeners/${A.listener}`],
    ["DELETE", `/v2/auth/agents/${AGENT}/connections/${A.connection}`],
  ] as [string, string, object?][];

  it("answers 404 {detail: '… not found'} for each, with B's API key and with a bearer token of B's", async () => {
    const token = await new SignJWT({ tenant_id: b.workspaceId, sub: "intruder" })
      .setProtectedHeader({ alg: "HS256" })
      .setExpirationTime("5m")
      .sign(new TextEncoder().encode(TEST_JWT_SECRET));
    for (const [method, path, body] of notFound()) {
      for (const credentials of [{ key: b.apiKey }, { headers: { authorization: `Bearer ${token}` } }]) {
        const res = await t.request(method, path, { ...credentials, body });
        expect(res.status, `${method} ${path}: ${res.text}`).toBe(404);
        expect(res.body, `${method} ${path}`).toEqual({ detail: expect.stringMatching(/not found|none of .* were found/i) });
      }
    }
  });

  it("shows none of A's objects in B's listings, whatever the filter", async () => {
    const lists: [string, (body: any) => unknown[]][] = [
      ["/v2/deployments?limit=100", (r) => r.resources],
      [`/v2/deployments?name=${A.name}`, (r) => r.resources],
      [`/v2/deployments?name_contains=a-`, (r) => r.resources],
      [`/v2/deployments?deployment_ids=${A.deployment},${A.selfHosted}`, (r) => r.resources],
      ["/v2/listeners?limit=100", (r) => r.resources],
      [`/v2/auth/agents/${AGENT}/connections`, (r) => r.data],
      ["/v2/integrations/forge-codehost/installations?page_size=100", (r) => r.items],
      ["/v1/integrations/codehost/install", (r) => r],
    ];
    const aIds = new Set(Object.values(A));
    for (const [path, items] of lists) {
      const res = await t.request("GET", path, { key: b.apiKey });
      expect(res.status, path).toBe(200);
      const ids = items(res.body).map((i) => (i as { id: string }).id);
      expect(ids.filter((id) => aIds.has(id)), path).toEqual([]);
    }
  });

  it("refuses A's listener and installation as references in B's deployments, saying they are not found", async () => {
    const selfHosted = await t.request("POST", "/v2/deployments", {
      key: b.apiKey,
      body: { name: "b-borrows-listener", source: "external_container", source_config: { listener_id: A.listener }, source_revision_config: { image_uri: "r.example/b:2" } },
    });
    expect(selfHosted.status).toBe(400);
    expect(selfHosted.body.detail).toBe(`Listener ID ${A.listener} not found.`);
    const codehost = await t.request("POST", "/v2/deployments", {
      key: b.apiKey,
      body: {
        name: "b-borrows-integration", source: "codehost", source_config: { integration_id: A.installation, repo_url: "https://github.com/b/x" },
        source_revision_config: { framework_config_path: "agent.json" },
      },
    });
    expect(codehost.status).toBe(400);
    expect(codehost.body.detail).toBe(`Integration ID ${A.installation} not found.`);
  });

  it("does not reveal that A uses a name, a compute id, an installation id, a connection or an Idempotency-Key", async () => {
    // Uniqueness is per workspace: a clash with A would tell B what A has.
    expect((await t.request("POST", "/v2/deployments", { key: b.apiKey, body: { name: A.name, source: "internal_container" } })).status).toBe(201);
    expect((await t.request("POST", "/v2/listeners", { key: b.apiKey, body: { compute_type: "k8s", compute_id: A.computeId, version: "1" } })).status).toBe(201);
    expect((await t.request("POST", "/v2/integrations/forge-codehost/installations", { key: b.apiKey, body: { installation_id: 777, name: "b" } })).status).toBe(201);
    expect((await t.request("POST", `/v2/auth/agents/${AGENT}/connections`, { key: b.apiKey, body: { oauth_token_id: TOKEN } })).status).toBe(201);
    const keyed = await t.request("POST", "/v2/listeners", {
      key: b.apiKey, body: { compute_type: "k8s", compute_id: "b-keyed", version: "1" }, headers: { "idempotency-key": "shared-key" },
    });
    expect(keyed.status).toBe(201);
    expect(keyed.headers.get("idempotent-replayed")).toBeNull();
    expect(keyed.body.compute_id).toBe("b-keyed");
  });
});

const ids = () => ({
  deployment: globalId("Deployment", A.deployment),
  revision: globalId("Revision", A.revision),
  oldRevision: globalId("Revision", A.oldRevision),
  listener: globalId("Listener", A.listener),
  installation: globalId("CodehostInstallation", A.installation),
  connection: globalId("AgentConnection", A.connection),
  workspace: globalId("Workspace", a.workspaceId),
});

describe("GraphQL: every query field, node and nodes", () => {
  it("resolves none of A's global ids for B: node is null, nodes all null", async () => {
    const all = Object.values(ids());
    for (const id of all) {
      const res = await gql(t, b.apiKey, `query($id: ID!) { node(id: $id) { id } }`, { id });
      expect(res.errors, id).toBeUndefined();
      expect(res.data, id).toEqual({ node: null });
    }
    const res = await gql(t, b.apiKey, `query($ids: [ID!]!) { nodes(ids: $ids) { id } }`, { ids: all });
    expect(res.data).toEqual({ nodes: all.map(() => null) });
  });

  it("lists none of A's objects in any connection, whatever the filter", async () => {
    const res = await gql(
      t,
      b.apiKey,
      `query($ids: [ID!], $name: String) {
        all: deployments(first: 100) { edges { node { uuid } } }
        byId: deployments(filter: { deploymentIds: $ids }) { totalCount }
        byName: deployments(filter: { name: $name }) { edges { node { uuid } } }
        listeners(first: 100) { edges { node { uuid } } }
        codehostInstallations(first: 100) { edges { node { uuid } } }
        agentConnections(agentId: "${AGENT}", first: 100) { edges { node { uuid } } }
        viewer { uuid }
      }`,
      { ids: [ids().deployment, A.selfHosted], name: A.name },
    );
    expect(res.errors).toBeUndefined();
    const aIds = new Set(Object.values(A));
    const seen = JSON.stringify(res.data);
    for (const id of aIds) if (id) expect(seen.includes(id), `${id} in ${seen}`).toBe(false);
    expect(res.data.byId.totalCount).toBe(0);
    expect(res.data.viewer.uuid).toBe(b.workspaceId);
  });
});

describe("GraphQL: every mutation on A's objects", () => {
  const payload = "userErrors { field message code }";
  const attempts = () =>
    [
      ["deploymentUpdate", `mutation($id: ID!) { deploymentUpdate(id: $id, input: { shareable: true }) { deployment { id } ${payload} } }`, { id: ids().deployment }],
      ["deploymentDelete", `mutation($id: ID!) { deploymentDelete(id: $id) { deletedDeploymentId ${payload} } }`, { id: ids().deployment }],
      ["revisionCreate", `mutation($id: ID!) { revisionCreate(deploymentId: $id, input: {}) { revision { id } ${payload} } }`, { id: ids().deployment }],
      ["revisionInterrupt", `mutation($id: ID!) { revisionInterrupt(id: $id) { revision { id } ${payload} } }`, { id: ids().revision }],
      ["revisionRedeploy", `mutation($id: ID!) { revisionRedeploy(id: $id) { revision { id } deployment { id } ${payload} } }`, { id: ids().oldRevision }],
      ["listenerUpdate", `mutation($id: ID!) { listenerUpdate(id: $id, input: { version: "stolen" }) { listener { id } ${payload} } }`, { id: ids().listener }],
      ["listenerDelete", `mutation($id: ID!) { listenerDelete(id: $id) { deletedListenerId ${payload} } }`, { id: ids().listener }],
      ["agentConnectionDelete", `mutation($id: ID!) { agentConnectionDelete(id: $id) { deletedAgentConnectionId ${payload} } }`, { id: ids().connection }],
    ] as const;

  it("answers each with a NOT_FOUND userError and nothing else", async () => {
    for (const [name, query, variables] of attempts()) {
      const res = await gql(t, b.apiKey, query, variables);
      expect(res.errors, name).toBeUndefined();
      const { userErrors, ...objects } = res.data[name];
      expect(userErrors, name).toEqual([expect.objectContaining({ code: "NOT_FOUND", message: expect.stringMatching(/not found/i) })]);
      for (const value of Object.values(objects)) expect(value, name).toBeNull();
    }
  });

  it("refuses A's listener and installation as references, saying they are not found", async () => {
    const create = `mutation($input: DeploymentCreateInput!) { deploymentCreate(input: $input) { deployment { id } ${payload} } }`;
    for (const input of [
      { name: "g-borrows-listener", source: "EXTERNAL_CONTAINER", sourceConfig: { listenerId: A.listener }, sourceRevisionConfig: { imageUri: "r/x:1" } },
      { name: "g-borrows-integration", source: "CODEHOST", sourceConfig: { integrationId: A.installation, repoUrl: "https://github.com/b/x" }, sourceRevisionConfig: { frameworkConfigPath: "a.json" } },
    ]) {
      const res = await gql(t, b.apiKey, create, { input });
      expect(res.data.deploymentCreate.deployment).toBeNull();
      expect(res.data.deploymentCreate.userErrors).toEqual([expect.objectContaining({ message: expect.stringMatching(/ID .* not found/) })]);
    }
  });
});

describe("subscriptions on A's objects", () => {
  const subscriptions = () =>
    [
      [`subscription($id: ID!) { revisionStatusChanged(revisionId: $id) { status } }`, ids().revision],
      [`subscription($id: ID!) { deploymentStatusChanged(deploymentId: $id) { status } }`, ids().deployment],
      [`subscription($id: ID!) { deploymentRevisionsChanged(deploymentId: $id) { kind } }`, ids().deployment],
    ] as const;
  const refused = [{ errors: [expect.objectContaining({ message: expect.stringMatching(/not found/i), extensions: { code: "NOT_FOUND" } })] }];

  it("end at once with a NOT_FOUND error over graphql-ws", async () => {
    const client = wsClient(url, b.apiKey);
    try {
      for (const [query, id] of subscriptions()) {
        const sub = subscribeWs(client, query, { id });
        await sub.done;
        expect(sub.messages, query).toEqual(refused);
      }
    } finally {
      await client.dispose();
    }
  });

  it("end at once with a NOT_FOUND error over SSE", async () => {
    for (const [query, id] of subscriptions()) {
      const sse = subscribeSse(t, b.apiKey, query, { id });
      await sse.done;
      expect(sse.messages, query).toEqual(refused);
    }
  });
});

describe("after every attempt", () => {
  it("A's rows are exactly as they were", async () => {
    expect(await rowsOf(a.workspaceId)).toEqual(before);
  });
});
