import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, type TestApp } from "../support/app.js";

/** Inputs the real API accepts, answered as it answers them (issue: "Inputs the real API accepts"). */

let t: TestApp;
let ws: NewWorkspace;

beforeAll(async () => {
  t = await startTestApp({ PIPELINE_WORKER: "off" });
  ws = await t.workspace();
});
afterAll(() => t.close());

const call = (method: string, path: string, body?: unknown) => t.request(method, path, { key: ws.apiKey, body });

describe("query strings", () => {
  it("treats empty filters as no filter, and an unknown status as one nothing has", async () => {
    const d = (await call("POST", "/v2/deployments", { name: "empties", source: "internal_container", source_revision_config: { image_uri: "r.example/a:1" } })).body;
    const all = await call("GET", "/v2/deployments?limit=100");
    for (const query of ["name_contains=", "image_version=", "tag_value_ids=", "deployment_ids=", "name=", "url=", "status=", "remote_reconciled=", "deployment_type=", "agent_id=", "agent_environment=", "name_contains=&image_version=&tag_value_ids="]) {
      const res = await call("GET", `/v2/deployments?limit=100&${query}`);
      expect(res.status, `${query}: ${res.text}`).toBe(200);
      expect(res.body.resources.map((r: { id: string }) => r.id), query).toEqual(all.body.resources.map((r: { id: string }) => r.id));
    }
    expect(await call("GET", "/v2/deployments?status=NO_SUCH_STATUS")).toMatchObject({ status: 200, body: { resources: [], offset: 0 } });
    expect((await call("GET", "/v2/deployments?status=AWAITING_DATABASE")).body.resources.map((r: { id: string }) => r.id)).toContain(d.id);

    const revisions = `/v2/deployments/${d.id}/revisions`;
    expect((await call("GET", `${revisions}?status=`)).body.resources).toHaveLength(1);
    expect((await call("GET", `${revisions}?status=&remote_reconciled=`)).body.resources).toHaveLength(1);
    expect(await call("GET", `${revisions}?status=RUNNING`)).toMatchObject({ status: 200, body: { resources: [], offset: 0 } });
    expect((await call("GET", `${revisions}?status=RUNNING,CREATING`)).body.resources).toHaveLength(1);
    // Paging parameters are numbers still: empty is a 422, as FastAPI answers.
    expect((await call("GET", "/v2/deployments?limit=")).status).toBe(422);
  });

  it("takes the last of a repeated single-valued parameter, as FastAPI does; lists take every value", async () => {
    const image = { image_uri: "r.example/a:1" };
    const made = [];
    for (const name of ["repeat-a", "repeat-b", "repeat-c"]) made.push((await call("POST", "/v2/deployments", { name, source: "internal_container", source_revision_config: image })).body);
    const ids = (res: { body: { resources: { id: string }[] } }) => res.body.resources.map((r) => r.id);
    const limited = await call("GET", "/v2/deployments?limit=1&limit=2&name_contains=repeat-");
    expect(limited.status, limited.text).toBe(200);
    expect(limited.body.resources).toHaveLength(2);
    expect(ids(await call("GET", "/v2/deployments?name=repeat-a&name=repeat-b"))).toEqual([made[1].id]);
    // Only the last is read: a bad earlier value is not looked at.
    expect((await call("GET", "/v2/deployments?limit=many&limit=1&name_contains=repeat-")).body.resources).toHaveLength(1);
    expect((await call("GET", "/v2/deployments?limit=1&limit=many")).status).toBe(422);
    expect(ids(await call("GET", `/v2/deployments?deployment_ids=${made[0].id}&deployment_ids=${made[2].id}`)).sort()).toEqual([made[0].id, made[2].id].sort());
    const revisions = `/v2/deployments/${made[0].id}/revisions`;
    expect((await call("GET", `${revisions}?status=RUNNING&status=CREATING`)).body.resources).toHaveLength(1);
  });

  it("refuses DELETE …?delete_tracing_project=<not a boolean> with 422, and deletes nothing", async () => {
    const d = (await call("POST", "/v2/deployments", { name: "tracing", source: "internal_container", source_revision_config: { image_uri: "r.example/a:1" } })).body;
    const res = await call("DELETE", `/v2/deployments/${d.id}?delete_tracing_project=notabool`);
    expect(res.status).toBe(422);
    expect(res.body.detail).toEqual([expect.objectContaining({ loc: ["query", "delete_tracing_project"], type: "bool_parsing", input: "notabool" })]);
    expect((await call("GET", `/v2/deployments/${d.id}`)).status).toBe(200);
    expect((await call("DELETE", `/v2/deployments/${d.id}?delete_tracing_project=false`)).status).toBe(204);
  });
});

describe("listeners", () => {
  it("take version optional or null and k8s_namespaces null; need compute_config", async () => {
    const noVersion = await call("POST", "/v2/listeners", { compute_type: "k8s", compute_id: `c-${randomUUID()}`, compute_config: { k8s_namespaces: null } });
    expect(noVersion.status, noVersion.text).toBe(201);
    expect(noVersion.body).toMatchObject({ version: null, compute_config: { k8s_namespaces: null } });
    const nullVersion = await call("POST", "/v2/listeners", { compute_type: "k8s", compute_id: `c-${randomUUID()}`, compute_config: {}, version: null });
    expect(nullVersion.status).toBe(201);
    expect(nullVersion.body).toMatchObject({ version: null, compute_config: { k8s_namespaces: null } });
    const missing = await call("POST", "/v2/listeners", { compute_type: "k8s", compute_id: `c-${randomUUID()}`, version: "1" });
    expect(missing.status).toBe(422);
    expect(missing.body.detail).toEqual([{ loc: ["body", "compute_config"], type: "missing", msg: "Field required" }]);
  });

  it("answer PATCH with {} or only nulls with 200 and the listener unchanged", async () => {
    const created = (await call("POST", "/v2/listeners", { compute_type: "k8s", compute_id: `c-${randomUUID()}`, compute_config: { k8s_namespaces: ["a"] }, version: "1" })).body;
    for (const body of [{}, { version: null, compute_config: null }, undefined]) {
      const res = await call("PATCH", `/v2/listeners/${created.id}`, body);
      expect(res.status, JSON.stringify(body)).toBe(200);
      expect(res.body).toEqual(created);
    }
    expect((await call("PATCH", `/v2/listeners/${randomUUID()}`, {})).status).toBe(404);
    expect((await call("PATCH", `/v2/listeners/${created.id}`, { version: "2" })).body).toMatchObject({ version: "2", compute_config: { k8s_namespaces: ["a"] } });
  });
});

describe("source_config.custom_url", () => {
  it("shows the serving URL, and sending back what was shown is no change (no revision)", async () => {
    const d = (await call("POST", "/v2/deployments", { name: "shown-url", source: "internal_container", source_revision_config: { image_uri: "r.example/a:1" } })).body;
    expect(d.source_config.custom_url).toBe(d.url);
    expect(d.url).toMatch(/^https:\/\/shown-url-[0-9a-f]{8}\.deployments\.localhost$/);
    const echoed = await call("PATCH", `/v2/deployments/${d.id}`, { source_config: { ...d.source_config } });
    expect(echoed.status, echoed.text).toBe(200);
    expect(echoed.body.latest_revision_id).toBe(d.latest_revision_id);
    expect(echoed.body.source_config.custom_url).toBe(d.url);
    expect((await call("GET", `/v2/deployments/${d.id}/revisions`)).body.resources).toHaveLength(1);

    const custom = await call("PATCH", `/v2/deployments/${d.id}`, { source_config: { custom_url: "https://agent.example.com" } });
    expect(custom.body.latest_revision_id).not.toBe(d.latest_revision_id);
    expect(custom.body).toMatchObject({ url: "https://agent.example.com", source_config: { custom_url: "https://agent.example.com" } });
    const again = await call("PATCH", `/v2/deployments/${d.id}`, { source_config: custom.body.source_config });
    expect(again.body.latest_revision_id).toBe(custom.body.latest_revision_id);
  });
});

describe("resource_spec maps", () => {
  it("refuse a key named __proto__ (a JavaScript object cannot keep it) with 422, rather than drop it, and create nothing", async () => {
    const before = (await call("GET", "/v2/deployments?limit=100&name_contains=proto-")).body.resources.length;
    for (const [field, map] of [
      ["labels", `{"__proto__": "x", "team": "a"}`],
      ["annotations", `{"team": "a", "__proto__": "x"}`],
    ] as const) {
      const raw = `{"name": "proto-${field}", "source": "internal_container", "source_revision_config": {"image_uri": "r.example/a:1"}, "source_config": {"resource_spec": {"${field}": ${map}}}}`;
      const res = await t.request("POST", "/v2/deployments", { key: ws.apiKey, rawBody: raw, headers: { "content-type": "application/json" } });
      expect(res.status, res.text).toBe(422);
      expect(res.body.detail).toEqual([
        expect.objectContaining({ loc: ["body", "source_config", "resource_spec", field, "__proto__"], type: "value_error" }),
      ]);
    }
    expect((await call("GET", "/v2/deployments?limit=100&name_contains=proto-")).body.resources).toHaveLength(before);
  });
});

describe("a request with a bad path id", () => {
  it("is told every problem at once: the path's, the query's and the body's, as FastAPI reports them", async () => {
    const patched = await call("PATCH", "/v2/deployments/abc", { secrets: [{ name: "my-secret", value: "hidden-value-123" }] });
    expect(patched.status).toBe(422);
    expect(patched.body.detail.map((d: { loc: unknown }) => d.loc)).toEqual([
      ["path", "deployment_id"],
      ["body", "secrets", 0, "name"],
    ]);
    expect(patched.text).not.toContain("hidden-value-123");

    const listed = await call("GET", "/v2/deployments/abc/revisions?limit=0");
    expect(listed.body.detail.map((d: { loc: unknown }) => d.loc)).toEqual([["path", "deployment_id"], ["query", "limit"]]);

    const logs = await call("POST", `/v1/projects/abc/revisions/${randomUUID()}/build_logs`, { limit: 0 });
    expect(logs.body.detail.map((d: { loc: unknown }) => d.loc)).toEqual([["path", "deployment_id"], ["body", "limit"]]);
    const notJson = await t.request("PATCH", "/v2/deployments/abc", { key: ws.apiKey, rawBody: "{nope", headers: { "content-type": "application/json" } });
    expect(notJson.body.detail.map((d: { loc: unknown }) => d.loc)).toEqual([["path", "deployment_id"], ["body", 1]]);

    // Alone, each is as before.
    expect((await call("PATCH", "/v2/deployments/abc", {})).body.detail.map((d: { loc: unknown }) => d.loc)).toEqual([["path", "deployment_id"]]);
    expect((await call("GET", "/v2/deployments/abc")).body.detail.map((d: { loc: unknown }) => d.loc)).toEqual([["path", "deployment_id"]]);
  });
});
