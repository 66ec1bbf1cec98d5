import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { Prisma } from "../../src/generated/prisma/client.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { ANY_UUID } from "../support/fixtures.js";

let t: TestApp;
let ws: NewWorkspace;

beforeAll(async () => {
  t = await startTestApp();
  ws = await t.workspace();
});
afterAll(() => t.close());

const body = (computeId: string) => ({
  compute_type: "k8s",
  compute_id: computeId,
  compute_config: { k8s_namespaces: ["agents"] },
  version: "1.2.0",
});

describe("listeners", () => {
  it("creates, reads, updates and deletes a listener", async () => {
    const created = await t.request("POST", "/v2/listeners", { key: ws.apiKey, body: body("cluster-a") });
    expect(created.status).toBe(201);
    expect(created.body).toEqual({
      id: expect.any(String),
      compute_type: "k8s",
      compute_id: "cluster-a",
      compute_config: { k8s_namespaces: ["agents"] },
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      updated_at: expect.any(String),
      version: "1.2.0",
    });
    const id = created.body.id;

    const got = await t.request("GET", `/v2/listeners/${id}`, { key: ws.apiKey });
    expect(got.status).toBe(200);
    expect(got.body).toEqual(created.body);

    const patched = await t.request("PATCH", `/v2/listeners/${id}`, {
      key: ws.apiKey,
      body: { version: "1.3.0", compute_id: "ignored-cannot-change" },
    });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ version: "1.3.0", compute_id: "cluster-a", compute_config: { k8s_namespaces: ["agents"] } });

    const deleted = await t.request("DELETE", `/v2/listeners/${id}`, { key: ws.apiKey });
    expect(deleted.status).toBe(204);
    expect(deleted.text).toBe("");
    const gone = await t.request("GET", `/v2/listeners/${id}`, { key: ws.apiKey });
    expect(gone.status).toBe(404);
    expect(gone.body).toEqual({ detail: `Listener ID ${id} not found.` });
  });

  it("refuses a duplicate compute_id in the workspace with 409 and allows it in another", async () => {
    expect((await t.request("POST", "/v2/listeners", { key: ws.apiKey, body: body("dup") })).status).toBe(201);
    const again = await t.request("POST", "/v2/listeners", { key: ws.apiKey, body: body("dup") });
    expect(again.status).toBe(409);
    expect(again.body.detail).toContain("dup");
    const other = await t.workspace();
    expect((await t.request("POST", "/v2/listeners", { key: other.apiKey, body: body("dup") })).status).toBe(201);
  });

  it("reports every validation problem at once, in FastAPI's shape, and creates nothing", async () => {
    const before = await t.request("GET", "/v2/listeners?limit=100", { key: ws.apiKey });
    const res = await t.request("POST", "/v2/listeners", {
      key: ws.apiKey,
      body: { compute_type: "ecs", version: 3, tracked_packages: ["ignored"] },
    });
    expect(res.status).toBe(422);
    expect(res.body.detail).toEqual([
      expect.objectContaining({ loc: ["body", "compute_type"], type: "enum", input: "ecs" }),
      expect.objectContaining({ loc: ["body", "compute_id"], type: "missing", msg: "Field required" }),
      expect.objectContaining({ loc: ["body", "compute_config"], type: "missing", msg: "Field required" }),
      expect.objectContaining({ loc: ["body", "version"], type: "string_type", input: 3 }),
    ]);
    const after = await t.request("GET", "/v2/listeners?limit=100", { key: ws.apiKey });
    expect(after.body.resources).toEqual(before.body.resources);
  });

  it("answers malformed JSON and a non-UUID path id with 422", async () => {
    const json = await t.request("POST", "/v2/listeners", { key: ws.apiKey, rawBody: "{nope" });
    expect(json.status).toBe(422);
    // As FastAPI answers it: where the body stopped being JSON, and what was wrong there.
    expect(json.body.detail[0]).toMatchObject({ type: "json_invalid", loc: ["body", 1], ctx: { error: expect.stringMatching(/^Expected property name/) } });
    const path = await t.request("GET", "/v2/listeners/abc", { key: ws.apiKey });
    expect(path.status).toBe(422);
    expect(path.body.detail).toEqual([
      expect.objectContaining({ type: "uuid_parsing", loc: ["path", "listener_id"], input: "abc" }),
    ]);
  });

  it("pages newest first with limit and offset; offset is where the next page starts", async () => {
    const mine = await t.workspace();
    for (const n of [1, 2, 3, 4, 5]) {
      await t.request("POST", "/v2/listeners", { key: mine.apiKey, body: body(`page-${n}`) });
    }
    type Shown = { compute_id: string; created_at: string };
    const ids = (res: { body: { resources: Shown[] } }) => res.body.resources.map((l) => l.compute_id);
    // Newest first. Two listeners created in the same millisecond are in the order of their ids, so the
    // pages are compared with the whole list rather than with the order they were created in.
    const all = await t.request("GET", "/v2/listeners", { key: mine.apiKey });
    const times = all.body.resources.map((l: Shown) => l.created_at);
    expect(times).toEqual([...times].sort().reverse());
    expect([...ids(all)].sort()).toEqual(["page-1", "page-2", "page-3", "page-4", "page-5"]);
    // And each one's time is that of its creation: never older than the one created before it.
    const timeOf = new Map(all.body.resources.map((l: Shown) => [l.compute_id, l.created_at]));
    const inCreationOrder = ["page-1", "page-2", "page-3", "page-4", "page-5"].map((n) => timeOf.get(n));
    expect(inCreationOrder).toEqual([...inCreationOrder].sort());
    const first = await t.request("GET", "/v2/listeners?limit=2", { key: mine.apiKey });
    expect(ids(first)).toEqual(ids(all).slice(0, 2));
    expect(first.body.offset).toBe(2);
    const last = await t.request("GET", "/v2/listeners?limit=2&offset=4", { key: mine.apiKey });
    expect(ids(last)).toEqual(ids(all).slice(4));
    expect(last.body.offset).toBe(5);
    const past = await t.request("GET", "/v2/listeners?offset=10", { key: mine.apiKey });
    expect(past.body).toEqual({ resources: [], offset: 10 });

    for (const bad of ["limit=0", "limit=101", "offset=-1", "limit=abc"]) {
      const res = await t.request("GET", `/v2/listeners?${bad}`, { key: mine.apiKey });
      expect(res.status, bad).toBe(422);
      expect(res.body.detail[0].loc[0]).toBe("query");
    }
  });

  it("hides another workspace's listeners as not found", async () => {
    const created = await t.request("POST", "/v2/listeners", { key: ws.apiKey, body: body("private") });
    const intruder = await t.workspace();
    const id = created.body.id;
    for (const [method, payload] of [["GET"], ["PATCH", { version: "9" }], ["DELETE"]] as const) {
      const res = await t.request(method, `/v2/listeners/${id}`, { key: intruder.apiKey, body: payload });
      expect(res.status, method).toBe(404);
    }
    expect((await t.request("GET", `/v2/listeners/${ANY_UUID}`, { key: ws.apiKey })).body).toEqual({ detail: `Listener ID ${ANY_UUID} not found.` });
    const list = await t.request("GET", "/v2/listeners", { key: intruder.apiKey });
    expect(list.body.resources).toEqual([]);
    const still = await t.request("GET", `/v2/listeners/${id}`, { key: ws.apiKey });
    expect(still.body.version).toBe("1.2.0");
  });

  it("answers stored compute_config by its documented type (a row older than its validation)", async () => {
    const created = await t.request("POST", "/v2/listeners", { key: ws.apiKey, body: body("old-row") });
    for (const [stored, shown] of [
      [{ k8s_namespaces: [1, "ns"], extra: true }, { k8s_namespaces: ["ns"] }],
      [{ k8s_namespaces: "ns" }, { k8s_namespaces: null }],
      [null, { k8s_namespaces: null }],
    ] as const) {
      await t.app.db.prisma.listener.update({ where: { id: created.body.id }, data: { computeConfig: stored ?? Prisma.JsonNull } });
      const res = await t.request("GET", `/v2/listeners/${created.body.id}`, { key: ws.apiKey });
      expect(res.status, JSON.stringify(stored)).toBe(200);
      expect(res.body.compute_config, JSON.stringify(stored)).toEqual(shown);
    }
  });
});
