import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import type { Prisma } from "../../src/generated/prisma/client.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { createDeployment, DEPLOYMENT_CREATE, gql, gqlOk } from "./support.js";

let t: TestApp;
let ws: NewWorkspace;

// The pipeline is another suite's subject: revisions stay as created.
beforeAll(async () => {
  t = await startTestApp({ PIPELINE_WORKER: "off" });
  ws = await t.workspace();
});
afterAll(() => t.close());

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
    const listener = await gqlOk(t, ws.apiKey, `mutation { listenerCreate(input: {computeType: K8S, computeId: "nf", version: "1", computeConfig: {k8sNamespaces: ["default"]}}) { listener { id } } }`);
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

describe("resourceSpec's orchestrator and executor fields", () => {
  const WORKLOADS = {
    orchestratorCpu: 10, orchestratorCpuLimit: 12, orchestratorMemoryMb: 1024, orchestratorMemoryLimitMb: 2048,
    orchestratorMinScale: 1, orchestratorMaxScale: 4,
    executorCpu: 0.25, executorCpuLimit: 0.5, executorMemoryMb: 512, executorMemoryLimitMb: 1024,
  };
  const SPEC = Object.keys(WORKLOADS).join(" ");
  const READ = `query($id: ID!) { node(id: $id) { ... on Deployment { revisions { totalCount } sourceConfig { resourceSpec { cpu ${SPEC} } } } } }`;
  const UPDATE = /* GraphQL */ `
    mutation($id: ID!, $input: DeploymentUpdateInput!) {
      deploymentUpdate(id: $id, input: $input) {
        deployment { uuid revisions { totalCount } sourceConfig { resourceSpec { cpu ${SPEC} } } }
        userErrors { field message code }
      }
    }`;

  it("stores and shows them through create, read and update, in camelCase, and REST shows the same in snake_case", async () => {
    const d = await createDeployment(t, ws.apiKey, { sourceConfig: { resourceSpec: { cpu: 1, ...WORKLOADS } } });
    const read = await gqlOk(t, ws.apiKey, READ, { id: d.id });
    expect(read.node).toEqual({ revisions: { totalCount: 1 }, sourceConfig: { resourceSpec: { cpu: 1, ...WORKLOADS } } });

    const changed = { ...WORKLOADS, executorCpu: 0.5, orchestratorMaxScale: null };
    const res = await gqlOk(t, ws.apiKey, UPDATE, { id: d.id, input: { sourceConfig: { resourceSpec: { cpu: 1, ...changed } } } });
    expect(res.deploymentUpdate.userErrors).toEqual([]);
    expect(res.deploymentUpdate.deployment).toMatchObject({ revisions: { totalCount: 2 }, sourceConfig: { resourceSpec: { cpu: 1, ...changed } } });
    expect((await gqlOk(t, ws.apiKey, READ, { id: d.id })).node.sourceConfig.resourceSpec).toEqual({ cpu: 1, ...changed });

    const rest = await t.request("GET", `/v2/deployments/${res.deploymentUpdate.deployment.uuid}`, { key: ws.apiKey });
    expect(rest.body.source_config.resource_spec).toEqual({
      cpu: 1,
      orchestrator_cpu: 10, orchestrator_cpu_limit: 12, orchestrator_memory_mb: 1024, orchestrator_memory_limit_mb: 2048,
      orchestrator_min_scale: 1, orchestrator_max_scale: null,
      executor_cpu: 0.5, executor_cpu_limit: 0.5, executor_memory_mb: 512, executor_memory_limit_mb: 1024,
    });
  });

  it("refuses bad values as INVALID userErrors naming the camelCase field, and changes nothing", async () => {
    const before = await gqlOk(t, ws.apiKey, `{ deployments { totalCount } }`);
    const refused = await gqlOk(t, ws.apiKey, DEPLOYMENT_CREATE, {
      input: {
        name: "bad-workloads", source: "INTERNAL_CONTAINER",
        sourceConfig: { resourceSpec: { orchestratorCpu: 0, orchestratorMinScale: -1, executorCpuLimit: 600, executorMemoryMb: 0 } },
      },
    });
    expect(refused.deploymentCreate).toEqual({
      deployment: null,
      userErrors: [
        { field: ["input", "sourceConfig", "resourceSpec", "orchestratorCpu"], message: expect.any(String), code: "INVALID" },
        { field: ["input", "sourceConfig", "resourceSpec", "orchestratorMinScale"], message: expect.any(String), code: "INVALID" },
        { field: ["input", "sourceConfig", "resourceSpec", "executorCpuLimit"], message: expect.any(String), code: "INVALID" },
        { field: ["input", "sourceConfig", "resourceSpec", "executorMemoryMb"], message: expect.any(String), code: "INVALID" },
      ],
    });
    expect((await gqlOk(t, ws.apiKey, `{ deployments { totalCount } }`)).deployments.totalCount).toBe(before.deployments.totalCount);

    // A whole number field takes no decimal: GraphQL's Int refuses it before core sees it.
    const decimal = await gql(t, ws.apiKey, DEPLOYMENT_CREATE, {
      input: { name: "decimal-workloads", source: "INTERNAL_CONTAINER", sourceConfig: { resourceSpec: { executorMemoryMb: 1.5 } } },
    });
    expect(decimal.errors?.[0]?.message).toContain("executorMemoryMb");

    const d = await createDeployment(t, ws.apiKey, { sourceConfig: { resourceSpec: WORKLOADS } });
    const over = await gqlOk(t, ws.apiKey, UPDATE, { id: d.id, input: { sourceConfig: { resourceSpec: { ...WORKLOADS, orchestratorCpu: 13 } } } });
    expect(over.deploymentUpdate).toEqual({
      deployment: null,
      userErrors: [{ field: ["input", "sourceConfig", "resourceSpec", "orchestratorCpu"], message: expect.stringContaining("orchestrator_cpu_limit"), code: "INVALID" }],
    });
    expect((await gqlOk(t, ws.apiKey, READ, { id: d.id })).node).toEqual({ revisions: { totalCount: 1 }, sourceConfig: { resourceSpec: { cpu: null, ...WORKLOADS } } });
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
    expect(await names({ tagValueIds: ["6f1c1c52-0000-4000-8000-000000000001"] })).toEqual([]);

    const agent = await gqlOk(t, mine.apiKey, `mutation { deploymentCreate(input: {source: INTERNAL_CONTAINER, agent: {agentId: "helper", environment: STAGING}}) { deployment { url } } }`);
    expect(await names({ agentId: "helper" })).toEqual(["helper-staging"]);
    expect(await names({ agentEnvironment: "STAGING" })).toEqual(["helper-staging"]);
    expect(await names({ agentId: "helper", agentEnvironment: "PRODUCTION" })).toEqual([]);
    expect(await names({ url: agent.deploymentCreate.deployment.url })).toEqual(["helper-staging"]);
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
      ["SKIPPED", "registry.example/agent:1"],
    ]);
    const skipped = await gqlOk(t, ws.apiKey, q, { id: d.id, s: ["SKIPPED"] });
    expect(skipped.node.revisions.totalCount).toBe(2);
    expect(skipped.node.revisions.edges.map((e: any) => e.node.status)).toEqual(["SKIPPED", "SKIPPED"]);
  });

  it("takes a revision cursor only on the revisions of the deployment it came from", async () => {
    const withRevisions = async () => {
      const d = await createDeployment(t, ws.apiKey);
      for (let i = 0; i < 2; i++) await gqlOk(t, ws.apiKey, `mutation($d: ID!) { revisionCreate(deploymentId: $d, input: {}) { revision { id } } }`, { d: d.id });
      return d;
    };
    const a = await withRevisions();
    const b = await withRevisions();
    const PAGE = `revisions(first: $first, after: $after, last: $last, before: $before, status: $s) {
      edges { cursor node { id } } pageInfo { hasNextPage hasPreviousPage endCursor } }`;
    const VARS = "$first: Int, $after: String, $last: Int, $before: String, $s: [RevisionStatus!]";
    const q = `query($id: ID!, ${VARS}) { node(id: $id) { ... on Deployment { ${PAGE} } } }`;
    const revisionsOf = async (d: { id: string }, args: Record<string, unknown>) => (await gqlOk(t, ws.apiKey, q, { id: d.id, ...args })).node.revisions;
    const allOfA = await revisionsOf(a, { first: 100 });
    const cursorOfA = allOfA.edges[0].cursor;

    // On its own deployment the cursor pages on, under any status filter (the order is the same).
    expect((await revisionsOf(a, { first: 100, after: cursorOfA })).edges.map((e: any) => e.node.id)).toEqual(allOfA.edges.slice(1).map((e: any) => e.node.id));
    expect((await revisionsOf(a, { first: 100, after: cursorOfA, s: ["SKIPPED"] })).edges).toHaveLength(2);

    // On another deployment it is refused as a forged cursor is, rather than read as a position there.
    for (const args of [{ after: cursorOfA }, { last: 1, before: allOfA.edges[2].cursor }]) {
      const res = await gql(t, ws.apiKey, q, { id: b.id, ...args });
      expect(res.errors, JSON.stringify(args)).toEqual([expect.objectContaining({ path: ["node", "revisions"], extensions: { code: "BAD_USER_INPUT" } })]);
      expect(res.errors![0]!.message).toMatch(/^(after|before): Value error, invalid cursor: pass a cursor from this connection/);
    }

    // Each deployment of one operation takes its own cursor (pages loaded together), and only its own.
    const both = `query($a: ID!, $b: ID!, $ca: String, $cb: String) {
      a: node(id: $a) { ... on Deployment { revisions(first: 1, after: $ca) { edges { node { id } } } } }
      b: node(id: $b) { ... on Deployment { revisions(first: 1, after: $cb) { edges { node { id } } } } } }`;
    const cursorOfB = (await revisionsOf(b, { first: 1 })).pageInfo.endCursor;
    const own = await gqlOk(t, ws.apiKey, both, { a: a.id, b: b.id, ca: cursorOfA, cb: cursorOfB });
    expect(own.a.revisions.edges).toHaveLength(1);
    expect(own.b.revisions.edges).toHaveLength(1);
    const swapped = await gql(t, ws.apiKey, both, { a: a.id, b: b.id, ca: cursorOfB, cb: cursorOfA });
    expect(swapped.errors?.map((e) => e.path)).toEqual(expect.arrayContaining([["a", "revisions"], ["b", "revisions"]]));
    expect(swapped.errors?.every((e) => e.extensions?.code === "BAD_USER_INPUT")).toBe(true);
  });

  it("shows a stored resource spec and listener config field by field, and a stored value of the wrong shape as null", async () => {
    const d = await createDeployment(t, ws.apiKey, {
      sourceConfig: {
        resourceSpec: {
          minScale: 1, maxScale: 3, cpu: 0.5, cpuLimit: 1, memoryMb: 1024, cpuScalingEnabled: true, cpuTargetPercent: 70,
          labels: { team: "core" }, serviceAccountName: "agent", imagePullSecrets: [{ name: "pull" }],
          autoscalingBehavior: { scaleUp: { stabilizationWindowSeconds: 30, selectPolicy: "Max", policies: [{ type: "Pods", value: 2, periodSeconds: 60 }] } },
        },
      },
    });
    const q = `query($id: ID!) { node(id: $id) { ... on Deployment { sourceConfig { listenerConfig { k8sNamespace } resourceSpec {
      minScale maxScale cpu cpuLimit memoryMb memoryLimitMb cpuScalingEnabled cpuTargetPercent queueCpu
      labels annotations serviceAccountName imagePullSecrets { name } volumes { name }
      autoscalingBehavior { scaleUp { stabilizationWindowSeconds selectPolicy policies { type value periodSeconds } } scaleDown { selectPolicy } }
    } } } } }`;
    const stored = await gqlOk(t, ws.apiKey, q, { id: d.id });
    expect(stored.node.sourceConfig.resourceSpec).toEqual({
      minScale: 1, maxScale: 3, cpu: 0.5, cpuLimit: 1, memoryMb: 1024, memoryLimitMb: null, cpuScalingEnabled: true, cpuTargetPercent: 70, queueCpu: null,
      labels: { team: "core" }, annotations: null, serviceAccountName: "agent", imagePullSecrets: [{ name: "pull" }], volumes: null,
      autoscalingBehavior: { scaleUp: { stabilizationWindowSeconds: 30, selectPolicy: "Max", policies: [{ type: "Pods", value: 2, periodSeconds: 60 }] }, scaleDown: null },
    });

    // JSON columns are not typed by the database: what an older version or a hand-made fix stored may
    // have any shape, and shows as null rather than failing the answer.
    const row = await t.app.db.prisma.deployment.findUniqueOrThrow({ where: { id: d.uuid } });
    const config = row.sourceConfig as Prisma.InputJsonObject;
    const setStored = (changes: Prisma.InputJsonObject) =>
      t.app.db.prisma.deployment.update({ where: { id: d.uuid }, data: { sourceConfig: { ...config, ...changes } } });
    await setStored({ listener_config: { k8s_namespace: "agents" } });
    expect((await gqlOk(t, ws.apiKey, q, { id: d.id })).node.sourceConfig.listenerConfig).toEqual({ k8sNamespace: "agents" });

    const wrong = { min_scale: 1.5, max_scale: "3", cpu: "0.5", cpu_limit: true, memory_mb: 1024, cpu_scaling_enabled: "yes", labels: ["team"], service_account_name: 5, image_pull_secrets: { name: "pull" }, autoscaling_behavior: [] };
    await setStored({ resource_spec: wrong, listener_config: { k8s_namespace: 5 } });
    const shown = await gqlOk(t, ws.apiKey, q, { id: d.id });
    expect(shown.node.sourceConfig.listenerConfig).toEqual({ k8sNamespace: null });
    expect(shown.node.sourceConfig.resourceSpec).toEqual({
      minScale: null, maxScale: null, cpu: null, cpuLimit: null, memoryMb: 1024, memoryLimitMb: null, cpuScalingEnabled: null, cpuTargetPercent: null, queueCpu: null,
      labels: null, annotations: null, serviceAccountName: null, imagePullSecrets: null, volumes: null, autoscalingBehavior: null,
    });
  });
});
