import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { applyTransition } from "../../src/core/transitions.js";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { createDeployment, gqlOk, restId } from "./support.js";

let t: TestApp;
let ws: NewWorkspace;

// Statuses are driven by hand here, through core's one transition path.
beforeAll(async () => {
  t = await startTestApp({ PIPELINE_WORKER: "off" });
  ws = await t.workspace();
});
afterAll(() => t.close());

const advance = (revisionGlobalId: string, times: number) =>
  (async () => {
    for (let i = 0; i < times; i++) await applyTransition(t.app.deps, { revisionId: restId(revisionGlobalId), event: "advance" });
  })();

const CREATE = `mutation($d: ID!, $i: RevisionCreateInput!) { revisionCreate(deploymentId: $d, input: $i) {
  revision { id uuid status source sourceRevisionConfig { imageUri } deployment { id } } userErrors { field message code } } }`;
const REDEPLOY = `mutation($id: ID!) { revisionRedeploy(id: $id) {
  deployment { id latestRevision { id } } revision { id status sourceRevisionConfig { imageUri } } userErrors { field message code } } }`;
const INTERRUPT = `mutation($id: ID!) { revisionInterrupt(id: $id) { revision { id status statusMessage } userErrors { field message code } } }`;

describe("revisionCreate", () => {
  it("always creates a revision, which becomes the deployment's latest", async () => {
    const d = await createDeployment(t, ws.apiKey, { sourceRevisionConfig: { imageUri: "r/a:1" } });
    const res = (await gqlOk(t, ws.apiKey, CREATE, { d: d.id, i: {} })).revisionCreate;
    expect(res.userErrors).toEqual([]);
    expect(res.revision).toMatchObject({ status: "CREATING", source: "INTERNAL_CONTAINER", sourceRevisionConfig: { imageUri: "r/a:1" }, deployment: { id: d.id } });
    const latest = await gqlOk(t, ws.apiKey, `query($id: ID!) { node(id: $id) { ... on Deployment { latestRevision { id } } } }`, { id: d.id });
    expect(latest.node.latestRevision.id).toBe(res.revision.id);
  });

  it("names invalid input fields, and the deployment id when it is not visible", async () => {
    const d = await createDeployment(t, ws.apiKey);
    const bad = (await gqlOk(t, ws.apiKey, CREATE, { d: d.id, i: { sourceRevisionConfig: { frameworkConfigPath: "langgraph.json" } } })).revisionCreate;
    expect(bad).toEqual({
      revision: null,
      userErrors: [{ field: ["input", "sourceRevisionConfig", "frameworkConfigPath"], message: expect.stringContaining("must be null"), code: "INVALID" }],
    });
    const other = await t.workspace();
    const foreign = (await gqlOk(t, other.apiKey, CREATE, { d: d.id, i: {} })).revisionCreate;
    expect(foreign).toEqual({ revision: null, userErrors: [{ field: ["deploymentId"], message: expect.stringContaining("not found"), code: "NOT_FOUND" }] });
  });
});

describe("revisionRedeploy", () => {
  it("makes a new revision from an earlier one's configuration", async () => {
    const d = await createDeployment(t, ws.apiKey, { sourceRevisionConfig: { imageUri: "r/b:1" } });
    await gqlOk(t, ws.apiKey, CREATE, { d: d.id, i: { sourceRevisionConfig: { imageUri: "r/b:2" } } });
    const res = (await gqlOk(t, ws.apiKey, REDEPLOY, { id: d.revisionId })).revisionRedeploy;
    expect(res.userErrors).toEqual([]);
    expect(res.revision).toMatchObject({ status: "CREATING", sourceRevisionConfig: { imageUri: "r/b:1" } });
    expect(res.revision.id).not.toBe(d.revisionId);
    expect(res.deployment).toEqual({ id: d.id, latestRevision: { id: res.revision.id } });
  });

  it("answers NOT_FOUND for a revision of another workspace", async () => {
    const d = await createDeployment(t, ws.apiKey);
    const other = await t.workspace();
    const res = (await gqlOk(t, other.apiKey, REDEPLOY, { id: d.revisionId })).revisionRedeploy;
    expect(res).toEqual({ deployment: null, revision: null, userErrors: [{ field: ["id"], message: expect.any(String), code: "NOT_FOUND" }] });
  });
});

describe("revisionInterrupt", () => {
  it("interrupts a revision in progress, records it in the event log, and refuses a finished one", async () => {
    const d = await createDeployment(t, ws.apiKey);
    await advance(d.revisionId, 2);
    const res = (await gqlOk(t, ws.apiKey, INTERRUPT, { id: d.revisionId })).revisionInterrupt;
    expect(res).toEqual({ revision: { id: d.revisionId, status: "INTERRUPTED", statusMessage: expect.any(String) }, userErrors: [] });
    const log = await gqlOk(t, ws.apiKey, `query($id: ID!) { node(id: $id) { ... on Revision { events { from to } } } }`, { id: d.revisionId });
    expect(log.node.events).toEqual([
      { from: null, to: "CREATING" },
      { from: "CREATING", to: "QUEUED" },
      { from: "QUEUED", to: "AWAITING_BUILD" },
      { from: "AWAITING_BUILD", to: "INTERRUPTED" },
    ]);
    const again = (await gqlOk(t, ws.apiKey, INTERRUPT, { id: d.revisionId })).revisionInterrupt;
    expect(again).toEqual({ revision: null, userErrors: [{ field: null, message: expect.stringContaining("INTERRUPTED"), code: "NOT_ALLOWED" }] });
  });

  it("answers NOT_FOUND for an id that is not a revision's", async () => {
    const d = await createDeployment(t, ws.apiKey);
    const res = (await gqlOk(t, ws.apiKey, INTERRUPT, { id: d.id })).revisionInterrupt;
    expect(res).toEqual({ revision: null, userErrors: [{ field: ["id"], message: expect.any(String), code: "NOT_FOUND" }] });
  });
});
