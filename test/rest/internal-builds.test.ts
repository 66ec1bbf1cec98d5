import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, type TestApp } from "../support/app.js";

/**
 * SPEC.md's error for internal image builds requested on a cloud provider where they are unsupported:
 * with INTERNAL_IMAGE_BUILDS=off, every way to a new internal_container revision answers 400 with a
 * {detail} that says so and points to a remote build from source, and changes nothing.
 */
let t: TestApp;
let ws: NewWorkspace;
beforeAll(async () => {
  t = await startTestApp({ PIPELINE_WORKER: "off", INTERNAL_IMAGE_BUILDS: "off", CLOUD_PROVIDER: "aws" });
  ws = await t.workspace();
});
afterAll(() => t.close());

const call = (method: string, path: string, body?: unknown) => t.request(method, path, { key: ws.apiKey, body });
const FROM_SOURCE = { framework_config_path: "agent.json", source_tarball_path: "s3://bucket/agent.tgz" };

function expectUnavailable(res: { status: number; body: { detail: unknown } }) {
  expect(res.status).toBe(400);
  expect(res.body).toEqual({ detail: expect.stringContaining("Internal image builds (internal_container) are not yet available on aws") });
  expect(res.body.detail).toContain('revision_source "internal_source"');
}

async function fromSource(name: string) {
  const res = await call("POST", "/v2/deployments", { name, source: "internal_source", source_revision_config: FROM_SOURCE });
  expect(res.status).toBe(201);
  return res.body as { id: string; latest_revision_id: string };
}

const revisionCount = async (deploymentId: string) => t.app.db.prisma.revision.count({ where: { deploymentId } });

describe("internal image builds turned off (INTERNAL_IMAGE_BUILDS=off, CLOUD_PROVIDER=aws)", () => {
  it("refuses create-revision with revision_source internal_container, and creates nothing", async () => {
    const d = await fromSource("remote-built");
    const res = await call("POST", `/v2/deployments/${d.id}/revisions`, { revision_source: "internal_container", source_revision_config: { image_uri: "r.example/a:2" } });
    expectUnavailable(res);
    expect(await revisionCount(d.id)).toBe(1);
    // The advised way works.
    const remote = await call("POST", `/v2/deployments/${d.id}/revisions`, { revision_source: "internal_source", source_revision_config: FROM_SOURCE });
    expect(remote.status).toBe(201);
    expect(remote.body.source).toBe("internal_source");
  });

  it("refuses PATCH that would build one, and creating an internal_container deployment", async () => {
    const d = await fromSource("patched");
    expectUnavailable(await call("PATCH", `/v2/deployments/${d.id}`, { revision_source: "internal_container", source_revision_config: { image_uri: "r.example/a:3" } }));
    expect(await revisionCount(d.id)).toBe(1);
    // A change that makes no revision is still fine.
    expect((await call("PATCH", `/v2/deployments/${d.id}`, { shareable: true })).status).toBe(200);

    const before = await t.app.db.prisma.deployment.count({ where: { workspaceId: ws.workspaceId } });
    expectUnavailable(await call("POST", "/v2/deployments", { name: "pushed-image", source: "internal_container", source_config: { deployment_type: "dev" }, source_revision_config: {} }));
    expect(await t.app.db.prisma.deployment.count({ where: { workspaceId: ws.workspaceId } })).toBe(before);
  });

  it("refuses redeploying a revision built from a pushed image before builds were turned off", async () => {
    const d = await fromSource("rolled-back");
    await t.app.db.prisma.revision.update({ where: { id: d.latest_revision_id }, data: { source: "internal_container", status: "DEPLOYED" } });
    expectUnavailable(await call("POST", `/v2/deployments/${d.id}/revisions/${d.latest_revision_id}/redeploy`));
    expect(await revisionCount(d.id)).toBe(1);
  });

  it("is a userError over GraphQL too", async () => {
    const d = await fromSource("graphql");
    const res = await call("POST", "/graphql", {
      query: `mutation($id: ID!) { revisionCreate(deploymentId: $id, input: { revisionSource: INTERNAL_CONTAINER, sourceRevisionConfig: { imageUri: "r.example/a:4" } }) { revision { id } userErrors { code message } } }`,
      variables: { id: Buffer.from(`Deployment:${d.id}`).toString("base64") },
    });
    expect(res.status).toBe(200);
    expect(res.body.data.revisionCreate.revision).toBeNull();
    expect(res.body.data.revisionCreate.userErrors).toEqual([{ code: expect.any(String), message: expect.stringContaining("not yet available on aws") }]);
    expect(await revisionCount(d.id)).toBe(1);
  });
});

describe("CLOUD_PROVIDER and INTERNAL_IMAGE_BUILDS settings", () => {
  it("refuse bad values at start", async () => {
    await expect(startTestApp({ INTERNAL_IMAGE_BUILDS: "maybe" })).rejects.toThrow(/INTERNAL_IMAGE_BUILDS/);
    await expect(startTestApp({ CLOUD_PROVIDER: "a/b\n" })).rejects.toThrow(/CLOUD_PROVIDER/);
  });
});
