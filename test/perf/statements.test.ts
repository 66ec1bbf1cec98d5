import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { countSql } from "../graphql/sql-count.js";

let t: TestApp;
let ws: NewWorkspace;

beforeAll(async () => {
  t = await startTestApp({ PIPELINE_WORKER: "off", RATE_LIMIT_PER_MINUTE: "0" });
  ws = await t.workspace();
});
afterAll(() => t.close());

const body = (name: string) => ({
  name,
  source: "internal_container",
  source_config: { deployment_type: "dev", resource_spec: { min_scale: 2 } },
  source_revision_config: { image_uri: `registry.example.com/a/${name}:1` },
  secrets: [{ name: "TOKEN", value: "s3cret" }],
  agent: { agent_id: `agent-${name}`, environment: "staging" },
});

describe("GET /v2/deployments/{id}", () => {
  it("reads the deployment and its latest revision in one statement, and answers as the listing does", async () => {
    const created = await t.request("POST", "/v2/deployments", { key: ws.apiKey, body: body("one-read") });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const id = created.body.id as string;
    // A second revision, so that the latest is not the first.
    const revision = await t.request("POST", `/v2/deployments/${id}/revisions`, { key: ws.apiKey, body: { source_revision_config: { image_uri: "registry.example.com/a/one-read:2" } } });
    expect(revision.status).toBe(201);

    expect((await t.request("GET", `/v2/deployments/${id}`, { key: ws.apiKey })).status).toBe(200); // the key is cached now
    const sql = countSql();
    const { result: got, statements } = await sql.within(() => t.request("GET", `/v2/deployments/${id}`, { key: ws.apiKey })).finally(() => sql.restore());
    expect(got.status).toBe(200);
    expect(statements).toBe(1);
    expect(got.body.latest_revision_id).toBe(revision.body.id);
    expect(got.body.source_revision_config.image_uri).toBe("registry.example.com/a/one-read:2");

    const listed = await t.request("GET", "/v2/deployments?name=one-read", { key: ws.apiKey });
    expect(listed.status).toBe(200);
    expect(listed.body.resources).toEqual([got.body]);
  });

  it("is 404 for another workspace's deployment and for an id that names nothing", async () => {
    const created = await t.request("POST", "/v2/deployments", { key: ws.apiKey, body: body("theirs") });
    const other = await t.workspace();
    for (const id of [created.body.id as string, "11111111-1111-4111-8111-111111111111"]) {
      const res = await t.request("GET", `/v2/deployments/${id}`, { key: other.apiKey });
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ detail: expect.stringContaining(id) });
    }
  });
});
