import { SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, TEST_JWT_SECRET, type TestApp } from "../support/app.js";
import { subscribeWs, wsClient } from "../graphql/live.js";
import { gql } from "../graphql/support.js";
import { tenantOf } from "../support/fixtures.js";
import { storeToken } from "../support/oauth.js";

/**
 * A bearer token's claims are input like a body's fields: correctly signed, they still must be of a
 * shape the service can use and store. Hostile ones are refused 401 on every kind of route, never
 * answered 500 (PostgreSQL refuses a NUL byte) and never stored; a token must expire, and not in
 * years.
 */

let t: TestApp;
let ws: NewWorkspace;
let url: string;
let deploymentId: string;

beforeAll(async () => {
  t = await startTestApp({ PIPELINE_WORKER: "off", RATE_LIMIT_PER_MINUTE: "0", AUTH_FAILURES_PER_MINUTE: "0" });
  url = await t.app.start();
  ws = await t.workspace();
  const created = await t.request("POST", "/v2/deployments", {
    key: ws.apiKey,
    body: { name: "claims-target", source: "internal_container", source_config: { deployment_type: "dev" }, source_revision_config: {} },
  });
  expect(created.status).toBe(201);
  deploymentId = created.body.id;
});
afterAll(() => t.close());

const HOUR = 3600;
const now = () => Math.floor(Date.now() / 1000);

/** A token signed with the service's own secret: only its claims are wrong. */
function signed(claims: Record<string, unknown>, { exp = now() + 300, iat = now() }: { exp?: number | null; iat?: number | null } = {}) {
  const body = { ...claims, ...(exp !== null && { exp }), ...(iat !== null && { iat }) };
  return new SignJWT(body).setProtectedHeader({ alg: "HS256" }).sign(new TextEncoder().encode(TEST_JWT_SECRET));
}

const hostile = (): [string, () => Promise<string>][] => [
  ["sub with a NUL byte", () => signed({ tenant_id: ws.workspaceId, sub: "ada\u0000lovelace" })],
  ["sub with a lone surrogate", () => signed({ tenant_id: ws.workspaceId, sub: "ada\ud800" })],
  ["sub of 5,000 characters", () => signed({ tenant_id: ws.workspaceId, sub: "a".repeat(5000) })],
  ["an empty sub", () => signed({ tenant_id: ws.workspaceId, sub: "" })],
  ["a numeric sub", () => signed({ tenant_id: ws.workspaceId, sub: 42 })],
  ["an object sub", () => signed({ tenant_id: ws.workspaceId, sub: { id: "ada" } })],
  ["a tenant_id with a NUL byte", () => signed({ tenant_id: `${ws.workspaceId}\u0000`, sub: "ada" })],
  ["no exp", () => signed({ tenant_id: ws.workspaceId, sub: "ada" }, { exp: null })],
  ["an exp ten years away", () => signed({ tenant_id: ws.workspaceId, sub: "ada" }, { exp: now() + 10 * 365 * 24 * HOUR })],
  ["a lifetime (exp - iat) over the limit", () => signed({ tenant_id: ws.workspaceId, sub: "ada" }, { iat: now() - 30 * 24 * HOUR, exp: now() + HOUR })],
  ["an exp that is not a number", () => signed({ tenant_id: ws.workspaceId, sub: "ada", exp: "soon" }, { exp: null })],
];

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

/** Every kind of route: reads and writes of REST, GraphQL queries and mutations. */
const ROUTES: [string, (token: string) => Promise<{ status: number; text: string }>][] = [
  ["GET /v2/listeners", (token) => t.request("GET", "/v2/listeners", { headers: bearer(token) })],
  ["POST /v2/listeners", (token) => t.request("POST", "/v2/listeners", { headers: bearer(token), body: { compute_type: "k8s", compute_id: "c", version: "1" } })],
  ["POST /v2/auth/agents/{agent_id}/connections", (token) => t.request("POST", "/v2/auth/agents/agent-1/connections", { headers: bearer(token), body: { oauth_token_id: "github:x" } })],
  ["POST /v2/deployments (Idempotency-Key)", (token) => t.request("POST", "/v2/deployments", { headers: { ...bearer(token), "idempotency-key": "claims" }, body: { name: "c", source: "internal_container" } })],
  ["PATCH /v2/deployments/{id}", (token) => t.request("PATCH", `/v2/deployments/${deploymentId}`, { headers: bearer(token), body: { shareable: true } })],
  ["POST /v2/deployments/{id}/revisions", (token) => t.request("POST", `/v2/deployments/${deploymentId}/revisions`, { headers: bearer(token), body: {} })],
  ["GraphQL query", async (token) => {
    const res = await gql(t, null, `{ viewer { id } }`, {}, bearer(token));
    return { status: res.status, text: JSON.stringify(res.errors) };
  }],
  ["GraphQL mutation", async (token) => {
    const res = await gql(t, null, `mutation { listenerCreate(input: { computeType: K8S, computeId: "g", version: "1" }) { listener { id } } }`, {}, bearer(token));
    return { status: res.status, text: JSON.stringify(res.errors) };
  }],
];

describe("correctly signed tokens with hostile claims", () => {
  it("are refused 401 on every kind of route, and change nothing", async () => {
    const before = await t.app.db.sql.query<{ n: number }>(
      "SELECT (SELECT count(*) FROM listeners) + (SELECT count(*) FROM agent_connections) + (SELECT count(*) FROM deployments) + (SELECT count(*) FROM revisions) AS n",
    );
    for (const [what, make] of hostile()) {
      const token = await make();
      for (const [route, call] of ROUTES) {
        const res = await call(token);
        expect(res.status, `${what} on ${route}: ${res.text.slice(0, 300)}`).toBe(401);
      }
    }
    const after = await t.app.db.sql.query<{ n: number }>(
      "SELECT (SELECT count(*) FROM listeners) + (SELECT count(*) FROM agent_connections) + (SELECT count(*) FROM deployments) + (SELECT count(*) FROM revisions) AS n",
    );
    expect(after).toEqual(before);
  });

  it("are refused over graphql-ws too (4401)", async () => {
    for (const [what, make] of hostile()) {
      const client = wsClient(url, null, { Authorization: `Bearer ${await make()}` });
      const op = subscribeWs(client, `{ viewer { id } }`, {});
      const code = await op.done.then(() => 0, (event: { code?: number }) => event.code ?? -1);
      await client.dispose();
      expect(code, what).toBe(4401);
    }
  });

  it("while a token with a plain sub and an hour to live works, and its sub is stored as the actor", async () => {
    const token = await signed({ tenant_id: ws.workspaceId, sub: "ada@example.com" }, { exp: now() + HOUR });
    // A connection takes one of the caller's own OAuth tokens: one of Ada's.
    const own = await storeToken(t, ws.apiKey, { tenant: { ...(await tenantOf(t, ws.apiKey)), actor: "user:ada@example.com" } });
    const res = await t.request("POST", "/v2/auth/agents/agent-1/connections", { headers: bearer(token), body: { oauth_token_id: own.id } });
    expect(res.status, res.text).toBe(201);
    const [row] = await t.app.db.sql.query<{ created_by: string }>("SELECT created_by FROM agent_connections WHERE id = $1", [res.body.id]);
    expect(row?.created_by).toBe("user:ada@example.com");
  });
});
