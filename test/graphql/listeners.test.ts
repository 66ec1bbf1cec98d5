import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { listenerBody } from "../support/fixtures.js";
import { globalId, gqlOk, restId } from "./support.js";

let t: TestApp;
let ws: NewWorkspace;

beforeAll(async () => {
  t = await startTestApp({ PIPELINE_WORKER: "off" });
  ws = await t.workspace();
});
afterAll(() => t.close());

const FIELDS = "id uuid computeType computeId computeConfig { k8sNamespaces } version createdAt updatedAt";
const CREATE = `mutation($input: ListenerCreateInput!) { listenerCreate(input: $input) { listener { ${FIELDS} } userErrors { field message code } } }`;
const UPDATE = `mutation($id: ID!, $input: ListenerUpdateInput!) { listenerUpdate(id: $id, input: $input) { listener { ${FIELDS} } userErrors { field message code } } }`;
const DELETE = `mutation($id: ID!) { listenerDelete(id: $id) { deletedListenerId userErrors { field message code } } }`;

const input = (computeId: string) => ({ computeType: "K8S", computeId, computeConfig: { k8sNamespaces: ["agents"] }, version: "1.2.0" });

describe("listener mutations", () => {
  it("creates, reads, updates and deletes a listener", async () => {
    const created = (await gqlOk(t, ws.apiKey, CREATE, { input: input("cluster-a") })).listenerCreate;
    expect(created.userErrors).toEqual([]);
    const listener = created.listener;
    expect(listener).toEqual({
      id: expect.any(String),
      uuid: restId(listener.id),
      computeType: "K8S",
      computeId: "cluster-a",
      computeConfig: { k8sNamespaces: ["agents"] },
      version: "1.2.0",
      createdAt: expect.stringMatching(/Z$/),
      updatedAt: expect.stringMatching(/Z$/),
    });
    const rest = await t.request("GET", `/v2/listeners/${listener.uuid}`, { key: ws.apiKey });
    expect(rest.body).toMatchObject({ id: listener.uuid, compute_id: "cluster-a", compute_config: { k8s_namespaces: ["agents"] } });

    const updated = (await gqlOk(t, ws.apiKey, UPDATE, { id: listener.id, input: { version: "1.3.0", computeConfig: null } })).listenerUpdate;
    expect(updated).toEqual({ listener: { ...listener, version: "1.3.0", updatedAt: expect.any(String) }, userErrors: [] });

    const deleted = (await gqlOk(t, ws.apiKey, DELETE, { id: listener.id })).listenerDelete;
    expect(deleted).toEqual({ deletedListenerId: listener.id, userErrors: [] });
    const node = await gqlOk(t, ws.apiKey, `query($id: ID!) { node(id: $id) { id } }`, { id: listener.id });
    expect(node.node).toBeNull();
  });

  it("reports validation problems at the input field and CONFLICT for a duplicate compute id", async () => {
    const bad = (await gqlOk(t, ws.apiKey, CREATE, { input: { ...input(""), version: "", computeConfig: { k8sNamespaces: ["ok", ""] } } }))
      .listenerCreate;
    expect(bad).toEqual({
      listener: null,
      userErrors: [
        { field: ["input", "computeId"], message: "String should have at least 1 character", code: "INVALID" },
        { field: ["input", "computeConfig", "k8sNamespaces", "1"], message: "String should have at least 1 character", code: "INVALID" },
        { field: ["input", "version"], message: "String should have at least 1 character", code: "INVALID" },
      ],
    });
    await gqlOk(t, ws.apiKey, CREATE, { input: input("dup") });
    const dup = (await gqlOk(t, ws.apiKey, CREATE, { input: input("dup") })).listenerCreate;
    expect(dup).toEqual({ listener: null, userErrors: [{ field: ["input", "computeId"], message: expect.stringContaining("dup"), code: "CONFLICT" }] });

    const listener = (await gqlOk(t, ws.apiKey, CREATE, { input: input("to-update") })).listenerCreate.listener;
    const badUpdate = (await gqlOk(t, ws.apiKey, UPDATE, { id: listener.id, input: { version: "" } })).listenerUpdate;
    expect(badUpdate).toEqual({ listener: null, userErrors: [{ field: ["input", "version"], message: expect.any(String), code: "INVALID" }] });
  });

  it("keeps another workspace's listeners out of reach: NOT_FOUND for update and delete", async () => {
    const listener = (await gqlOk(t, ws.apiKey, CREATE, { input: input("private") })).listenerCreate.listener;
    const intruder = await t.workspace();
    const upd = (await gqlOk(t, intruder.apiKey, UPDATE, { id: listener.id, input: { version: "9" } })).listenerUpdate;
    expect(upd).toEqual({ listener: null, userErrors: [{ field: ["id"], message: expect.stringContaining("not found"), code: "NOT_FOUND" }] });
    const del = (await gqlOk(t, intruder.apiKey, DELETE, { id: listener.id })).listenerDelete;
    expect(del).toEqual({ deletedListenerId: null, userErrors: [{ field: ["id"], message: expect.any(String), code: "NOT_FOUND" }] });
    const list = await gqlOk(t, intruder.apiKey, `{ listeners { totalCount edges { node { id } } } }`);
    expect(list.listeners).toEqual({ totalCount: 0, edges: [] });
    const still = await gqlOk(t, ws.apiKey, `query($id: ID!) { node(id: $id) { ... on Listener { version } } }`, { id: listener.id });
    expect(still.node).toEqual({ version: "1.2.0" });
  });

  it("shows k8sNamespaces as stored, as REST does: null (the listener's own namespace) is not [] (none)", async () => {
    const READ = `query($id: ID!) { node(id: $id) { ... on Listener { computeConfig { k8sNamespaces } } } }`;
    for (const namespaces of [null, [], ["agents"]]) {
      const what = JSON.stringify(namespaces);
      const rest = await t.request("POST", "/v2/listeners", { key: ws.apiKey, body: listenerBody({ compute_config: { k8s_namespaces: namespaces } }) });
      expect(rest.status, what).toBe(201);
      expect(rest.body.compute_config, what).toEqual({ k8s_namespaces: namespaces });
      const read = await gqlOk(t, ws.apiKey, READ, { id: globalId("Listener", rest.body.id) });
      expect(read.node.computeConfig, what).toEqual({ k8sNamespaces: namespaces });

      const created = (await gqlOk(t, ws.apiKey, CREATE, { input: { ...input(`ns-${randomUUID()}`), computeConfig: { k8sNamespaces: namespaces } } })).listenerCreate;
      expect(created.listener.computeConfig, what).toEqual({ k8sNamespaces: namespaces });
      const again = await t.request("GET", `/v2/listeners/${created.listener.uuid}`, { key: ws.apiKey });
      expect(again.body.compute_config, what).toEqual({ k8s_namespaces: namespaces });
    }
  });
});
