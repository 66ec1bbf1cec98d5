import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { createDeployment, gqlOk } from "./support.js";

/** deploymentPushTokenCreate and deploymentUploadUrlCreate: the REST endpoints' core functions, as mutations. */

let t: TestApp;
let ws: NewWorkspace;

beforeAll(async () => {
  t = await startTestApp({ PIPELINE_WORKER: "off", REGISTRY_URL: "https://registry.example.com/agents" });
  ws = await t.workspace();
});
afterAll(() => t.close());

const PUSH = `mutation($id: ID!) { deploymentPushTokenCreate(deploymentId: $id) { token registryUrl expiresAt userErrors { field message code } } }`;
const UPLOAD = `mutation($id: ID!) { deploymentUploadUrlCreate(deploymentId: $id) { uploadUrl objectPath expiresAt userErrors { field message code } } }`;

describe("build mutations", () => {
  it("issue a push token for an internal_container deployment, under REGISTRY_URL's path", async () => {
    const d = await createDeployment(t, ws.apiKey);
    const { deploymentPushTokenCreate: p } = await gqlOk(t, ws.apiKey, PUSH, { id: d.id });
    t.guard.issued(p.token);
    expect(p).toEqual({
      token: expect.stringMatching(/^dcp_push_/),
      registryUrl: `https://registry.example.com/agents/${ws.workspaceId}/${d.uuid}`,
      expiresAt: expect.any(String),
      userErrors: [],
    });
  });

  it("refuse a push token for another source with the REST answer's words, and an unknown id as NOT_FOUND", async () => {
    const d = await createDeployment(t, ws.apiKey, { source: "INTERNAL_SOURCE", sourceRevisionConfig: {} });
    const { deploymentPushTokenCreate: p } = await gqlOk(t, ws.apiKey, PUSH, { id: d.id });
    expect(p).toMatchObject({ token: null, registryUrl: null, userErrors: [{ field: null, code: "NOT_ALLOWED", message: expect.stringContaining("only available for 'internal_container' source deployments") }] });
    const missing = await gqlOk(t, ws.apiKey, PUSH, { id: Buffer.from("Deployment:00000000-0000-4000-8000-000000000001").toString("base64") });
    expect(missing.deploymentPushTokenCreate.userErrors).toEqual([expect.objectContaining({ field: ["deploymentId"], code: "NOT_FOUND" })]);
  });

  it("issue an upload URL on the request's origin, and the object path to set", async () => {
    const d = await createDeployment(t, ws.apiKey, { source: "INTERNAL_SOURCE", sourceRevisionConfig: {} });
    const { deploymentUploadUrlCreate: u } = await gqlOk(t, ws.apiKey, UPLOAD, { id: d.id });
    t.guard.issued(new URL(u.uploadUrl).searchParams.get("signature")!);
    expect(u.userErrors).toEqual([]);
    expect(u.objectPath).toMatch(new RegExp(`^uploads/${d.uuid}/[0-9a-f-]{36}\\.tar\\.gz$`));
    expect(u.uploadUrl.startsWith(`http://test/${u.objectPath}?expires=`)).toBe(true);
  });
});
