import { readFileSync } from "node:fs";
import { Hono } from "hono";
import { z } from "zod";
import { afterAll, beforeAll, describe as group, expect, it } from "vitest";
import { commaList, queryBool } from "../../src/core/schemas/query.js";
import { queryInt } from "../../src/core/validation.js";
import { describe, openApiDocument, routesOf } from "../../src/rest/docs.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { contractViolation } from "../support/openapi-contract.js";

const committed = readFileSync(new URL("../../openapi.json", import.meta.url), "utf8");

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t.close());

type Doc = { paths: Record<string, Record<string, { parameters?: { name: string; in: string }[]; responses: Record<string, unknown>; security: unknown[]; requestBody?: unknown }>> };

group("openapi.json", () => {
  it("is the document /openapi.json serves (run `npm run -s openapi:print > openapi.json` after changing a route)", async () => {
    const res = await t.request("GET", "/openapi.json");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^application\/json/);
    expect(res.text).toBe(committed);
  });

  it("documents every REST operation, the uploads, registry token, logs and OAuth callback among them", () => {
    const doc = JSON.parse(committed) as Doc & { openapi: string; info: { version: string } };
    expect(doc.openapi).toBe("3.1.0");
    // SPEC.md (Versioning): "The API description itself carries version 0.1.0."
    expect(doc.info.version).toBe("0.1.0");
    // OpenAPI 3.1's default dialect (as in the reference): a jsonSchemaDialect field makes /docs show a warning.
    expect(doc).not.toHaveProperty("jsonSchemaDialect");
    const operations = Object.entries(doc.paths).flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`));
    expect(operations).toEqual(
      expect.arrayContaining([
        "GET /registry/token",
        "PUT /uploads/{deployment_id}/{file}",
        "POST /v2/deployments/{deployment_id}/push-token",
        "POST /v2/deployments/{deployment_id}/upload-url",
        "POST /v1/projects/{deployment_id}/revisions/{revision_id}/build_logs",
        "GET /v2/auth/callback/{provider_id}",
        "GET /v2/auth/wait/{auth_id}",
        "PATCH /v2/deployments/{deployment_id}",
        "DELETE /v2/deployments",
        "GET /v2/deployments/{deployment_id}/revisions",
        "GET /healthz",
        "GET /docs",
      ]),
    );
    expect(operations.length).toBeGreaterThanOrEqual(50);
    // Parameters, bodies, status codes and the error shape.
    const get = doc.paths["/v2/deployments/{deployment_id}"]!.get!;
    expect(get.parameters).toEqual([expect.objectContaining({ name: "deployment_id", in: "path" })]);
    expect(get.responses["404"]).toEqual(expect.objectContaining({ content: { "application/json": { schema: expect.anything() } } }));
    expect(get.responses["422"]).toEqual(expect.objectContaining({ content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } } }));
    expect(doc.paths["/v2/deployments"]!.post!.requestBody).toBeDefined();
    expect(Object.keys(doc.paths["/v2/deployments"]!.post!.responses)).toContain("201");
    expect(doc.paths["/v2/deployments"]!.get!.parameters!.map((p) => p.name)).toEqual(expect.arrayContaining(["limit", "offset", "name_contains"]));
    // Who needs a key, and who does not.
    expect(doc.paths["/v2/auth/callback/{provider_id}"]!.get!.security).toEqual([]);
    expect(doc.paths["/registry/token"]!.get!.security).toEqual([{ PushToken: [] }]);
  });

  it("mentions Idempotency-Key on the POSTs that honour it, and on nothing else", () => {
    const doc = JSON.parse(committed) as Doc;
    const withKey = Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.entries(ops).filter(([, op]) => op.parameters?.some((p) => p.name === "Idempotency-Key" && p.in === "header")).map(([m]) => `${m.toUpperCase()} ${path}`),
    );
    expect(withKey).toEqual(expect.arrayContaining(["POST /v2/deployments", "POST /v2/deployments/{deployment_id}/revisions", "POST /v2/listeners"]));
    for (const op of withKey) expect(op).toMatch(/^POST \/v[12]\//);
    expect(withKey).not.toContain("POST /graphql");
  });

  it("says a JSON body is required where leaving it out is refused, and optional where it may be left out", async () => {
    const required = (doc: Doc, method: string, path: string) => (doc.paths[path]![method]!.requestBody as { required: boolean }).required;
    const app = new Hono()
      .post("/v2/needs", describe({ tag: "t", summary: "needs a body", body: z.object({ name: z.string() }), responses: { 200: { description: "ok", schema: z.object({}) } } }, (c) => c.json({})))
      .post("/v2/may", describe({ tag: "t", summary: "may have one", body: z.object({ name: z.string() }).optional(), responses: { 200: { description: "ok", schema: z.object({}) } } }, (c) => c.json({})));
    const made = openApiDocument(routesOf(app), "1") as unknown as Doc;
    expect(required(made, "post", "/v2/needs")).toBe(true);
    expect(required(made, "post", "/v2/may")).toBe(false);

    const doc = JSON.parse(committed) as Doc;
    expect(required(doc, "post", "/v2/deployments")).toBe(true);
    // A log read's fields all have defaults: its body may be left out (COMPAT.md's tool sends one).
    expect(required(doc, "post", "/v1/projects/{deployment_id}/deploy_logs")).toBe(false);
    // A listener's update may be empty (nothing changes), and says so.
    expect(required(doc, "patch", "/v2/listeners/{listener_id}")).toBe(false);
    const ws = await t.workspace();
    const missing = await t.request("POST", "/v2/deployments", { key: ws.apiKey });
    expect(missing.status).toBe(422);
    expect(missing.body.detail).toEqual([expect.objectContaining({ loc: ["body"], type: "missing" })]);
  });

  it("documents a query parameter as what it is read as, with its bounds, default and whether it may be left out", () => {
    const query = z.object({
      n: queryInt({ min: 2, max: 9 }).default(3),
      piped: queryInt().pipe(z.number().min(2)).optional(),
      clamped: queryInt().default(4).transform((x) => Math.min(x, 5)),
      flag: queryBool.default(true),
      maybe: queryBool.optional().describe("a flag"),
      ids: commaList(z.guid()).pipe(z.array(z.guid()).min(1).max(5)),
      tags: commaList(z.string().max(8)).pipe(z.array(z.string()).max(3).optional()),
      text: z.string().max(10).optional(),
    });
    const app = new Hono().get("/v2/q", describe({ tag: "t", summary: "query", query, responses: { 200: { description: "ok", schema: z.object({}) } } }, (c) => c.json({})));
    const made = openApiDocument(routesOf(app), "1") as unknown as { paths: Record<string, Record<string, { parameters: { name: string; required: boolean; description?: string; schema: unknown }[] }>> };
    const params = Object.fromEntries(made.paths["/v2/q"]!.get!.parameters.map(({ name, required, schema }) => [name, { required, schema }]));
    expect(params).toEqual({
      n: { required: false, schema: { type: "integer", minimum: 2, maximum: 9, default: 3 } },
      piped: { required: false, schema: { type: "integer", minimum: 2 } },
      clamped: { required: false, schema: { type: "integer", default: 4 } },
      flag: { required: false, schema: { type: "boolean", default: true } },
      maybe: { required: false, schema: { type: "boolean" } },
      ids: { required: true, schema: { type: "array", items: expect.objectContaining({ type: "string", format: "uuid" }), minItems: 1, maxItems: 5 } },
      tags: { required: false, schema: { type: "array", items: { type: "string", maxLength: 8 }, maxItems: 3 } },
      text: { required: false, schema: { type: "string", maxLength: 10 } },
    });
    expect(made.paths["/v2/q"]!.get!.parameters.find((p) => p.name === "maybe")!.description).toBe("a flag");
  });

  it("shares named schemas as components, and refuses one name for two shapes", () => {
    const doc = JSON.parse(committed) as { paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, { schema: unknown }> }> }>>; components: { schemas: Record<string, unknown> } };
    expect(Object.keys(doc.components.schemas)).toEqual(expect.arrayContaining(["Error", "Deployment", "Revision", "Listener", "SourceConfig", "SourceRevisionConfig", "SecretReference", "ListenerComputeConfig"]));
    expect(doc.paths["/v2/deployments/{deployment_id}"]!.get!.responses["200"]!.content!["application/json"]!.schema).toEqual({ $ref: "#/components/schemas/Deployment" });
    expect(committed).not.toContain("$defs");

    const named = z.object({ a: z.string() }).meta({ id: "OpenApiTestTwoShapes" });
    const app = new Hono().post("/v2/both", describe({ tag: "t", summary: "both", body: z.object({ named }), responses: { 200: { description: "ok", schema: z.object({ named }) } } }, (c) => c.json({})));
    // As a request an object is open (unknown fields are ignored), as an answer closed: two shapes.
    expect(() => openApiDocument(routesOf(app), "1")).toThrow(/OpenApiTestTwoShapes has two shapes/);
  });

  it("cannot be made with a route that has no description", () => {
    const app = new Hono()
      .get("/v2/described", describe({ tag: "t", summary: "described", responses: { 200: { description: "ok", schema: z.object({ ok: z.boolean() }) } } }, (c) => c.json({ ok: true })))
      .get("/v2/forgotten", (c) => c.json({}));
    expect(() => openApiDocument(routesOf(app), "1")).toThrow(/routes without describe\(\): GET \/v2\/forgotten/);
  });

  it("refuses a second description of one handler, which would describe both routes alike", () => {
    const handler = () => new Response();
    describe({ tag: "t", summary: "first", responses: { 200: { description: "ok" } } }, handler);
    expect(() => describe({ tag: "t", summary: "second", responses: { 200: { description: "ok" } } }, handler)).toThrow(/described already \(first\)/);
  });

  it("documents the sub-objects of deployments, revisions and listeners key by key, so that their drift is caught", () => {
    type Obj = { $ref?: string; type?: string; properties?: Record<string, Obj>; required?: string[]; additionalProperties?: unknown; items?: Obj; anyOf?: Obj[] };
    const doc = JSON.parse(committed) as { paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, { schema: Obj }> }> }>>; components: { schemas: Record<string, Obj> } };
    // A shared schema is a reference to components/schemas; a nullable one, the object among anyOf.
    const resolve = (schema: Obj | undefined): Obj | undefined => {
      if (schema?.$ref) return resolve(doc.components.schemas[schema.$ref.replace("#/components/schemas/", "")]);
      const object = schema?.anyOf?.find((s) => s.type === "object" || s.$ref);
      return object ? resolve(object) : schema;
    };
    const answer = (path: string) => resolve(doc.paths[path]!.get!.responses["200"]!.content!["application/json"]!.schema)!;
    const closed = (schema: Obj | undefined, keys: string[]) => {
      const object = resolve(schema);
      expect(object?.additionalProperties).toBe(false);
      expect(Object.keys(object?.properties ?? {}).sort()).toEqual([...keys].sort());
    };
    const deployment = answer("/v2/deployments/{deployment_id}").properties!;
    closed(deployment.source_config, ["integration_id", "repo_url", "build_on_push", "custom_url", "resource_spec", "listener_id", "listener_config", "install_command", "build_command", "deployment_type", "repo_branch"]);
    const resourceSpec = resolve(resolve(deployment.source_config)!.properties!.resource_spec)!;
    expect(resourceSpec.additionalProperties).toBe(false);
    expect(Object.keys(resourceSpec.properties!)).toEqual(expect.arrayContaining(["min_scale", "cpu", "memory_mb", "sidecars", "autoscaling_behavior"]));
    const revisionConfig = ["repo_ref", "framework_config_path", "image_uri", "source_tarball_path", "repo_commit_sha", "repo_commit_title"];
    closed(deployment.source_revision_config, revisionConfig);
    closed(deployment.secret_references!.items, ["name", "secret_name", "secret_key"]);
    closed(answer("/v2/deployments/{deployment_id}/revisions/{revision_id}").properties!.source_revision_config, revisionConfig);
    closed(answer("/v2/listeners/{listener_id}").properties!.compute_config, ["k8s_namespaces"]);
    expect(contractViolation("GET", "/v2/listeners/00000000-0000-4000-8000-000000000000", 200, "application/json", JSON.stringify({ id: "00000000-0000-4000-8000-000000000000", compute_type: "k8s", compute_id: "c", compute_config: { namespaces: [] }, created_at: "2026-01-01T00:00:00Z", updated_at: "2026-01-01T00:00:00Z", version: null }))).toMatch(/must have required property 'k8s_namespaces'|must NOT have additional properties/);
  });

  it("is what the answers are checked against: a drifted answer is caught", () => {
    expect(contractViolation("GET", "/v2/listeners", 200, "application/json", JSON.stringify({ resources: [{ id: "x" }], offset: 0 }))).toMatch(/must have required property/);
    expect(contractViolation("GET", "/v2/listeners", 201, "application/json", "{}")).toMatch(/status not documented/);
    expect(contractViolation("GET", "/v2/listeners/00000000-0000-4000-8000-000000000000", 404, "application/json", JSON.stringify({ message: "x" }))).toMatch(/detail/);
    expect(contractViolation("GET", "/v2/listeners/00000000-0000-4000-8000-000000000000", 404, "application/json", JSON.stringify({ detail: "Not found" }))).toBeNull();
  });
});

group("/docs", () => {
  it("serves Swagger UI from the installed package, with no asset from elsewhere", async () => {
    const page = await t.request("GET", "/docs");
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toMatch(/^text\/html/);
    expect(page.text).toContain('url: "/openapi.json"');
    const assets = [...page.text.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
    expect(assets.length).toBeGreaterThanOrEqual(3);
    for (const asset of assets) {
      expect(asset).toMatch(/^\/docs\//);
      const res = await t.app.fetch(new Request(`http://test${asset}`));
      expect(res.status, asset).toBe(200);
      expect((await res.arrayBuffer()).byteLength, asset).toBeGreaterThan(500);
    }
    expect((await t.request("GET", "/docs/../package.json")).status).toBe(404);
    expect((await t.request("GET", "/docs/index.html")).status).toBe(404);
  });
});
