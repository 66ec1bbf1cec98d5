import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { createDeployment, DEPLOYMENT_CREATE, gql, gqlOk, restId } from "./support.js";

let t: TestApp;
let ws: NewWorkspace;

// The pipeline is another suite's subject: revisions stay as created.
beforeAll(async () => {
  t = await startTestApp({ PIPELINE_WORKER: "off" });
  ws = await t.workspace();
});
afterAll(() => t.close());

const SECRET = "plain-secret-value-93ab";

const DEPLOYMENT_FIELDS = /* GraphQL */ `
  id uuid tenantId name displayName source status url imageVersion shareable routeThroughGateway
  isPreview isManagedDeepAgent deploymentTier computeTier databaseTier remoteReconciled tracerSessionId
  createdAt updatedAt
  sourceConfig {
    integrationId repoUrl buildOnPush customUrl listenerId installCommand buildCommand deploymentType repoBranch
    listenerConfig { k8sNamespace }
    resourceSpec {
      minScale maxScale cpu cpuLimit memoryMb memoryLimitMb dbStorageGi labels annotations serviceAccountName
      imagePullSecrets { name }
      volumes { name configMap emptyDir }
      volumeMounts { name mountPath readOnly }
      sidecars { name image imagePullPolicy command env { name value } resources { limits } volumeMounts { name mountPath } }
      autoscalingBehavior { scaleUp { stabilizationWindowSeconds selectPolicy policies { type value periodSeconds } } }
    }
  }
  sourceRevisionConfig { repoRef frameworkConfigPath imageUri sourceTarballPath repoCommitSha repoCommitTitle }
  secrets { name }
  secretReferences { name secretName secretKey }
  agent { agentId environment }
  latestRevision { id uuid status statusMessage source events { from to message at } }
  activeRevision { id }
  listener { id }
  integration { id }
`;

describe("deploymentCreate", () => {
  it("creates a deployment with every value type, shows secret names only, and its first revision", async () => {
    const data = await gqlOk(
      t,
      ws.apiKey,
      `mutation($input: DeploymentCreateInput!) { deploymentCreate(input: $input) { deployment { ${DEPLOYMENT_FIELDS} } userErrors { field message code } } }`,
      {
        input: {
          name: "dashboard-agent",
          source: "INTERNAL_CONTAINER",
          sourceConfig: {
            deploymentType: "PROD",
            installCommand: "pip install .",
            resourceSpec: {
              minScale: 1,
              maxScale: 3,
              cpu: 0.5,
              cpuLimit: 1.5,
              memoryMb: 512,
              memoryLimitMb: 1024,
              dbStorageGi: 10,
              labels: { "app.kubernetes.io/name": "agent", team_name: "core" },
              imagePullSecrets: [{ name: "regcred" }],
              volumes: [{ name: "scratch", emptyDir: {} }],
              volumeMounts: [{ name: "scratch", mountPath: "/tmp/scratch", readOnly: false }],
              sidecars: [
                {
                  name: "proxy",
                  image: "envoy:1",
                  imagePullPolicy: "IfNotPresent",
                  command: ["envoy"],
                  env: [{ name: "LOG", value: "debug" }],
                  resources: { limits: { cpu: "100m" } },
                  volumeMounts: [{ name: "scratch", mountPath: "/s" }],
                },
              ],
              autoscalingBehavior: {
                scaleUp: { stabilizationWindowSeconds: 30, selectPolicy: "Max", policies: [{ type: "Pods", value: 2, periodSeconds: 60 }] },
              },
            },
          },
          sourceRevisionConfig: { imageUri: "registry.example/agent:1" },
          secrets: [{ name: "OPENAI_API_KEY", value: SECRET }],
          secretReferences: [{ name: "DB_URL", secretName: "db", secretKey: "url" }],
          shareable: true,
        },
      },
    );
    const { deployment, userErrors } = data.deploymentCreate;
    expect(userErrors).toEqual([]);
    expect(JSON.stringify(data)).not.toContain(SECRET);
    expect(restId(deployment.id)).toBe(deployment.uuid);
    expect(deployment).toMatchObject({
      tenantId: ws.workspaceId,
      name: "dashboard-agent",
      displayName: "dashboard-agent",
      source: "INTERNAL_CONTAINER",
      status: "AWAITING_DATABASE",
      shareable: true,
      routeThroughGateway: false,
      deploymentTier: "SERVERLESS_S",
      createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      sourceConfig: {
        deploymentType: "PROD",
        installCommand: "pip install .",
        listenerId: null,
        listenerConfig: null,
        resourceSpec: {
          minScale: 1,
          maxScale: 3,
          cpu: 0.5,
          cpuLimit: 1.5,
          memoryMb: 512,
          memoryLimitMb: 1024,
          dbStorageGi: 10,
          labels: { "app.kubernetes.io/name": "agent", team_name: "core" },
          annotations: null,
          imagePullSecrets: [{ name: "regcred" }],
          volumes: [{ name: "scratch", configMap: null, emptyDir: {} }],
          volumeMounts: [{ name: "scratch", mountPath: "/tmp/scratch", readOnly: false }],
          sidecars: [
            {
              name: "proxy",
              image: "envoy:1",
              imagePullPolicy: "IfNotPresent",
              command: ["envoy"],
              env: [{ name: "LOG", value: "debug" }],
              resources: { limits: { cpu: "100m" } },
              volumeMounts: [{ name: "scratch", mountPath: "/s" }],
            },
          ],
          autoscalingBehavior: {
            scaleUp: { stabilizationWindowSeconds: 30, selectPolicy: "Max", policies: [{ type: "Pods", value: 2, periodSeconds: 60 }] },
          },
        },
      },
      sourceRevisionConfig: { imageUri: "registry.example/agent:1", frameworkConfigPath: null, repoCommitSha: null },
      secrets: [{ name: "OPENAI_API_KEY" }],
      secretReferences: [{ name: "DB_URL", secretName: "db", secretKey: "url" }],
      agent: null,
      activeRevision: null,
      listener: null,
      integration: null,
      latestRevision: {
        status: "CREATING",
        source: "INTERNAL_CONTAINER",
        events: [{ from: null, to: "CREATING", message: "Revision created", at: expect.any(String) }],
      },
    });
    // The same deployment through REST: the faces agree.
    const rest = await t.request("GET", `/v2/deployments/${deployment.uuid}`, { key: ws.apiKey });
    expect(rest.body.source_config.resource_spec.labels).toEqual({ "app.kubernetes.io/name": "agent", team_name: "core" });
    expect(rest.body.source_config.resource_spec.sidecars[0].imagePullPolicy).toBe("IfNotPresent");
    expect(rest.body.latest_revision_id).toBe(deployment.latestRevision.uuid);
  });

  it("reports every validation problem as userErrors naming the input field, and creates nothing", async () => {
    const before = await gqlOk(t, ws.apiKey, `{ deployments { totalCount } }`);
    const res = await gqlOk(t, ws.apiKey, DEPLOYMENT_CREATE, {
      input: {
        name: " bad name ",
        source: "CODEHOST",
        sourceConfig: { repoUrl: "", customUrl: "not a url", resourceSpec: { labels: { team_name: 5 } } },
        secrets: [{ name: "1BAD", value: SECRET }],
      },
    });
    const { deployment, userErrors } = res.deploymentCreate;
    expect(deployment).toBeNull();
    expect(JSON.stringify(userErrors)).not.toContain(SECRET);
    const fields = userErrors.map((e: { field: string[] }) => e.field.join("."));
    expect(fields).toEqual(
      expect.arrayContaining([
        "input.name",
        "input.sourceConfig.repoUrl",
        "input.sourceConfig.customUrl",
        // A label's key is the client's own: it is not renamed.
        "input.sourceConfig.resourceSpec.labels.team_name",
        "input.secrets.0.name",
      ]),
    );
    for (const e of userErrors) expect(e).toMatchObject({ code: "INVALID", message: expect.any(String) });
    const limits = await gqlOk(t, ws.apiKey, DEPLOYMENT_CREATE, {
      input: { name: "over-limit", source: "INTERNAL_CONTAINER", sourceConfig: { resourceSpec: { cpu: 2, cpuLimit: 1 } } },
    });
    expect(limits.deploymentCreate.userErrors).toEqual([
      { field: ["input", "sourceConfig", "resourceSpec", "cpu"], message: expect.stringContaining("cpu_limit"), code: "INVALID" },
    ]);
    const after = await gqlOk(t, ws.apiKey, `{ deployments { totalCount } }`);
    expect(after.deployments.totalCount).toBe(before.deployments.totalCount);
  });

  it("applies the source rules of core: framework config path required for codehost", async () => {
    const res = await gqlOk(t, ws.apiKey, DEPLOYMENT_CREATE, {
      input: { name: "from-repo", source: "CODEHOST", sourceConfig: { repoUrl: "https://git.example/a" } },
    });
    const fields = res.deploymentCreate.userErrors.map((e: { field: string[] }) => e.field.join("."));
    expect(fields).toEqual(expect.arrayContaining(["input.sourceRevisionConfig.frameworkConfigPath", "input.sourceConfig.integrationId"]));
  });

  it("refuses a name taken in the workspace with a CONFLICT userError", async () => {
    await createDeployment(t, ws.apiKey, { name: "taken" });
    const res = await gqlOk(t, ws.apiKey, DEPLOYMENT_CREATE, { input: { name: "taken", source: "INTERNAL_CONTAINER" } });
    expect(res.deploymentCreate).toEqual({
      deployment: null,
      userErrors: [{ field: null, message: expect.stringContaining("taken"), code: "CONFLICT" }],
    });
  });

  it("refuses a self-hosted deployment without a listener with COMPAT.md's message", async () => {
    const res = await gqlOk(t, ws.apiKey, DEPLOYMENT_CREATE, {
      input: { name: "self-hosted", source: "EXTERNAL_CONTAINER", sourceRevisionConfig: { imageUri: "x/y:1" } },
    });
    expect(res.deploymentCreate.userErrors).toEqual([
      { field: null, message: expect.stringContaining("'source_config.listener_id' is required"), code: "NOT_ALLOWED" },
    ]);
  });

  it("names an agent deployment after its agent and links its listener", async () => {
    const listener = await gqlOk(
      t,
      ws.apiKey,
      `mutation { listenerCreate(input: {computeType: K8S, computeId: "edge-1", version: "1"}) { listener { id uuid } } }`,
    );
    const created = await gqlOk(
      t,
      ws.apiKey,
      `mutation($input: DeploymentCreateInput!) { deploymentCreate(input: $input) { deployment { name agent { agentId environment } listener { id } sourceConfig { listenerId } remoteReconciled } userErrors { message } } }`,
      {
        input: {
          source: "EXTERNAL_CONTAINER",
          agent: { agentId: "support-bot", environment: "STAGING" },
          sourceConfig: { listenerId: listener.listenerCreate.listener.uuid },
          sourceRevisionConfig: { imageUri: "registry.example/bot:2" },
        },
      },
    );
    expect(created.deploymentCreate).toEqual({
      deployment: {
        name: "support-bot-staging",
        agent: { agentId: "support-bot", environment: "STAGING" },
        listener: { id: listener.listenerCreate.listener.id },
        sourceConfig: { listenerId: listener.listenerCreate.listener.uuid },
        remoteReconciled: true,
      },
      userErrors: [],
    });
  });
});

describe("deploymentUpdate", () => {
  const UPDATE = /* GraphQL */ `
    mutation($id: ID!, $input: DeploymentUpdateInput!) {
      deploymentUpdate(id: $id, input: $input) {
        deployment { id shareable sourceConfig { buildCommand repoUrl } latestRevision { id status sourceRevisionConfig { imageUri } } revisions { totalCount } }
        userErrors { field message code }
      }
    }`;

  it("changes in place without a revision, and makes a revision when a revision field is given", async () => {
    const d = await createDeployment(t, ws.apiKey);
    const quiet = await gqlOk(t, ws.apiKey, UPDATE, { id: d.id, input: { shareable: true } });
    expect(quiet.deploymentUpdate.userErrors).toEqual([]);
    expect(quiet.deploymentUpdate.deployment).toMatchObject({ shareable: true, latestRevision: { id: d.revisionId }, revisions: { totalCount: 1 } });

    const loud = await gqlOk(t, ws.apiKey, UPDATE, {
      id: d.id,
      input: { revisionSource: "INTERNAL_CONTAINER", sourceRevisionConfig: { imageUri: "registry.example/a:2" } },
    });
    const deployment = loud.deploymentUpdate.deployment;
    expect(deployment.latestRevision.id).not.toBe(d.revisionId);
    expect(deployment.latestRevision).toMatchObject({ status: "CREATING", sourceRevisionConfig: { imageUri: "registry.example/a:2" } });
    expect(deployment.revisions.totalCount).toBe(2);
  });

  it("refuses to change fields fixed at creation, naming them (NOT_ALLOWED), and changes nothing", async () => {
    const d = await createDeployment(t, ws.apiKey, { sourceConfig: { deploymentType: "DEV" } });
    const res = await gqlOk(t, ws.apiKey, UPDATE, {
      id: d.id,
      input: { shareable: true, sourceConfig: { repoUrl: "https://elsewhere.example/r", deploymentType: "PROD" } },
    });
    expect(res.deploymentUpdate.deployment).toBeNull();
    expect(res.deploymentUpdate.userErrors).toEqual([
      { field: ["input", "sourceConfig", "repoUrl"], message: expect.any(String), code: "NOT_ALLOWED" },
      { field: ["input", "sourceConfig", "deploymentType"], message: expect.any(String), code: "NOT_ALLOWED" },
    ]);
    const node = await gqlOk(t, ws.apiKey, `query($id: ID!) { node(id: $id) { ... on Deployment { shareable } } }`, { id: d.id });
    expect(node.node.shareable).toBe(false);
  });

  it("answers NOT_FOUND on the id for an unknown, malformed, wrongly typed or foreign id", async () => {
    const mine = await createDeployment(t, ws.apiKey);
    const other = await t.workspace();
    const listener = await gqlOk(t, ws.apiKey, `mutation { listenerCreate(input: {computeType: K8S, computeId: "nf", version: "1"}) { listener { id } } }`);
    for (const [key, id] of [
      [other.apiKey, mine.id],
      [ws.apiKey, "not-a-global-id"],
      [ws.apiKey, listener.listenerCreate.listener.id],
      [ws.apiKey, Buffer.from("Deployment:abc").toString("base64")],
    ] as const) {
      const res = await gqlOk(t, key, UPDATE, { id, input: { shareable: true } });
      expect(res.deploymentUpdate, id).toEqual({ deployment: null, userErrors: [{ field: ["id"], message: expect.stringContaining("not found"), code: "NOT_FOUND" }] });
    }
  });
});

describe("deploymentDelete", () => {
  it("deletes the deployment with its revisions; a second delete is NOT_FOUND", async () => {
    const d = await createDeployment(t, ws.apiKey);
    const DELETE = `mutation($id: ID!) { deploymentDelete(id: $id) { deletedDeploymentId userErrors { field code } } }`;
    const res = await gqlOk(t, ws.apiKey, DELETE, { id: d.id });
    expect(res.deploymentDelete).toEqual({ deletedDeploymentId: d.id, userErrors: [] });
    const gone = await gqlOk(t, ws.apiKey, `query($ids: [ID!]!) { nodes(ids: $ids) { id } }`, { ids: [d.id, d.revisionId] });
    expect(gone.nodes).toEqual([null, null]);
    const again = await gqlOk(t, ws.apiKey, DELETE, { id: d.id });
    expect(again.deploymentDelete).toEqual({ deletedDeploymentId: null, userErrors: [{ field: ["id"], code: "NOT_FOUND" }] });
  });
});

describe("deployments connection", () => {
  it("filters with every REST filter as a typed input", async () => {
    const mine = await t.workspace();
    const a = await createDeployment(t, mine.apiKey, { name: "alpha-one", sourceConfig: { deploymentType: "PROD" } });
    const b = await createDeployment(t, mine.apiKey, { name: "alpha_two", sourceConfig: { deploymentType: "DEV" } });
    await createDeployment(t, mine.apiKey, { name: "beta", sourceConfig: { deploymentType: "DEV" } });
    const names = async (filter: Record<string, unknown>) => {
      const data = await gqlOk(t, mine.apiKey, `query($f: DeploymentFilter) { deployments(filter: $f, first: 100) { totalCount edges { node { name } } } }`, { f: filter });
      expect(data.deployments.totalCount).toBe(data.deployments.edges.length);
      return data.deployments.edges.map((e: { node: { name: string } }) => e.node.name).sort();
    };
    expect(await names({})).toEqual(["alpha-one", "alpha_two", "beta"]);
    expect(await names({ name: "beta" })).toEqual(["beta"]);
    expect(await names({ nameContains: "ALPHA" })).toEqual(["alpha-one", "alpha_two"]);
    expect(await names({ nameContains: "_" })).toEqual(["alpha_two"]);
    expect(await names({ deploymentType: "DEV" })).toEqual(["alpha_two", "beta"]);
    expect(await names({ status: "AWAITING_DATABASE", deploymentType: "PROD" })).toEqual(["alpha-one"]);
    expect(await names({ status: "READY" })).toEqual([]);
    expect(await names({ deploymentIds: [a.id, b.uuid] })).toEqual(["alpha-one", "alpha_two"]);
    expect(await names({ remoteReconciled: true })).toEqual([]);
    expect(await names({ imageVersion: "0.0.0-none" })).toEqual([]);
    expect(await names({ name: null, nameContains: null })).toEqual(["alpha-one", "alpha_two", "beta"]);
  });

  it("answers a bad filter with BAD_USER_INPUT naming the filter field", async () => {
    const res = await gql(t, ws.apiKey, `{ deployments(filter: {agentId: "Not_Valid", deploymentIds: ["zzz"]}) { totalCount } }`);
    expect(res.status).toBe(200);
    expect(res.data).toBeNull();
    expect(res.errors).toEqual([
      expect.objectContaining({
        message: expect.stringMatching(/filter\.deploymentIds\.0: .*UUID.*filter\.agentId: String should match pattern/s),
        path: ["deployments"],
        extensions: { code: "BAD_USER_INPUT" },
      }),
    ]);
  });

  it("pages a deployment's revisions newest first, filtered by status", async () => {
    const d = await createDeployment(t, ws.apiKey);
    for (const n of [2, 3]) {
      await gqlOk(t, ws.apiKey, `mutation($d: ID!, $i: RevisionCreateInput!) { revisionCreate(deploymentId: $d, input: $i) { userErrors { message } } }`, {
        d: d.id,
        i: { sourceRevisionConfig: { imageUri: `r/i:${n}` } },
      });
    }
    const q = `query($id: ID!, $s: [RevisionStatus!]) { node(id: $id) { ... on Deployment { revisions(status: $s) { totalCount edges { node { status sourceRevisionConfig { imageUri } } } } } } }`;
    const all = await gqlOk(t, ws.apiKey, q, { id: d.id });
    expect(all.node.revisions.totalCount).toBe(3);
    expect(all.node.revisions.edges.map((e: any) => [e.node.status, e.node.sourceRevisionConfig.imageUri])).toEqual([
      ["CREATING", "r/i:3"],
      ["SKIPPED", "r/i:2"],
      ["SKIPPED", null],
    ]);
    const skipped = await gqlOk(t, ws.apiKey, q, { id: d.id, s: ["SKIPPED"] });
    expect(skipped.node.revisions.totalCount).toBe(2);
    expect(skipped.node.revisions.edges.map((e: any) => e.node.status)).toEqual(["SKIPPED", "SKIPPED"]);
  });
});
