import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { storeToken } from "../support/oauth.js";
import { createDeployment, gql, globalId, gqlOk } from "./support.js";

let t: TestApp;
let ws: NewWorkspace;
let other: NewWorkspace;

beforeAll(async () => {
  t = await startTestApp({ PIPELINE_WORKER: "off" });
  ws = await t.workspace();
  other = await t.workspace();
});
afterAll(() => t.close());

const NODES = `query($ids: [ID!]!) { nodes(ids: $ids) { __typename id ... on Deployment { name } ... on Revision { status } ... on Listener { computeId } ... on Workspace { uuid } } }`;

describe("node and nodes", () => {
  it("resolves every node type by global id, in input order, with null where nothing is visible", async () => {
    const d = await createDeployment(t, ws.apiKey, { name: "noded" });
    const listener = (await gqlOk(t, ws.apiKey, `mutation { listenerCreate(input: {computeType: K8S, computeId: "n1", version: "1", computeConfig: {k8sNamespaces: ["default"]}}) { listener { id } } }`))
      .listenerCreate.listener.id as string;
    const installation = (
      await gqlOk(t, ws.apiKey, `mutation { codehostInstallationRegister(input: {installationId: 7, name: "n"}) { codehostInstallation { id } } }`)
    ).codehostInstallationRegister.codehostInstallation.id as string;
    const connection = (
      await gqlOk(t, ws.apiKey, `mutation($o: String!) { agentConnectionCreate(agentId: "a", input: {oauthTokenId: $o}) { agentConnection { id } } }`, {
        o: (await storeToken(t, ws.apiKey)).id,
      })
    ).agentConnectionCreate.agentConnection.id as string;
    const viewer = (await gqlOk(t, ws.apiKey, `{ viewer { id uuid name } }`)).viewer;
    expect(viewer.uuid).toBe(ws.workspaceId);

    const foreign = await createDeployment(t, other.apiKey);
    const ids = [
      listener,
      d.revisionId,
      "garbage!",
      d.id,
      globalId("Deployment", "11111111-1111-4111-8111-111111111111"),
      foreign.id,
      globalId("NoSuchType", d.uuid),
      installation,
      connection,
      viewer.id,
      globalId("Workspace", other.workspaceId),
      d.id,
      // Only the ids the API gives are ids: another spelling of one (its uuid in capitals) would be a
      // second id of the same object in a client's cache, whose refetch answered another id.
      globalId("Deployment", d.uuid.toUpperCase()),
    ];
    const data = await gqlOk(t, ws.apiKey, NODES, { ids });
    expect(data.nodes).toEqual([
      { __typename: "Listener", id: listener, computeId: "n1" },
      { __typename: "Revision", id: d.revisionId, status: "CREATING" },
      null,
      { __typename: "Deployment", id: d.id, name: "noded" },
      null,
      null,
      null,
      { __typename: "CodehostInstallation", id: installation },
      { __typename: "AgentConnection", id: connection },
      { __typename: "Workspace", id: viewer.id, uuid: ws.workspaceId },
      null,
      { __typename: "Deployment", id: d.id, name: "noded" },
      null,
    ]);
    for (const id of ids) {
      const one = await gqlOk(t, ws.apiKey, `query($id: ID!) { node(id: $id) { id } }`, { id });
      expect(one.node, id).toEqual(data.nodes[ids.indexOf(id)] ? { id } : null);
    }
  });

  it("caps nodes at 100 ids", async () => {
    const ids = Array.from({ length: 101 }, (_, i) => globalId("Deployment", `00000000-0000-4000-8000-${String(i).padStart(12, "0")}`));
    const res = await gql(t, ws.apiKey, `query($ids: [ID!]!) { nodes(ids: $ids) { id } }`, { ids });
    expect(res.data).toBeNull();
    expect(res.errors).toEqual([expect.objectContaining({ message: expect.stringContaining("at most 100"), extensions: { code: "BAD_USER_INPUT" } })]);
    const ok = await gqlOk(t, ws.apiKey, `query($ids: [ID!]!) { nodes(ids: $ids) { id } }`, { ids: ids.slice(0, 100) });
    expect(ok.nodes).toHaveLength(100);
    expect(ok.nodes.every((n: unknown) => n === null)).toBe(true);
  });
});

describe("tenant isolation", () => {
  it("keeps every connection to the caller's workspace", async () => {
    const mine = await t.workspace();
    const theirs = await t.workspace();
    await createDeployment(t, theirs.apiKey);
    await gqlOk(t, theirs.apiKey, `mutation { listenerCreate(input: {computeType: K8S, computeId: "t", version: "1", computeConfig: {k8sNamespaces: ["default"]}}) { listener { id } } }`);
    await gqlOk(t, theirs.apiKey, `mutation { codehostInstallationRegister(input: {installationId: 9, name: "t"}) { codehostInstallation { id } } }`);
    await gqlOk(t, theirs.apiKey, `mutation($o: String!) { agentConnectionCreate(agentId: "shared-name", input: {oauthTokenId: $o}) { agentConnection { id } } }`, {
      o: (await storeToken(t, theirs.apiKey)).id,
    });
    const data = await gqlOk(
      t,
      mine.apiKey,
      `{ deployments { totalCount edges { node { id } } } listeners { totalCount } codehostInstallations { totalCount }
         agentConnections(agentId: "shared-name") { totalCount edges { node { id } } } }`,
    );
    expect(data).toEqual({
      deployments: { totalCount: 0, edges: [] },
      listeners: { totalCount: 0 },
      codehostInstallations: { totalCount: 0 },
      agentConnections: { totalCount: 0, edges: [] },
    });
  });

  it("answers an unauthenticated request 401 and a key for another workspace 403, with codes", async () => {
    const none = await gql(t, null, `{ viewer { id } }`);
    expect(none.status).toBe(401);
    expect(none.errors).toEqual([expect.objectContaining({ extensions: { code: "UNAUTHENTICATED" } })]);
    const wrong = await gql(t, ws.apiKey, `{ viewer { id } }`, undefined, { "x-tenant-id": other.workspaceId });
    expect(wrong.status).toBe(403);
    expect(wrong.errors).toEqual([expect.objectContaining({ extensions: { code: "FORBIDDEN" } })]);
    const bad = await gql(t, "dcp_not-a-real-key", `{ viewer { id } }`);
    expect(bad.status).toBe(401);
  });

  it("accepts a bearer token like REST does", async () => {
    const { SignJWT } = await import("jose");
    const { TEST_JWT_SECRET } = await import("../support/app.js");
    const token = await new SignJWT({ tenant_id: ws.workspaceId, sub: "dash-user" })
      .setProtectedHeader({ alg: "HS256" })
      .setExpirationTime("5m")
      .sign(new TextEncoder().encode(TEST_JWT_SECRET));
    const res = await gql(t, null, `{ viewer { uuid } }`, undefined, { authorization: `Bearer ${token}` });
    expect(res.status).toBe(200);
    expect(res.data).toEqual({ viewer: { uuid: ws.workspaceId } });
  });
});
