import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { type TestApp, startTestApp } from "../support/app.js";

/**
 * A 422 quotes what the client sent (`input`), as FastAPI does; never when it may hold a secret
 * value, whatever the body's shape. And what an Idempotency-Key stores (the answer, to replay) holds
 * none either.
 */

let t: TestApp;
let ws: NewWorkspace;
let deploymentId: string;

beforeAll(async () => {
  t = await startTestApp({ PIPELINE_WORKER: "off" });
  ws = await t.workspace();
  const created = await t.request("POST", "/v2/deployments", {
    key: ws.apiKey,
    body: { name: "echo-target", source: "internal_container", source_config: { deployment_type: "dev" }, source_revision_config: {} },
  });
  expect(created.status, created.text).toBe(201);
  deploymentId = created.body.id;
});
afterAll(() => t.close());

/** Bodies of every shape around one secret: the object the route wants, wrapped or encoded wrongly. */
function shapes(secret: string): [string, string][] {
  const body = { name: "echo", source: "internal_container", secrets: [{ name: "API_TOKEN", value: secret }] };
  return [
    ["an array of the body", JSON.stringify([body])],
    ["the body as a JSON string", JSON.stringify(JSON.stringify(body))],
    ["arrays of arrays", JSON.stringify([[body], [[body.secrets]]])],
    ["the body under another key, with a bad field", JSON.stringify({ deployment: body, source: 7, shareable: body })],
    ["a secrets list inside a secret", JSON.stringify({ ...body, source: "nope", secrets: [{ name: "A", value: body.secrets }] })],
    ["secrets keyed by name", JSON.stringify({ ...body, secrets: { API_TOKEN: secret } })],
    ["a bare secret string", JSON.stringify(secret)],
    // Not JSON at all: a script that put the secret in unquoted. JSON.parse's message quotes the body around the fault.
    ["a secret left unquoted", JSON.stringify(body).replace(JSON.stringify(secret), secret)],
    ["a secret cut short", JSON.stringify(body).slice(0, JSON.stringify(body).indexOf(secret) + secret.length)],
  ];
}

const ROUTES = [
  { method: "POST", template: "/v2/deployments" },
  { method: "PATCH", template: "/v2/deployments/{id}" },
  { method: "POST", template: "/v2/deployments/{id}/revisions" },
];

describe("422 answers to bodies carrying secrets", () => {
  for (const [n, route] of ROUTES.entries()) {
    const path = () => route.template.replace("{id}", deploymentId);
    it(`${route.method} ${route.template}: no shape of body gets its secret quoted, nor stored with its Idempotency-Key`, async () => {
      const secret = t.guard.secret();
      for (const [shape, raw] of shapes(secret)) {
        const key = `echo-${n}-${shape}`.replace(/\W+/g, "-");
        const res = await t.request(route.method, path(), {
          key: ws.apiKey,
          rawBody: raw,
          headers: { "content-type": "application/json", "idempotency-key": key },
        });
        expect(res.status, `${shape}: ${res.text}`).toBe(422);
        expect(res.body.detail.length, shape).toBeGreaterThan(0);
        // Not even its start: a parser quotes some ten characters around a fault.
        expect(res.text, shape).not.toContain(secret.slice(0, 8));
        // The replay is the stored answer: the same, and as clean.
        if (route.method === "POST") {
          const again = await t.request(route.method, path(), {
            key: ws.apiKey,
            rawBody: raw,
            headers: { "content-type": "application/json", "idempotency-key": key },
          });
          expect(again.headers.get("idempotent-replayed"), shape).toBe("true");
          expect(again.text, shape).toBe(res.text);
        }
      }
      const stored = await t.app.db.sql.query<{ key: string; response_body: string | null }>(
        "SELECT key, response_body FROM idempotency_keys WHERE key LIKE $1",
        [`echo-${n}-%`],
      );
      if (route.method === "POST") expect(stored.length).toBeGreaterThanOrEqual(shapes(secret).length);
      for (const row of stored) expect(row.response_body, row.key).not.toContain(secret);
      await t.assertNoLeaks();
    });
  }

  it("POST /graphql: a body that is not JSON is refused without quoting it", async () => {
    const secret = t.guard.secret();
    const raw = `{"query":"mutation($i: DeploymentCreateInput!){ deploymentCreate(input: $i) { __typename } }","variables":{"i":{"secrets":[{"name":"A","value":${secret}}]}}}`;
    const res = await t.request("POST", "/graphql", { key: ws.apiKey, rawBody: raw, headers: { "content-type": "application/json" } });
    expect(res.status).toBe(400);
    expect(res.body.errors[0]).toMatchObject({ message: "POST body sent invalid JSON.", extensions: { code: "BAD_REQUEST" } });
    expect(res.text).not.toContain(secret.slice(0, 6));
  });

  it("still quotes plain values where no secret belongs; objects and lists not, in a body that carries secrets", async () => {
    const res = await t.request("POST", "/v2/deployments", {
      key: ws.apiKey,
      body: { name: "echo", source: "nope", source_config: [1, 2], shareable: "yes", secrets: [{ name: "A", value: t.guard.secret() }] },
    });
    expect(res.status).toBe(422);
    const byField = Object.fromEntries(res.body.detail.map((i: { loc: string[]; input?: unknown }) => [i.loc.join("."), i.input]));
    expect(byField).toEqual({ "body.source": "nope", "body.source_config": undefined, "body.shareable": "yes" });
    // Bodies without secrets are quoted in full, as before.
    const listener = await t.request("POST", "/v2/listeners", { key: ws.apiKey, body: { compute_type: "k8s", compute_id: "x", version: "1", compute_config: [1] } });
    expect(listener.status).toBe(422);
    expect(listener.body.detail).toEqual([expect.objectContaining({ loc: ["body", "compute_config"], input: [1] })]);
  });
});
