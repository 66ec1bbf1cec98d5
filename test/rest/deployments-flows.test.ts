import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { listenerBody } from "../support/fixtures.js";

let t: TestApp;
let ws: NewWorkspace;

beforeAll(async () => {
  t = await startTestApp({ PIPELINE_WORKER: "off" });
  ws = await t.workspace();
});
afterAll(() => t.close());

/** The statuses a client knows; it breaks on any other. */
const KNOWN = ["CREATING", "QUEUED", "AWAITING_BUILD", "BUILDING", "AWAITING_DEPLOY", "DEPLOYING", "DEPLOYED", "CREATE_FAILED", "BUILD_FAILED", "DEPLOY_FAILED", "SKIPPED", "INTERRUPTED"];

describe("COMPAT.md client flows, up to where polling starts", () => {
  it("a CI script: create, find the revision, patch, find the new revision, delete", async () => {
    const inst = await t.app.db.prisma.codehostInstallation.create({
      data: { workspaceId: ws.workspaceId, installationId: 4242, name: "ci-org" },
    });
    const headers = { "X-Api-Key": ws.apiKey, "Content-Type": "application/json" };
    const created = await t.request("POST", "/v2/deployments", {
      headers,
      body: {
        name: "ci-agent",
        source: "codehost",
        source_config: { integration_id: inst.id, repo_url: "https://forge.example/ci-org/agent", deployment_type: "dev", build_on_push: false },
        source_revision_config: { repo_ref: "main", framework_config_path: "agent.json" },
        secrets: [{ name: "OPENAI_API_KEY", value: "ci-secret-value" }],
      },
    });
    expect(created.status).toBe(201);
    const id: string = created.body.id;

    const revisions = await t.request("GET", `/v2/deployments/${id}/revisions`, { headers });
    expect(revisions.status).toBe(200);
    const rid: string = revisions.body.resources[0].id;
    expect(rid).toBe(created.body.latest_revision_id);

    // The first poll: a known, not failed status.
    const polled = await t.request("GET", `/v2/deployments/${id}/revisions/${rid}`, { headers });
    expect(polled.status).toBe(200);
    expect(KNOWN).toContain(polled.body.status);
    expect(polled.body.status).not.toContain("FAILED");

    const patched = await t.request("PATCH", `/v2/deployments/${id}`, {
      headers,
      body: { source_revision_config: { repo_ref: "v2", framework_config_path: "agent.json" } },
    });
    expect(patched.status).toBe(200);

    const after = await t.request("GET", `/v2/deployments/${id}/revisions`, { headers });
    const newRid: string = after.body.resources[0].id;
    expect(newRid).not.toBe(rid);
    const polledAgain = await t.request("GET", `/v2/deployments/${id}/revisions/${newRid}`, { headers });
    expect(polledAgain.body).toMatchObject({ status: "CREATING", source_revision_config: { repo_ref: "v2" } });

    for (const res of [created, revisions, polled, patched, after, polledAgain]) expect(res.text).not.toContain("ci-secret-value");

    const deleted = await t.request("DELETE", `/v2/deployments/${id}`, { headers });
    expect(deleted.status).toBe(204);
    expect(deleted.text).toBe("");
  });

  it("a command-line tool: look up by name, create, push an image, take the newest revision", async () => {
    const key = ws.apiKey;
    const find = async (name: string) => {
      const res = await t.request("GET", `/v2/deployments?name_contains=${encodeURIComponent(name)}&limit=100`, { key });
      expect(res.status).toBe(200);
      return res.body.resources.find((d: { name: string }) => d.name === name);
    };
    // A similar name exists; the tool matches exactly.
    await t.request("POST", "/v2/deployments", { key, body: { name: "my-app-old", source: "internal_container", source_config: { deployment_type: "dev" }, source_revision_config: {} } });
    expect(await find("my-app")).toBeUndefined();

    const created = await t.request("POST", "/v2/deployments", {
      key,
      body: { name: "my-app", source: "internal_container", source_config: { deployment_type: "dev" }, source_revision_config: {} },
    });
    expect(created.status).toBe(201);
    expect((await find("my-app")).id).toBe(created.body.id);

    const pushed = await t.request("PATCH", `/v2/deployments/${created.body.id}`, {
      key,
      body: { revision_source: "internal_container", source_revision_config: { image_uri: "registry.example/my-app:abc123" } },
    });
    expect(pushed.status).toBe(200);

    const newest = await t.request("GET", `/v2/deployments/${created.body.id}/revisions?limit=1`, { key });
    expect(newest.body.resources).toHaveLength(1);
    const revision = newest.body.resources[0];
    expect(revision.id).toBe(pushed.body.latest_revision_id);
    expect(revision.source_revision_config.image_uri).toBe("registry.example/my-app:abc123");
    const polled = await t.request("GET", `/v2/deployments/${created.body.id}/revisions/${revision.id}`, { key });
    expect(polled.status).toBe(200);
    expect(KNOWN).toContain(polled.body.status);
  });
});

describe("tenant isolation", () => {
  it("another workspace gets 404 on every endpoint for these objects, sees none in lists, and changes nothing", async () => {
    const listener = await t.request("POST", "/v2/listeners", { key: ws.apiKey, body: listenerBody({ compute_id: "iso" }) });
    const d = (
      await t.request("POST", "/v2/deployments", {
        key: ws.apiKey,
        body: { name: "private", source: "external_container", source_config: { listener_id: listener.body.id }, source_revision_config: { image_uri: "r/i:1" } },
      })
    ).body;
    const before = await t.request("GET", `/v2/deployments/${d.id}`, { key: ws.apiKey });
    const rid = d.latest_revision_id;
    const intruder = await t.workspace();
    const base = `/v2/deployments/${d.id}`;
    const calls: [string, string, unknown?][] = [
      ["GET", base],
      ["PATCH", base, { shareable: true }],
      ["PATCH", base, { source_revision_config: { image_uri: "evil/i:1" } }],
      ["DELETE", base],
      ["GET", `${base}/revisions`],
      ["POST", `${base}/revisions`, {}],
      ["GET", `${base}/revisions/${rid}`],
      ["POST", `${base}/revisions/${rid}/redeploy`],
      ["POST", `${base}/revisions/${rid}/interrupt`],
      ["DELETE", `/v2/deployments?deployment_ids=${d.id}`],
    ];
    for (const [method, path, body] of calls) {
      const res = await t.request(method, path, { key: intruder.apiKey, body });
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(typeof res.body.detail).toBe("string");
    }
    for (const query of ["", `deployment_ids=${d.id}`, "name=private", "remote_reconciled=true"]) {
      expect((await t.request("GET", `/v2/deployments?${query}`, { key: intruder.apiKey })).body.resources).toEqual([]);
    }

    // Their own deployment cannot reach this workspace's revisions or listener either.
    const own = (await t.request("POST", "/v2/deployments", { key: intruder.apiKey, body: { name: "own", source: "internal_container" } })).body;
    expect((await t.request("GET", `/v2/deployments/${own.id}/revisions/${rid}`, { key: intruder.apiKey })).status).toBe(404);
    expect((await t.request("POST", `/v2/deployments/${own.id}/revisions/${rid}/redeploy`, { key: intruder.apiKey })).status).toBe(404);
    expect((await t.request("POST", `/v2/deployments/${own.id}/revisions/${rid}/interrupt`, { key: intruder.apiKey })).status).toBe(404);
    const borrowed = await t.request("POST", "/v2/deployments", {
      key: intruder.apiKey,
      body: { name: "borrow", source: "external_container", source_config: { listener_id: listener.body.id }, source_revision_config: { image_uri: "r/i:1" } },
    });
    expect(borrowed.status).toBe(400);

    const after = await t.request("GET", `/v2/deployments/${d.id}`, { key: ws.apiKey });
    expect(after.body).toEqual(before.body);
    const revisions = await t.request("GET", `${base}/revisions`, { key: ws.apiKey });
    expect(revisions.body.resources.map((r: { id: string; status: string }) => [r.id, r.status])).toEqual([[rid, "CREATING"]]);
  });

  it("an organisation-wide key reaches a workspace only through X-Tenant-Id", async () => {
    const org = await t.workspace({ orgWide: true });
    const created = await t.request("POST", "/v2/deployments", {
      key: org.apiKey,
      headers: { "X-Tenant-ID": org.workspaceId },
      body: { name: "org-made", source: "internal_container" },
    });
    expect(created.status).toBe(201);
    expect(created.body.tenant_id).toBe(org.workspaceId);
    expect((await t.request("GET", `/v2/deployments/${created.body.id}`, { key: org.apiKey })).status).toBe(403);
    expect((await t.request("GET", `/v2/deployments/${created.body.id}`, { key: org.apiKey, headers: { "X-Tenant-Id": randomUUID() } })).status).toBe(403);
    expect((await t.request("GET", `/v2/deployments/${created.body.id}`, { key: org.apiKey, headers: { "X-Tenant-Id": org.workspaceId } })).status).toBe(200);
  });
});
