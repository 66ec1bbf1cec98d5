import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { createDeployment, DEPLOYMENT_CREATE, gqlOk, restId } from "./support.js";

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
      userErrors: [{ field: ["input", "name"], message: expect.stringContaining("taken"), code: "CONFLICT" }],
    });
  });

  it("refuses a self-hosted deployment without a listener with COMPAT.md's message", async () => {
    const res = await gqlOk(t, ws.apiKey, DEPLOYMENT_CREATE, {
      input: { name: "self-hosted", source: "EXTERNAL_CONTAINER", sourceRevisionConfig: { imageUri: "x/y:1" } },
    });
    expect(res.deploymentCreate.userErrors).toEqual([
      { field: ["input", "sourceConfig", "listenerId"], message: expect.stringContaining("'source_config.listener_id' is required"), code: "NOT_ALLOWED" },
    ]);
  });

  it("names an agent deployment after its agent and links its listener", async () => {
    const listener = await gqlOk(
      t,
      ws.apiKey,
      `mutation { listenerCreate(input: {computeType: K8S, computeId: "edge-1", version: "1", computeConfig: {k8sNamespaces: ["default"]}}) { listener { id uuid } } }`,
    );
    const input = {
      source: "EXTERNAL_CONTAINER",
      agent: { agentId: "support-bot", environment: "STAGING" },
      sourceConfig: { listenerId: listener.listenerCreate.listener.uuid },
      sourceRevisionConfig: { imageUri: "registry.example/bot:2" },
    };
    const created = await gqlOk(
      t,
      ws.apiKey,
      `mutation($input: DeploymentCreateInput!) { deploymentCreate(input: $input) { deployment { name agent { agentId environment } listener { id } sourceConfig { listenerId } remoteReconciled } userErrors { message } } }`,
      { input },
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
    // Named after its agent, a second deployment of the agent and environment is refused at the agent.
    const again = await gqlOk(t, ws.apiKey, DEPLOYMENT_CREATE, { input });
    expect(again.deploymentCreate).toEqual({
      deployment: null,
      userErrors: [{ field: ["input", "agent"], message: expect.stringContaining("support-bot-staging"), code: "CONFLICT" }],
    });
  });
});
