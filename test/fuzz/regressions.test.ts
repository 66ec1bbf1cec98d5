import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { changedTables, fingerprint } from "../support/db-fingerprint.js";
import { expectGraphQLAnswer, expectRestAnswer } from "../support/fuzz-shapes.js";

/** Inputs the fuzzers found answering 500, kept as plain cases so that they stay fixed. */

let t: TestApp;
let ws: NewWorkspace;

beforeAll(async () => {
  t = await startTestApp({ PIPELINE_WORKER: "off", RATE_LIMIT_PER_MINUTE: "0" });
  ws = await t.workspace();
});
afterAll(() => t.close());

const nested = (depth: number) => `${"[".repeat(depth)}${"]".repeat(depth)}`;

async function refusedWithoutChange(method: string, path: string, rawBody: string) {
  const before = await fingerprint(t.app.db.sql);
  const res = await t.request(method, path, { key: ws.apiKey, rawBody, headers: { "content-type": "application/json" } });
  expectRestAnswer(res);
  expect(res.status).toBe(422);
  expect(changedTables(before, await fingerprint(t.app.db.sql))).toEqual([]);
  return res.body.detail as { loc: (string | number)[]; msg: string; input?: unknown }[];
}

describe("deeply nested JSON", () => {
  it("in a free-form object field is a 422 naming where, not a 500 from echoing it back", async () => {
    const body = `{"name":"deep","source":"internal_container","source_config":{"resource_spec":{"labels":{"a":${nested(5_000)}}}}}`;
    const detail = await refusedWithoutChange("POST", "/v2/deployments", body);
    expect(detail).toHaveLength(1);
    expect(detail[0]!.loc.slice(0, 5)).toEqual(["body", "source_config", "resource_spec", "labels", "a"]);
    expect(detail[0]!.msg).toMatch(/nested deeper than \d+ levels/);
    expect(detail[0]).not.toHaveProperty("input");
  });

  it("as the whole body (hundreds of thousands of levels) is a 422 too", async () => {
    const detail = await refusedWithoutChange("POST", "/v2/listeners", nested(200_000));
    expect(detail[0]!.loc[0]).toBe("body");
  });

  it("through a GraphQL JSONObject variable (free-form JSON inside) is a userError", async () => {
    const query = `mutation($input: DeploymentCreateInput!) { deploymentCreate(input: $input) { deployment { id } userErrors { field message code } } }`;
    // Built as text: JSON.stringify itself cannot go this deep.
    const variables = `{"input":{"name":"deep-gql","source":"INTERNAL_CONTAINER","sourceConfig":{"resourceSpec":{"volumes":[{"name":"v","configMap":{"a":${nested(100_000)}}}]}}}}`;
    const before = await fingerprint(t.app.db.sql);
    const res = await t.request("POST", "/graphql", {
      key: ws.apiKey,
      headers: { accept: "application/graphql-response+json", "content-type": "application/json" },
      rawBody: `{"query":${JSON.stringify(query)},"variables":${variables}}`,
    });
    expectGraphQLAnswer(res, ["deploymentCreate"]);
    expect(res.body.data.deploymentCreate.deployment).toBeNull();
    expect(res.body.data.deploymentCreate.userErrors).toEqual([
      expect.objectContaining({ code: "INVALID", field: expect.arrayContaining(["input", "sourceConfig", "resourceSpec", "volumes", "0", "configMap"]) }),
    ]);
    expect(changedTables(before, await fingerprint(t.app.db.sql))).toEqual([]);
  });
});

describe("unpaired UTF-16 surrogates", () => {
  it("in a field stored as JSON (jsonb cannot hold them) are a 422, not a 500", async () => {
    const detail = await refusedWithoutChange(
      "POST",
      "/v2/listeners",
      `{"compute_type":"k8s","compute_id":"c-1","version":"1","compute_config":{"k8s_namespaces":["ok","\\udfff"]}}`,
    );
    expect(detail).toEqual([expect.objectContaining({ loc: ["body", "compute_config", "k8s_namespaces", 1] })]);
  });

  it("in a text field are a 422 rather than stored silently altered", async () => {
    const detail = await refusedWithoutChange("POST", "/v2/listeners", `{"compute_type":"k8s","compute_id":"c-\\ud800x","compute_config":{"k8s_namespaces":null},"version":"1"}`);
    expect(detail).toEqual([expect.objectContaining({ loc: ["body", "compute_id"] })]);
  });

  it("in an object key are a 422", async () => {
    const detail = await refusedWithoutChange(
      "POST",
      "/v2/deployments",
      `{"name":"keys","source":"internal_container","source_config":{"resource_spec":{"labels":{"\\udc00":"v"}}}}`,
    );
    expect(detail[0]!.loc.slice(0, 4)).toEqual(["body", "source_config", "resource_spec", "labels"]);
  });

  it("while a well-formed pair (an emoji) is stored and answered as sent", async () => {
    const res = await t.request("POST", "/v2/listeners", {
      key: ws.apiKey,
      rawBody: `{"compute_type":"k8s","compute_id":"c-\\ud83d\\ude00","version":"1","compute_config":{"k8s_namespaces":["\\ud83d\\ude00"]}}`,
      headers: { "content-type": "application/json" },
    });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ compute_id: "c-😀", compute_config: { k8s_namespaces: ["😀"] } });
  });
});
