import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { type RequestOptions, startTestApp, type TestApp, type TestResponse } from "../support/app.js";
import { callbackUrl, OAUTH_ENV, pathOf, storeToken, TOKEN_ANSWERS } from "../support/oauth.js";
import { type OAuthServer, startOAuthServer } from "../support/oauth-server.js";
import { expectAnswer, expectValidRequest, operationsUnder } from "./reference.js";

/**
 * Every operation of the agents' OAuth service, the agent connections and the code-host
 * integrations, driven through success and failure against a real provider: each answer validates
 * against the reference contract (test/contract/openapi-reference.json), and each request body sent
 * is one the contract allows.
 */

let t: TestApp;
let server: OAuthServer;
let ws: NewWorkspace;
const covered = new Set<string>();

beforeAll(async () => {
  server = await startOAuthServer();
  t = await startTestApp({ ...OAUTH_ENV, PIPELINE_WORKER: "off" });
  ws = await t.workspace();
});
afterAll(async () => {
  await t?.close();
  await server?.close();
});

/** Calls `METHOD template` with the path parameters filled in, and checks the answer against the reference. */
async function call(method: string, template: string, params: Record<string, string> = {}, options: RequestOptions & { query?: string; valid?: boolean } = {}) {
  const path = template.replace(/\{(\w+)\}/g, (_, name: string) => encodeURIComponent(params[name] ?? ""));
  if (options.body !== undefined && options.valid !== false) expectValidRequest(method, template, options.body);
  const res: TestResponse = await t.request(method, `${path}${options.query ?? ""}`, { key: ws.apiKey, ...options });
  expectAnswer(method, template, res);
  covered.add(`${method} ${template}`);
  return res;
}

describe("the validator", () => {
  it("refuses answers that break the contract", () => {
    const res = (status: number, body: unknown): TestResponse => ({ status, body, headers: new Headers(), text: JSON.stringify(body) });
    expect(() => expectAnswer("GET", "/v2/auth/tokens/exists", res(200, { has_token: "yes" }))).toThrow();
    expect(() => expectAnswer("GET", "/v2/auth/wait/{auth_id}", res(200, { status: "failed" }))).toThrow();
    expect(() => expectAnswer("POST", "/v2/auth/providers", res(201, {}))).toThrow(/status not in the reference/);
    expect(() => expectAnswer("GET", "/v2/auth/providers/{provider_id}", res(404, { detail: ["x"] }))).toThrow();
    expect(() => expectAnswer("GET", "/v1/integrations/codehost/{integration_id}/repos", res(200, [{ id: "1" }]))).toThrow();
    expect(() => expectValidRequest("POST", "/v2/auth/authenticate", { scopes: [] })).toThrow();
  });
});

describe("the reference contract", () => {
  it("holds for providers", async () => {
    const { clientId, clientSecret } = await server.addClient({ redirectUris: [callbackUrl("idp")] });
    const body = {
      provider_id: "idp", name: "IdP", client_id: clientId, client_secret: t.guard.secret(clientSecret!), auth_url: `${server.issuer}/auth`,
      token_url: `${server.issuer}/token`, uses_pkce: true, code_challenge_method: "S256", provider_type: null, token_endpoint_auth_method: "client_secret_post",
    };
    expect((await call("POST", "/v2/auth/providers", {}, { body })).status).toBe(200);
    expect((await call("POST", "/v2/auth/providers", {}, { body })).status).toBe(409);
    expect((await call("POST", "/v2/auth/providers", {}, { body: { provider_id: "x" }, valid: false })).status).toBe(422);
    expect((await call("POST", "/v2/auth/providers", {}, { body: { provider_id: "min", name: "Min", client_id: "c", auth_url: "https://a.example/a", token_url: "https://a.example/t" } })).status).toBe(200);
    expect((await call("GET", "/v2/auth/providers")).body).toHaveLength(2);
    expect((await call("GET", "/v2/auth/providers/{provider_id}", { provider_id: "idp" })).status).toBe(200);
    expect((await call("GET", "/v2/auth/providers/{provider_id}", { provider_id: "nope" })).status).toBe(404);
    expect((await call("GET", "/v2/auth/providers/{provider_id}", { provider_id: "bad id" })).status).toBe(422);
    expect((await call("PATCH", "/v2/auth/providers/{provider_id}", { provider_id: "min" }, { body: { name: "Renamed", uses_pkce: null } })).status).toBe(200);
    expect((await call("PATCH", "/v2/auth/providers/{provider_id}", { provider_id: "min" }, { body: { auth_url: "nope" } })).status).toBe(422);
    expect((await call("DELETE", "/v2/auth/providers/{provider_id}", { provider_id: "min" })).status).toBe(200);
    expect((await call("DELETE", "/v2/auth/providers/{provider_id}", { provider_id: "min" })).status).toBe(404);

    expect((await call("POST", "/v2/auth/providers/mcp-discover", {}, { body: { provider_id: "mcp", name: "MCP", mcp_server_url: server.mcpUrl } })).status).toBe(200);
    const row = await t.app.db.prisma.oAuthProvider.findFirstOrThrow({ where: { workspaceId: ws.workspaceId, providerId: "mcp" } });
    t.guard.secret(t.app.deps.secrets.open(row.clientSecret!));
    expect((await call("POST", "/v2/auth/providers/mcp-discover", {}, { body: { provider_id: "mcp", name: "MCP", mcp_server_url: server.mcpUrl } })).status).toBe(409);
    expect((await call("POST", "/v2/auth/providers/mcp-discover", {}, { body: { name: "MCP" }, valid: false })).status).toBe(422);
  });

  it("holds for flows, from authenticate to wait, and their failures", async () => {
    const authenticate = { provider: "idp", scopes: ["openid", "repo"], user_id: null, agent_id: "support-bot", force_new: false, token_id: null, is_default: true };
    const started = await call("POST", "/v2/auth/authenticate", {}, { body: authenticate });
    expect(started.body.status).toBe("pending");
    expect((await call("GET", "/v2/auth/wait/{auth_id}", { auth_id: started.body.auth_id }, { query: "?timeout=0" })).body.status).toBe("pending");
    expect((await call("GET", "/v2/auth/wait/{auth_id}", { auth_id: started.body.auth_id }, { query: "?timeout=1" })).body.status).toBe("timeout");
    expect((await call("GET", "/v2/auth/wait/{auth_id}", { auth_id: started.body.auth_id }, { query: "?timeout=soon" })).status).toBe(422);

    const back = await server.follow(started.body.url);
    const state = back.searchParams.get("state")!;
    const wrong = new URL(back);
    wrong.searchParams.set("state", "wrong");
    expect((await callPath("GET", "/v2/auth/callback/{provider_id}", pathOf(wrong))).status).toBe(400);
    expect((await callPath("GET", "/v2/auth/callback/{provider_id}", pathOf(back))).status).toBe(200);
    expect((await callPath("GET", "/v2/auth/callback/{provider_id}", pathOf(back))).status).toBe(400);
    const waited = await call("GET", "/v2/auth/wait/{auth_id}", { auth_id: started.body.auth_id });
    expect(waited.body.status).toBe("completed");
    t.guard.secret(waited.body.token, { shownIn: TOKEN_ANSWERS });
    expect((await call("GET", "/v2/auth/wait/{auth_id}", { auth_id: "nothing" })).body.status).toBe("not_found");
    expect(state).toBeTruthy();

    const completed = await call("POST", "/v2/auth/authenticate", {}, { body: { provider: "idp", scopes: ["repo"] } });
    expect(completed.body.status).toBe("completed");
    expect((await call("POST", "/v2/auth/authenticate", {}, { body: { provider: "nope", scopes: [] } })).status).toBe(404);
    expect((await call("POST", "/v2/auth/authenticate", {}, { body: { scopes: "repo" }, valid: false })).status).toBe(422);

    // Finalized through the API, and the setup variant of the browser's return.
    const second = await call("POST", "/v2/auth/authenticate", {}, { body: { provider: "idp", scopes: ["openid"], force_new: true } });
    const secondBack = await server.follow(second.body.url);
    const finalize = { code: secondBack.searchParams.get("code"), state: secondBack.searchParams.get("state") };
    expect((await call("POST", "/v2/auth/callback/{provider_id}", { provider_id: "idp" }, { body: finalize })).status).toBe(200);
    expect((await call("POST", "/v2/auth/callback/{provider_id}", { provider_id: "idp" }, { body: finalize })).status).toBe(400);
    expect((await call("POST", "/v2/auth/callback/{provider_id}", { provider_id: "idp" }, { body: { code: "x" }, valid: false })).status).toBe(422);
    const third = await call("POST", "/v2/auth/authenticate", {}, { body: { provider: "idp", scopes: ["openid"], force_new: true } });
    const thirdBack = await server.follow(third.body.url);
    const setup = `/v2/auth/setup/idp${thirdBack.search}&setup_action=install&installation_id=42`;
    const done = await callPath("GET", "/v2/auth/setup/{provider_id}", setup);
    expect(done.body).toMatchObject({ status: "completed", setup_action: "install", installation_id: 42 });
    expect((await callPath("GET", "/v2/auth/setup/{provider_id}", "/v2/auth/setup/idp?installation_id=abc")).status).toBe(422);
    expect((await callPath("GET", "/v2/auth/setup/{provider_id}", "/v2/auth/setup/idp?error=access_denied")).status).toBe(400);
  });

  it("holds for tokens, the Slack pair and connections", async () => {
    const listed = await call("GET", "/v2/auth/tokens", {}, { query: "?provider_id=idp" });
    expect(listed.body.length).toBeGreaterThan(0);
    const tokenId = listed.body[0].id as string;
    expect((await call("GET", "/v2/auth/tokens")).status).toBe(200);
    expect((await call("PATCH", "/v2/auth/tokens/{token_id}/metadata", { token_id: tokenId }, { body: { provider_account_label: "work", is_default: null } })).status).toBe(200);
    expect((await call("PATCH", "/v2/auth/tokens/{token_id}/metadata", { token_id: tokenId }, { body: { is_default: "maybe" }, valid: false })).status).toBe(422);
    expect((await call("PATCH", "/v2/auth/tokens/{token_id}/metadata", { token_id: "nope" }, { body: {} })).status).toBe(404);
    expect((await call("GET", "/v2/auth/tokens/exists", {}, { query: "?provider_id=idp" })).body).toEqual({ has_token: true });
    expect((await call("GET", "/v2/auth/tokens/exists")).status).toBe(422);
    expect((await call("GET", "/v2/auth/tokens/workspace/slack/exists")).body).toEqual({ has_token: false });
    await storeToken(t, ws.apiKey, { providerId: "slack" });
    await t.app.db.prisma.oAuthProvider.updateMany({ where: { workspaceId: ws.workspaceId, providerId: "slack" }, data: { providerType: "slack" } });
    expect((await call("GET", "/v2/auth/tokens/workspace/slack/exists")).body).toEqual({ has_token: true });
    expect((await call("DELETE", "/v2/auth/tokens/workspace/slack")).status).toBe(200);

    const agent = "support-bot";
    const connected = await call("POST", "/v2/auth/agents/{agent_id}/connections", { agent_id: agent }, { body: { oauth_token_id: tokenId } });
    expect(connected.status).toBe(201);
    expect((await call("POST", "/v2/auth/agents/{agent_id}/connections", { agent_id: agent }, { body: { oauth_token_id: "github:made-up" } })).status).toBe(404);
    expect((await call("POST", "/v2/auth/agents/{agent_id}/connections", { agent_id: "Bad" }, { body: { oauth_token_id: tokenId } })).status).toBe(422);
    expect((await call("GET", "/v2/auth/agents/{agent_id}/connections", { agent_id: agent })).body.data).toHaveLength(1);
    expect((await call("GET", "/v2/auth/agents/{agent_id}/connections", { agent_id: "Bad" })).status).toBe(422);
    expect((await call("DELETE", "/v2/auth/agents/{agent_id}/connections/{connection_id}", { agent_id: agent, connection_id: connected.body.id })).status).toBe(204);
    expect((await call("DELETE", "/v2/auth/agents/{agent_id}/connections/{connection_id}", { agent_id: agent, connection_id: "x" })).status).toBe(404);

    expect((await call("DELETE", "/v2/auth/tokens/{token_id}", { token_id: tokenId })).status).toBe(204);
    expect((await call("DELETE", "/v2/auth/tokens/{token_id}", { token_id: tokenId })).status).toBe(404);
    expect((await call("DELETE", "/v2/auth/tokens", {}, { query: "?provider_id=idp" })).status).toBe(200);
    expect((await call("DELETE", "/v2/auth/tokens")).status).toBe(422);
  });

  it("holds for the code-host integrations and their repositories", async () => {
    const installation = await t.request("POST", "/v2/integrations/forge-codehost/installations", {
      key: ws.apiKey,
      body: { installation_id: 5, name: "acme", repositories: [{ id: 9, owner: "acme", name: "agent", url: "https://github.com/acme/agent" }] },
    });
    expect(installation.status).toBe(201);
    const id = installation.body.id as string;
    for (const template of ["/v1/integrations/codehost/{integration_id}/repos", "/v1/integrations/forge/codehost/{integration_id}/repos"]) {
      expect((await call("GET", template, { integration_id: id })).body).toHaveLength(1);
      expect((await call("GET", template, { integration_id: "00000000-0000-4000-8000-000000000000" })).status).toBe(404);
      expect((await call("GET", template, { integration_id: "abc" })).status).toBe(422);
    }
    expect((await call("GET", "/v1/integrations/codehost/install")).body).toHaveLength(1);
    expect((await call("GET", "/v1/integrations/forge/codehost/install")).body).toHaveLength(1);
  });

  it("covered every operation of these paths", () => {
    const expected = operationsUnder("/v2/auth", "/v1/integrations").sort();
    expect([...covered].sort()).toEqual(expected);
  });
});

/** A call whose whole path and query were made elsewhere (a provider's redirect); no credentials (a browser). */
async function callPath(method: string, template: string, path: string) {
  const res = await t.request(method, path);
  expectAnswer(method, template, res);
  covered.add(`${method} ${template}`);
  return res;
}
