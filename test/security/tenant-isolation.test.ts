import { randomUUID } from "node:crypto";
import { gzipSync } from "node:zlib";
import { decodeJwt, SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, TEST_JWT_SECRET, type TestApp } from "../support/app.js";
import { subscribeSse, subscribeWs, wsClient } from "../graphql/live.js";
import { gql, globalId } from "../graphql/support.js";
import { addProvider, OAUTH_ENV, pathOf } from "../support/oauth.js";
import { type OAuthServer, startOAuthServer } from "../support/oauth-server.js";
import { created as createdBy, listenerBody } from "../support/fixtures.js";

/**
 * The tenant isolation matrix: workspace B tries every REST endpoint, every GraphQL query field,
 * node/nodes and every subscription on workspace A's objects. Each attempt is refused as "not
 * found" (REST 404, GraphQL null or a NOT_FOUND userError, a subscription error), B's listings show
 * none of A's objects, and at the end every row of A's is exactly as it was.
 */

let t: TestApp;
let url: string;
let oauth: OAuthServer;
let a: NewWorkspace;
let b: NewWorkspace;
/** A's objects. */
const A = {
  deployment: "", selfHosted: "", revision: "", oldRevision: "", listener: "", installation: "", connection: "", name: "", computeId: "", objectPath: "",
  provider: "", providerUuid: "", token: "", flow: "", pendingFlow: "",
};
/** A's push token and registry_url. */
let aPush: { token: string; registry_url: string };
/** The code and state the provider sent A's browser back with, for A's flow still pending. */
let pendingCallback = { code: "", state: "" };
const AGENT = "shared-agent";
/** B's own deployment, to pair with A's revision ids in a path. */
let bDeployment: string;
let before: string[];

const created = (key: string, path: string, body: unknown) => createdBy(t, key, path, body);

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
     UNION ALL SELECT 'push_token ' || p::text FROM push_tokens p WHERE workspace_id = $1
     UNION ALL SELECT 'upload ' || u::text FROM source_uploads u WHERE workspace_id = $1
     UNION ALL SELECT 'log ' || l::text FROM revision_logs l WHERE workspace_id = $1
     UNION ALL SELECT 'repository ' || r::text FROM codehost_repositories r WHERE workspace_id = $1
     UNION ALL SELECT 'oauth_provider ' || p::text FROM oauth_providers p WHERE workspace_id = $1
     UNION ALL SELECT 'oauth_token ' || o::text FROM oauth_tokens o WHERE workspace_id = $1
     UNION ALL SELECT 'oauth_flow ' || f::text FROM oauth_flows f WHERE workspace_id = $1
     ORDER BY 1`,
    [workspaceId],
  );
  return rows.map((r) => r.row);
}

beforeAll(async () => {
  // No pipeline: A's rows change only if an attempt below changes them.
  oauth = await startOAuthServer();
  // A registry is named (push tokens need one); with no worker, nothing calls it.
  t = await startTestApp({ PIPELINE_WORKER: "off", RATE_LIMIT_PER_MINUTE: "0", REGISTRY_URL: "http://127.0.0.1:9", ...OAUTH_ENV });
  url = await t.app.start();
  a = await t.workspace();
  b = await t.workspace();
  // A's OAuth provider (of type slack), a token from a real flow, and a second flow still pending.
  A.provider = "a-idp";
  A.providerUuid = (await addProvider(t, oauth, a.apiKey, A.provider, { provider_type: "slack" })).id;
  const started = await t.request("POST", "/v2/auth/authenticate", { key: a.apiKey, body: { provider: A.provider, scopes: ["openid"] } });
  const done = await t.request("GET", pathOf(await oauth.follow(started.body.url)));
  A.flow = started.body.auth_id;
  A.token = done.body.token_id;
  const pending = await t.request("POST", "/v2/auth/authenticate", { key: a.apiKey, body: { provider: A.provider, scopes: ["openid"], force_new: true } });
  A.pendingFlow = pending.body.auth_id;
  const back = await oauth.follow(pending.body.url);
  pendingCallback = { code: back.searchParams.get("code")!, state: back.searchParams.get("state")! };
  A.computeId = `cluster-${randomUUID().slice(0, 8)}`;
  A.listener = (await created(a.apiKey, "/v2/listeners", listenerBody({ compute_id: A.computeId }))).id;
  A.installation = (
    await created(a.apiKey, "/v2/integrations/forge-codehost/installations", {
      installation_id: 777, name: "acme", repositories: [{ id: 1, owner: "acme", name: "agent", url: "https://github.com/acme/agent" }],
    })
  ).id;
  A.connection = (await created(a.apiKey, `/v2/auth/agents/${AGENT}/connections`, { oauth_token_id: A.token })).id;
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
  await t.request("POST", "/v2/listeners", { key: a.apiKey, body: listenerBody({ compute_id: "keyed" }), headers: { "idempotency-key": "shared-key" } });
  bDeployment = (await created(b.apiKey, "/v2/deployments", { name: "b-own", source: "internal_container", source_revision_config: { image_uri: "r.example/b:1" } })).id;
  aPush = (await t.request("POST", `/v2/deployments/${A.deployment}/push-token`, { key: a.apiKey })).body;
  t.guard.issued(aPush.token);
  const upload = (await t.request("POST", `/v2/deployments/${A.deployment}/upload-url`, { key: a.apiKey })).body;
  t.guard.issued(new URL(upload.upload_url).searchParams.get("signature")!);
  A.objectPath = upload.object_path;
  before = await rowsOf(a.workspaceId);
});

afterAll(async () => {
  await t?.close();
  await oauth?.close();
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
    ["POST", `/v2/deployments/${A.deployment}/push-token`],
    ["POST", `/v2/deployments/${A.deployment}/upload-url`],
    // Logs: A's deployment and revisions, and A's revision under B's deployment.
    ["POST", `/v1/projects/${A.deployment}/revisions/${A.revision}/build_logs`, { order: "asc", limit: 50 }],
    ["POST", `/v1/projects/${A.deployment}/revisions/${A.revision}/deploy_logs`, { order: "desc", limit: 30 }],
    ["POST", `/v1/projects/${A.deployment}/deploy_logs`, { order: "asc", limit: 100 }],
    ["POST", `/v1/projects/${bDeployment}/revisions/${A.revision}/build_logs`, {}],
    ["POST", `/v1/projects/${bDeployment}/revisions/${A.revision}/deploy_logs`, {}],
    // Using A's token in a connection of B's.
    ["POST", `/v2/auth/agents/${AGENT}/connections`, { oauth_token_id: A.token }],
    ["GET", `/v2/auth/providers/${A.provider}`],
    ["PATCH", `/v2/auth/providers/${A.provider}`, { name: "stolen", client_secret: "stolen-secret" }],
    ["DELETE", `/v2/auth/providers/${A.provider}`],
    ["POST", "/v2/auth/authenticate", { provider: A.provider, scopes: [] }],
    ["PATCH", `/v2/auth/tokens/${A.token}/metadata`, { provider_account_label: "stolen", is_default: false }],
    ["DELETE", `/v2/auth/tokens/${A.token}`],
    ["GET", `/v1/integrations/codehost/${A.installation}/repos`],
    ["GET", `/v1/integrations/forge/codehost/${A.installation}/repos`],
    ["PUT", `/v2/integrations/forge-codehost/installations/${A.installation}/repositories`, { repositories: [] }],
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

  it("keeps A's flows, tokens and Slack tokens from B: not found, none, nothing changed", async () => {
    const waited = await t.request("GET", `/v2/auth/wait/${A.pendingFlow}?timeout=0`, { key: b.apiKey });
    expect(waited.body).toEqual({ status: "not_found", token: null });
    expect((await t.request("GET", `/v2/auth/wait/${A.flow}`, { key: b.apiKey })).body).toEqual({ status: "not_found", token: null });
    // A's code and state, sent by B: no flow of B's has that state.
    const finalize = await t.request("POST", `/v2/auth/callback/${A.provider}`, { key: b.apiKey, body: pendingCallback });
    expect(finalize.status).toBe(400);
    expect(finalize.body.detail).toMatch(/^Unknown or already used state/);
    expect((await t.request("GET", `/v2/auth/tokens/exists?provider_id=${A.provider}`, { key: b.apiKey })).body).toEqual({ has_token: false });
    expect((await t.request("GET", "/v2/auth/tokens/workspace/slack/exists", { key: b.apiKey })).body).toEqual({ has_token: false });
    expect((await t.request("DELETE", "/v2/auth/tokens/workspace/slack", { key: b.apiKey })).body).toEqual({ deleted: 0 });
    expect((await t.request("DELETE", `/v2/auth/tokens?provider_id=${A.provider}`, { key: b.apiKey })).body).toEqual({ provider_id: A.provider, deleted: 0 });
  });

  it("shows none of A's objects in B's listings, whatever the filter", async () => {
    const lists: [string, (body: any) => unknown[]][] = [
      ["/v2/deployments?limit=100", (r) => r.resources],
      [`/v2/deployments?name=${A.name}`, (r) => r.resources],
      [`/v2/deployments?name_contains=a-`, (r) => r.resources],
      [`/v2/deployments?deployment_ids=${A.deployment},${A.selfHosted}`, (r) => r.resources],
      ["/v2/listeners?limit=100", (r) => r.resources],
      [`/v2/auth/agents/${AGENT}/connections`, (r) => r.data],
      ["/v2/auth/providers", (r) => r],
      ["/v2/auth/tokens", (r) => r],
      [`/v2/auth/tokens?provider_id=${A.provider}`, (r) => r],
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
    // Whatever the source: one built from an uploaded tarball may name an installation too.
    const internal = await t.request("POST", "/v2/deployments", {
      key: b.apiKey,
      body: {
        name: "b-borrows-integration-internal", source: "internal_source", source_config: { integration_id: A.installation },
        source_revision_config: { framework_config_path: "agent.json", source_tarball_path: "uploads/b.tgz" },
      },
    });
    expect(internal.status).toBe(400);
    expect(internal.body.detail).toBe(`Integration ID ${A.installation} not found.`);
  });

  it("does not reveal that A uses a name, a compute id, an installation id, a connection or an Idempotency-Key", async () => {
    // Uniqueness is per workspace: a clash with A would tell B what A has.
    expect((await t.request("POST", "/v2/deployments", { key: b.apiKey, body: { name: A.name, source: "internal_container" } })).status).toBe(201);
    expect((await t.request("POST", "/v2/listeners", { key: b.apiKey, body: listenerBody({ compute_id: A.computeId }) })).status).toBe(201);
    expect((await t.request("POST", "/v2/integrations/forge-codehost/installations", { key: b.apiKey, body: { installation_id: 777, name: "b" } })).status).toBe(201);
    const own = await t.app.core.oauthTokens.save(
      await t.app.core.auth.authenticate({ apiKey: b.apiKey }),
      await t.app.core.oauthProviders.create(await t.app.core.auth.authenticate({ apiKey: b.apiKey }), {
        provider_id: A.provider, name: "b's", client_id: "b", auth_url: "https://b.example/a", token_url: "https://b.example/t",
      }),
      { accessToken: t.guard.secret(), refreshToken: null, tokenType: "bearer", scopes: [], expiresAt: null, accountLabel: null },
      { requestedScopes: [], isDefault: true },
    );
    expect((await t.request("POST", `/v2/auth/agents/${AGENT}/connections`, { key: b.apiKey, body: { oauth_token_id: own.id } })).status).toBe(201);
    const keyed = await t.request("POST", "/v2/listeners", {
      key: b.apiKey, body: listenerBody({ compute_id: "b-keyed" }), headers: { "idempotency-key": "shared-key" },
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
  provider: globalId("OAuthProvider", A.providerUuid),
  token: globalId("OAuthToken", A.token),
  flow: globalId("OAuthFlow", A.flow),
  pendingFlow: globalId("OAuthFlow", A.pendingFlow),
});

describe("the registry and uploads: B's credentials on A's repositories and uploads", () => {
  it("grants B's push token nothing of A's repositories", async () => {
    const push = (await t.request("POST", `/v2/deployments/${bDeployment}/push-token`, { key: b.apiKey })).body;
    t.guard.issued(push.token);
    const aRepository = `${aPush.registry_url.replace(/^https?:\/\/[^/]+\//, "")}/agent`;
    const res = await t.request("GET", `/registry/token?service=127.0.0.1:9&scope=repository:${aRepository}:push,pull`, {
      headers: { authorization: `Basic ${Buffer.from(`oauth2accesstoken:${push.token}`).toString("base64")}` },
    });
    expect(res.status).toBe(200);
    expect(decodeJwt(res.body.token).access).toEqual([]);
  });

  it("lets B's upload URL put nothing at A's object path", async () => {
    const upload = (await t.request("POST", `/v2/deployments/${bDeployment}/upload-url`, { key: b.apiKey })).body;
    const u = new URL(upload.upload_url);
    t.guard.issued(u.searchParams.get("signature")!);
    const res = await t.app.fetch(
      new Request(`http://test/${A.objectPath}${u.search}`, { method: "PUT", headers: { "content-type": "application/gzip" }, body: gzipSync("x") }),
    );
    expect(res.status).toBe(403);
  });
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
        oauthProviders(first: 100) { edges { node { uuid } } }
        oauthTokens(first: 100) { edges { node { uuid } } }
        mine: oauthTokens(providerId: "${A.provider}") { totalCount }
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

describe("GraphQL: log fields", () => {
  it("reach none of A's lines: A's revisions are null for B, and a cursor of A's log pages nothing of B's", async () => {
    const fields = `buildLogs(last: 100) { totalCount edges { cursor node { id message } } } deployLogs(first: 100) { totalCount edges { node { id } } }`;
    const res = await gql(t, b.apiKey, `query($ids: [ID!]!) { nodes(ids: $ids) { ... on Revision { ${fields} } } }`, { ids: [ids().revision, ids().oldRevision] });
    expect(res.errors).toBeUndefined();
    expect(res.data).toEqual({ nodes: [null, null] });
    // A cursor A was given for its own revision's log is refused on B's revision.
    const own = await gql(t, a.apiKey, `query($id: ID!) { node(id: $id) { ... on Revision { buildLogs(first: 1) { pageInfo { endCursor } } } } }`, { id: ids().revision });
    const cursor = own.data.node.buildLogs.pageInfo.endCursor;
    expect(cursor).toEqual(expect.any(String));
    const bRevision = (await t.request("GET", `/v2/deployments/${bDeployment}/revisions`, { key: b.apiKey })).body.resources[0].id;
    const theirs = await gql(t, b.apiKey, `query($id: ID!, $after: String) { node(id: $id) { ... on Revision { buildLogs(first: 5, after: $after) { edges { node { id } } } } } }`, {
      id: globalId("Revision", bRevision),
      after: cursor,
    });
    expect(theirs.errors?.[0]?.extensions?.code).toBe("BAD_USER_INPUT");
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
      ["deploymentPushTokenCreate", `mutation($id: ID!) { deploymentPushTokenCreate(deploymentId: $id) { token registryUrl ${payload} } }`, { id: ids().deployment }],
      ["deploymentUploadUrlCreate", `mutation($id: ID!) { deploymentUploadUrlCreate(deploymentId: $id) { uploadUrl objectPath ${payload} } }`, { id: ids().deployment }],
      ["agentConnectionCreate", `mutation($t: String!) { agentConnectionCreate(agentId: "${AGENT}", input: { oauthTokenId: $t }) { agentConnection { id } ${payload} } }`, { t: A.token }],
      ["oauthProviderUpdate", `mutation($id: ID!) { oauthProviderUpdate(id: $id, input: { name: "stolen" }) { oauthProvider { id } ${payload} } }`, { id: ids().provider }],
      ["oauthProviderDelete", `mutation($id: ID!) { oauthProviderDelete(id: $id) { deletedOAuthProviderId ${payload} } }`, { id: ids().provider }],
      ["oauthTokenUpdate", `mutation($id: ID!) { oauthTokenUpdate(id: $id, input: { providerAccountLabel: "stolen" }) { oauthToken { id } ${payload} } }`, { id: ids().token }],
      ["oauthTokenDelete", `mutation($id: ID!) { oauthTokenDelete(id: $id) { deletedOAuthTokenId ${payload} } }`, { id: ids().token }],
      ["oauthAuthenticate", `mutation($t: String!) { oauthAuthenticate(input: { provider: "${A.provider}", scopes: [], tokenId: $t }) { status url flow { id } oauthToken { id } ${payload} } }`, { t: A.token }],
      [
        "codehostInstallationRepositoriesSet",
        `mutation($id: ID!) { codehostInstallationRepositoriesSet(id: $id, input: { repositories: [] }) { codehostInstallation { id } ${payload} } }`,
        { id: ids().installation },
      ],
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

  it("refuses to finalize A's flow with A's code and state", async () => {
    const res = await gql(t, b.apiKey, `mutation($input: OAuthFinalizeInput!) { oauthFinalize(providerId: "${A.provider}", input: $input) { flow { id } oauthToken { id } ${payload} } }`, {
      input: pendingCallback,
    });
    expect(res.data.oauthFinalize).toEqual({ flow: null, oauthToken: null, userErrors: [expect.objectContaining({ code: "NOT_ALLOWED", message: expect.stringMatching(/^Unknown or already used state/) })] });
  });

  it("refuses A's listener and installation as references, saying they are not found", async () => {
    const create = `mutation($input: DeploymentCreateInput!) { deploymentCreate(input: $input) { deployment { id } ${payload} } }`;
    for (const input of [
      { name: "g-borrows-listener", source: "EXTERNAL_CONTAINER", sourceConfig: { listenerId: A.listener }, sourceRevisionConfig: { imageUri: "r/x:1" } },
      { name: "g-borrows-integration", source: "CODEHOST", sourceConfig: { integrationId: A.installation, repoUrl: "https://github.com/b/x" }, sourceRevisionConfig: { frameworkConfigPath: "a.json" } },
      { name: "g-borrows-integration-internal", source: "INTERNAL_SOURCE", sourceConfig: { integrationId: A.installation }, sourceRevisionConfig: { frameworkConfigPath: "a.json", sourceTarballPath: "uploads/g.tgz" } },
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
      [`subscription($id: ID!) { revisionLogAppended(revisionId: $id, kind: BUILD) { id message } }`, ids().revision],
      [`subscription($id: ID!) { revisionLogAppended(revisionId: $id, kind: DEPLOY, tail: 1000) { id message } }`, ids().oldRevision],
      [`subscription($id: ID!) { oauthFlowStatusChanged(flowId: $id) { status } }`, ids().pendingFlow],
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
