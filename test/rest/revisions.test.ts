import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import type { DomainEvent } from "../../src/events/types.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { ANY_UUID, listenerBody } from "../support/fixtures.js";

let t: TestApp;
let ws: NewWorkspace;

beforeAll(async () => {
  t = await startTestApp({ PIPELINE_WORKER: "off" });
  ws = await t.workspace();
});
afterAll(() => t.close());

const iso = expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
let counter = 0;

async function create(body: Record<string, unknown> = {}) {
  const res = await t.request("POST", "/v2/deployments", {
    key: ws.apiKey,
    body: { name: `rev-${++counter}`, source: "internal_container", ...body },
  });
  expect(res.status).toBe(201);
  return res.body;
}
const revisionsPath = (id: string) => `/v2/deployments/${id}/revisions`;
const get = (path: string) => t.request("GET", path, { key: ws.apiKey });
const post = (path: string, body?: unknown) => t.request("POST", path, { key: ws.apiKey, body });
const setStatus = (id: string, status: string) => t.app.db.prisma.revision.update({ where: { id }, data: { status } });

describe("GET /v2/deployments/{id}/revisions", () => {
  it("lists newest first, pages by limit and offset, filters by status and remote_reconciled", async () => {
    const d = await create();
    const ids = [d.latest_revision_id];
    for (let i = 1; i <= 4; i++) ids.unshift((await post(revisionsPath(d.id), { source_revision_config: { image_uri: `r/a:${i}` } })).body.id);

    const all = await get(revisionsPath(d.id));
    expect(all.status).toBe(200);
    expect(all.body.resources.map((r: { id: string }) => r.id)).toEqual(ids);
    expect(all.body.offset).toBe(5);
    const one = await get(`${revisionsPath(d.id)}?limit=1`);
    expect(one.body.resources.map((r: { id: string }) => r.id)).toEqual([ids[0]]);
    expect(one.body.offset).toBe(1);
    const page = await get(`${revisionsPath(d.id)}?limit=2&offset=3`);
    expect(page.body).toMatchObject({ resources: [{ id: ids[3] }, { id: ids[4] }], offset: 5 });
    expect((await get(`${revisionsPath(d.id)}?offset=9`)).body).toEqual({ resources: [], offset: 9 });

    // Each newer revision supersedes the older ones that had not started: they are SKIPPED.
    const byStatus = async (status: string) =>
      (await get(`${revisionsPath(d.id)}?status=${status}`)).body.resources.map((r: { id: string }) => r.id);
    expect(await byStatus("CREATING")).toEqual([ids[0]]);
    expect(await byStatus("SKIPPED")).toEqual(ids.slice(1));
    await setStatus(ids[4]!, "DEPLOYED");
    await setStatus(ids[3]!, "BUILD_FAILED");
    expect(await byStatus("DEPLOYED,BUILD_FAILED")).toEqual([ids[3], ids[4]]);
    expect(await byStatus("CREATING,DEPLOYED")).toEqual([ids[0], ids[4]]);
    expect((await get(`${revisionsPath(d.id)}?remote_reconciled=true`)).body.resources).toEqual([]);
    expect((await get(`${revisionsPath(d.id)}?remote_reconciled=false`)).body.resources).toHaveLength(5);
  });

  it("marks self-hosted revisions remote_reconciled", async () => {
    const listener = await t.request("POST", "/v2/listeners", { key: ws.apiKey, body: listenerBody({ compute_id: "rr" }) });
    const d = await create({ source: "external_container", source_config: { listener_id: listener.body.id }, source_revision_config: { image_uri: "r/i:1" } });
    const res = await get(`${revisionsPath(d.id)}?remote_reconciled=true`);
    expect(res.body.resources.map((r: { id: string }) => r.id)).toEqual([d.latest_revision_id]);
  });

  it("answers 404 for an unknown deployment and 422 for bad parameters", async () => {
    const id = randomUUID();
    const missing = await get(revisionsPath(id));
    expect(missing.status).toBe(404);
    expect(missing.body).toEqual({ detail: `Deployment ID ${id} not found.` });
    const d = await create();
    for (const [query, loc] of [
      ["limit=0", ["query", "limit"]],
      ["offset=-2", ["query", "offset"]],
      ["remote_reconciled=perhaps", ["query", "remote_reconciled"]],
    ] as const) {
      const res = await get(`${revisionsPath(d.id)}?${query}`);
      expect(res.status, query).toBe(422);
      expect(res.body.detail[0].loc, query).toEqual(loc);
    }
    const bad = await get("/v2/deployments/xyz/revisions");
    expect(bad.status).toBe(422);
    expect(bad.body.detail[0]).toMatchObject({ loc: ["path", "deployment_id"], type: "uuid_parsing" });
  });
});

describe("GET /v2/deployments/{id}/revisions/{revision_id}", () => {
  it("answers SPEC.md's Revision", async () => {
    const d = await create({ source_revision_config: { image_uri: "r/a:1" } });
    const res = await get(`${revisionsPath(d.id)}/${d.latest_revision_id}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      id: d.latest_revision_id,
      created_at: iso,
      updated_at: iso,
      status: "CREATING",
      source: "internal_container",
      source_revision_config: {
        repo_ref: null,
        framework_config_path: null,
        image_uri: "r/a:1",
        source_tarball_path: null,
        repo_commit_sha: null,
        repo_commit_title: null,
      },
      status_message: "Revision created",
    });
  });

  it("answers 404 for an unknown revision or one of another deployment, and 422 for a non-UUID", async () => {
    const [a, b] = [await create(), await create()];
    for (const unknown of [randomUUID(), ANY_UUID]) {
      const missing = await get(`${revisionsPath(a.id)}/${unknown}`);
      expect(missing.status).toBe(404);
      expect(missing.body).toEqual({ detail: `Revision ID ${unknown} not found.` });
    }
    const crossed = await get(`${revisionsPath(a.id)}/${b.latest_revision_id}`);
    expect(crossed.status).toBe(404);
    expect(crossed.body).toEqual({ detail: `Revision ID ${b.latest_revision_id} not found.` });
    const noDeployment = randomUUID();
    expect((await get(`${revisionsPath(noDeployment)}/${a.latest_revision_id}`)).body).toEqual({ detail: `Deployment ID ${noDeployment} not found.` });
    const bad = await get(`${revisionsPath(a.id)}/nope`);
    expect(bad.status).toBe(422);
    expect(bad.body.detail).toEqual([expect.objectContaining({ loc: ["path", "revision_id"], type: "uuid_parsing", input: "nope" })]);
  });
});

describe("POST /v2/deployments/{id}/revisions", () => {
  it("always creates a revision, returns it as CREATING and announces it", async () => {
    const d = await create({ shareable: true });
    const seen: DomainEvent[] = [];
    const spy = vi.spyOn(t.app.deps.events, "publish").mockImplementation(async (e) => void seen.push(e));
    const res = await post(revisionsPath(d.id), {});
    spy.mockRestore();
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ status: "CREATING", source: "internal_container", status_message: "Revision created" });
    expect(res.body.id).not.toBe(d.latest_revision_id);
    const ids = { workspaceId: ws.workspaceId, deploymentId: d.id };
    expect(seen).toEqual([
      { type: "deployment.revisions", ...ids, revisionId: res.body.id },
      { type: "revision.status", ...ids, revisionId: res.body.id, status: "CREATING" },
      // The revision it superseded, which had not started.
      { type: "revision.status", ...ids, revisionId: d.latest_revision_id, status: "SKIPPED" },
    ]);
    const after = (await get(`/v2/deployments/${d.id}`)).body;
    expect(after.latest_revision_id).toBe(res.body.id);
    expect(after.shareable).toBe(true);
    const events = await t.app.db.prisma.revisionEvent.findMany({ where: { revisionId: res.body.id } });
    expect(events.map((e) => [e.fromStatus, e.toStatus])).toEqual([[null, "CREATING"]]);
  });

  it("takes revision_source, secrets, sharing and gateway routing", async () => {
    const d = await create();
    const res = await post(revisionsPath(d.id), {
      revision_source: "internal_source",
      source_revision_config: { framework_config_path: "agent.json", source_tarball_path: "s3://b/k.tgz" },
      secrets: [{ name: "TOKEN", value: "revision-secret-55" }],
      shareable: true,
      route_through_gateway: true,
    });
    expect(res.status).toBe(201);
    expect(res.text).not.toContain("revision-secret-55");
    expect(res.body).toMatchObject({ source: "internal_source", source_revision_config: { framework_config_path: "agent.json" } });
    const after = await get(`/v2/deployments/${d.id}`);
    expect(after.body).toMatchObject({ source: "internal_container", shareable: true, route_through_gateway: true, secrets: [{ name: "TOKEN", value: "********" }] });
    expect(after.text).not.toContain("revision-secret-55");
  });

  it("answers 400 for a fixed field, 404 for an unknown deployment, 422 for bad bodies or rules", async () => {
    const d = await create();
    const fixed = await post(revisionsPath(d.id), { source_config: { deployment_type: "prod" } });
    expect(fixed.status).toBe(400);
    expect(fixed.body.detail).toContain("source_config.deployment_type");
    const id = randomUUID();
    const missing = await post(revisionsPath(id), {});
    expect(missing.status).toBe(404);
    expect(missing.body).toEqual({ detail: `Deployment ID ${id} not found.` });
    const bad = await post(revisionsPath(d.id), { revision_source: "external_container", shareable: "sure" });
    expect(bad.status).toBe(422);
    expect(bad.body.detail.map((i: { loc: string[] }) => i.loc)).toEqual([["body", "revision_source"], ["body", "shareable"]]);
    const rule = await post(revisionsPath(d.id), { revision_source: "internal_source", source_revision_config: { source_tarball_path: "uploads/a.tar.gz" } });
    expect(rule.status).toBe(422);
    expect(rule.body.detail).toEqual([expect.objectContaining({ loc: ["body", "source_revision_config", "framework_config_path"], type: "missing" })]);
    expect((await get(revisionsPath(d.id))).body.resources).toHaveLength(1);
  });
});

describe("POST …/revisions/{revision_id}/redeploy", () => {
  it("rolls back: a new revision from the earlier one's configuration, which the deployment takes on", async () => {
    const d = await create({
      source_config: { custom_url: "https://v1.example.com", resource_spec: { cpu: 1 } },
      source_revision_config: { image_uri: "r/a:1" },
      secrets: [{ name: "S", value: "first-secret-0a" }],
    });
    const v2 = await t.request("PATCH", `/v2/deployments/${d.id}`, {
      key: ws.apiKey,
      body: { source_config: { custom_url: "https://v2.example.com", resource_spec: { cpu: 2 } }, source_revision_config: { image_uri: "r/a:2" }, secrets: [] },
    });
    expect(v2.body.url).toBe("https://v2.example.com");

    const res = await post(`${revisionsPath(d.id)}/${d.latest_revision_id}/redeploy`);
    expect(res.status).toBe(200);
    expect(res.text).not.toContain("first-secret-0a");
    expect(res.body).toMatchObject({
      id: d.id,
      url: "https://v1.example.com",
      source_config: { custom_url: "https://v1.example.com", resource_spec: { cpu: 1 } },
      source_revision_config: { image_uri: "r/a:1" },
      secrets: [{ name: "S", value: "********" }],
    });
    const list = (await get(revisionsPath(d.id))).body.resources;
    expect(list.map((r: { id: string }) => r.id)).toEqual([res.body.latest_revision_id, v2.body.latest_revision_id, d.latest_revision_id]);
    expect(list[0]).toMatchObject({ status: "CREATING", source_revision_config: { image_uri: "r/a:1" } });
  });

  it("answers 404 for unknown ids and 400 when the revision's listener is gone", async () => {
    const d = await create();
    const unknown = randomUUID();
    expect((await post(`${revisionsPath(d.id)}/${unknown}/redeploy`)).body).toEqual({ detail: `Revision ID ${unknown} not found.` });
    expect((await post(`${revisionsPath(unknown)}/${d.latest_revision_id}/redeploy`)).status).toBe(404);

    const listener = await t.request("POST", "/v2/listeners", { key: ws.apiKey, body: listenerBody({ compute_id: "gone" }) });
    const self = await create({ source: "external_container", source_config: { listener_id: listener.body.id }, source_revision_config: { image_uri: "r/i:1" } });
    await t.request("DELETE", `/v2/listeners/${listener.body.id}`, { key: ws.apiKey });
    const res = await post(`${revisionsPath(self.id)}/${self.latest_revision_id}/redeploy`);
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ detail: `Listener ID ${listener.body.id} not found.` });
    expect((await get(revisionsPath(self.id))).body.resources).toHaveLength(1);
  });
});

describe("POST …/revisions/{revision_id}/interrupt", () => {
  it("interrupts an in-flight revision once; a terminal one answers 400", async () => {
    const d = await create();
    const res = await post(`${revisionsPath(d.id)}/${d.latest_revision_id}/interrupt`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: d.latest_revision_id, status: "INTERRUPTED", status_message: expect.any(String) });
    const row = await t.app.db.prisma.revision.findUniqueOrThrow({ where: { id: d.latest_revision_id }, include: { events: { orderBy: { id: "asc" } } } });
    expect(row.nextStepAt).toBeNull();
    expect(row.events.map((e) => e.toStatus)).toEqual(["CREATING", "INTERRUPTED"]);

    const again = await post(`${revisionsPath(d.id)}/${d.latest_revision_id}/interrupt`);
    expect(again.status).toBe(400);
    expect(again.body.detail).toContain("INTERRUPTED");

    const other = await post(revisionsPath(d.id), {});
    await setStatus(other.body.id, "DEPLOYED");
    expect((await post(`${revisionsPath(d.id)}/${other.body.id}/interrupt`)).status).toBe(400);
  });

  it("answers 404 for unknown ids and 422 for non-UUIDs", async () => {
    const d = await create();
    const unknown = randomUUID();
    expect((await post(`${revisionsPath(d.id)}/${unknown}/interrupt`)).status).toBe(404);
    expect((await post(`${revisionsPath(unknown)}/${d.latest_revision_id}/interrupt`)).body).toEqual({ detail: `Deployment ID ${unknown} not found.` });
    const bad = await post(`/v2/deployments/x/revisions/y/interrupt`);
    expect(bad.status).toBe(422);
    expect(bad.body.detail.map((i: { loc: string[] }) => i.loc)).toEqual([["path", "deployment_id"], ["path", "revision_id"]]);
  });
});
