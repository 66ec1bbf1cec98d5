import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { accessTokenOf, authorize, OAUTH_ENV } from "../support/oauth.js";
import { waitFor } from "../support/wait.js";
import { type OAuthServer, startOAuthServer } from "../support/oauth-server.js";

/** Providers configured by hand and discovered from an MCP server (RFC 9728, RFC 8414 / OpenID discovery, RFC 7591). */

let t: TestApp;
let server: OAuthServer;
let closed: OAuthServer;
let ws: NewWorkspace;

beforeAll(async () => {
  server = await startOAuthServer();
  closed = await startOAuthServer({ registration: false });
  t = await startTestApp({ ...OAUTH_ENV, PIPELINE_WORKER: "off" });
  ws = await t.workspace();
});
afterAll(async () => {
  await t?.close();
  await server?.close();
  await closed?.close();
});

const base = {
  provider_id: "github",
  name: "GitHub",
  client_id: "Iv1.0123456789",
  auth_url: "https://github.example/login/oauth/authorize",
  token_url: "https://github.example/login/oauth/access_token",
};

describe("providers configured by hand", () => {
  it("creates, reads, lists, updates and deletes, never showing the client secret", async () => {
    const mine = await t.workspace();
    const secret = t.guard.secret();
    const created = await t.request("POST", "/v2/auth/providers", { key: mine.apiKey, body: { ...base, client_secret: secret, provider_type: "slack" } });
    expect(created.status, created.text).toBe(200);
    expect(created.body).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      organization_id: mine.organizationId,
      provider_id: "github",
      name: "GitHub",
      client_id: "Iv1.0123456789",
      auth_url: base.auth_url,
      token_url: base.token_url,
      uses_pkce: false,
      code_challenge_method: "S256",
      provider_type: "slack",
      mcp_server_url: null,
      token_endpoint_auth_method: "client_secret_post",
      is_dynamic_client: false,
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
    expect((await t.request("GET", "/v2/auth/providers/github", { key: mine.apiKey })).body).toEqual(created.body);
    expect((await t.request("GET", "/v2/auth/providers", { key: mine.apiKey })).body).toEqual([created.body]);

    const updated = await t.request("PATCH", "/v2/auth/providers/github", { key: mine.apiKey, body: { name: "GitHub Enterprise", uses_pkce: true, client_secret: t.guard.secret() } });
    expect(updated.status).toBe(200);
    expect(updated.body).toMatchObject({ name: "GitHub Enterprise", uses_pkce: true, client_id: base.client_id });
    const unchanged = await t.request("PATCH", "/v2/auth/providers/github", { key: mine.apiKey, body: { name: null } });
    expect(unchanged.status, unchanged.text).toBe(200);
    expect(unchanged.body.name).toBe("GitHub Enterprise");

    const dup = await t.request("POST", "/v2/auth/providers", { key: mine.apiKey, body: base });
    expect(dup.status).toBe(409);
    expect(dup.body).toEqual({ detail: "A provider with provider_id 'github' already exists in this workspace." });

    const deleted = await t.request("DELETE", "/v2/auth/providers/github", { key: mine.apiKey });
    expect(deleted.status).toBe(200);
    expect(deleted.body).toEqual({ provider_id: "github", deleted: true, deleted_tokens: 0 });
    for (const method of ["GET", "PATCH", "DELETE"]) {
      const res = await t.request(method, "/v2/auth/providers/github", { key: mine.apiKey, body: method === "PATCH" ? { name: "x" } : undefined });
      expect(res.status, method).toBe(404);
      expect(res.body).toEqual({ detail: "Provider ID github not found." });
    }
  });

  it("validates every field at once and never echoes the client secret", async () => {
    const secret = t.guard.secret(`${"s".repeat(4097)}-${Date.now()}`);
    const res = await t.request("POST", "/v2/auth/providers", {
      key: ws.apiKey,
      body: { provider_id: "bad id", client_id: 7, client_secret: secret, auth_url: "ftp://x", token_url: "not a url", token_endpoint_auth_method: "magic" },
    });
    expect(res.status).toBe(422);
    expect(res.body.detail.map((d: { loc: string[] }) => d.loc.join("."))).toEqual([
      "body.provider_id",
      "body.name",
      "body.client_id",
      "body.client_secret",
      "body.auth_url",
      "body.token_url",
      "body.token_endpoint_auth_method",
    ]);
    expect(res.body.detail.find((d: { loc: string[] }) => d.loc[1] === "client_secret")).not.toHaveProperty("input");
    expect((await t.request("GET", "/v2/auth/providers", { key: ws.apiKey })).body).toEqual([]);
  });

  it("refuses http endpoints unless OAUTH_ALLOW_HTTP is on", async () => {
    const strict = await startTestApp({ PIPELINE_WORKER: "off" });
    try {
      const mine = await strict.workspace();
      const res = await strict.request("POST", "/v2/auth/providers", { key: mine.apiKey, body: { ...base, auth_url: "http://127.0.0.1:1/auth" } });
      expect(res.status).toBe(422);
      // The setting that would accept it is named: an API client cannot guess it.
      expect(res.body.detail).toEqual([
        expect.objectContaining({
          loc: ["body", "auth_url"],
          msg: "Value error, must be an https URL: http:// is accepted only where the service runs with OAUTH_ALLOW_HTTP=on, as for a provider on its own machine",
        }),
      ]);
      // What is no URL at all is told only that.
      const garbage = await strict.request("POST", "/v2/auth/providers", { key: mine.apiKey, body: { ...base, token_url: "not a url" } });
      expect(garbage.status).toBe(422);
      expect(garbage.body.detail).toEqual([expect.objectContaining({ loc: ["body", "token_url"], msg: "Value error, must be an https URL" })]);
    } finally {
      await strict.close();
    }
  });
});

describe("mcp-discover", () => {
  it("answers 409 when the provider id was taken while it registered, and deletes the client it registered there (RFC 7592)", async () => {
    const mine = await t.workspace();
    const created: string[] = [];
    const deleted: string[] = [];
    const onCreate = (_ctx: unknown, client: { clientId: string }) => created.push(client.clientId);
    const onDelete = (_ctx: unknown, client: { clientId: string }) => deleted.push(client.clientId);
    server.provider.on("registration_create.success", onCreate);
    server.provider.on("registration_delete.success", onDelete);
    const hold = server.holdRegistrationEndpoint();
    let res: Awaited<ReturnType<typeof t.request>>;
    try {
      const discovering = t.request("POST", "/v2/auth/providers/mcp-discover", { key: mine.apiKey, body: { provider_id: "raced", name: "Raced", mcp_server_url: server.mcpUrl } });
      await waitFor(() => hold.arrived, (n) => n === 1, { what: "the registration to reach the server" });
      // Meanwhile someone creates a provider with that id by hand.
      expect((await t.request("POST", "/v2/auth/providers", { key: mine.apiKey, body: { ...base, provider_id: "raced" } })).status).toBe(200);
      hold.release();
      res = await discovering;
    } finally {
      hold.release();
      server.provider.off("registration_create.success", onCreate);
      server.provider.off("registration_delete.success", onDelete);
    }
    expect(res.status, res.text).toBe(409);
    expect(res.body).toEqual({ detail: "A provider with provider_id 'raced' already exists in this workspace." });
    expect(created).toHaveLength(1);
    expect(deleted).toEqual(created);
    expect(await server.provider.Client.find(created[0]!)).toBeUndefined();
    // The one made by hand is untouched.
    expect((await t.request("GET", "/v2/auth/providers/raced", { key: mine.apiKey })).body).toMatchObject({ client_id: base.client_id });
  });

  it("finds the authorization server through RFC 9728, reads its metadata, registers a client, and runs a flow with it", async () => {
    const mine = await t.workspace();
    const res = await t.request("POST", "/v2/auth/providers/mcp-discover", { key: mine.apiKey, body: { provider_id: "tools", name: "Tools MCP", mcp_server_url: server.mcpUrl } });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({
      provider_id: "tools",
      name: "Tools MCP",
      client_id: expect.any(String),
      auth_url: `${server.issuer}/auth`,
      token_url: `${server.issuer}/token`,
      uses_pkce: true,
      code_challenge_method: "S256",
      mcp_server_url: server.mcpUrl,
      token_endpoint_auth_method: "client_secret_post",
      is_dynamic_client: true,
    });
    // The client secret the server issued is sealed, never shown.
    const row = await t.app.db.prisma.oAuthProvider.findFirstOrThrow({ where: { workspaceId: mine.workspaceId, providerId: "tools" } });
    t.guard.secret(t.app.deps.secrets.open(row.clientSecret!));
    expect(row.revocationUrl).toBe(`${server.issuer}/token/revocation`);
    expect(row.issuer).toBe(server.issuer);

    // The registered client works: the redirect URI is this service's callback for the provider.
    const { callback } = await authorize(t, server, mine.apiKey, "tools", ["openid", "offline_access"]);
    expect(callback.provider_id).toBe("tools");
    expect(await accessTokenOf(t, mine.apiKey, "tools")).toEqual(expect.any(String));
  });

  it("falls back to the server's own origin without RFC 9728 metadata, and says when registration is not allowed", async () => {
    const res = await t.request("POST", "/v2/auth/providers/mcp-discover", { key: ws.apiKey, body: { provider_id: "closed", name: "Closed", mcp_server_url: `${closed.issuer}/other` } });
    expect(res.status).toBe(400);
    expect(res.body.detail).toMatch(/does not allow dynamic client registration \(RFC 7591\)/);
    expect((await t.request("GET", "/v2/auth/providers/closed", { key: ws.apiKey })).status).toBe(404);
  });

  it("answers 502 when the MCP server cannot be reached, 400 when it publishes no metadata, and stores nothing", async () => {
    await closed.pause();
    try {
      const down = await t.request("POST", "/v2/auth/providers/mcp-discover", { key: ws.apiKey, body: { provider_id: "down", name: "Down", mcp_server_url: `${closed.issuer}/mcp` } });
      expect(down.status).toBe(502);
      expect(down.body).toEqual({ detail: expect.stringMatching(/^Could not reach /) });
    } finally {
      await closed.resume();
    }
    // An origin that answers, but not with OAuth metadata: this service's own test double has none.
    const blank = await startTestApp({ ...OAUTH_ENV, PIPELINE_WORKER: "off" });
    try {
      const url = await blank.app.start();
      const none = await t.request("POST", "/v2/auth/providers/mcp-discover", { key: ws.apiKey, body: { provider_id: "none", name: "None", mcp_server_url: `${url}/mcp` } });
      expect(none.status).toBe(400);
      expect(none.body.detail).toMatch(/^No OAuth metadata found for the MCP server/);
    } finally {
      await blank.close();
    }
    expect((await t.request("GET", "/v2/auth/providers", { key: ws.apiKey })).body).toEqual([]);
  });

  it("answers 502 to metadata that names no URL, or endpoints a provider could not have, and stores nothing", async () => {
    // A hostile MCP server, its own authorization server: what it publishes is the test's to choose.
    let publish: (path: string) => unknown = () => null;
    const hostile = createServer((req, res) => {
      const body = publish(req.url ?? "");
      res.writeHead(body === null ? 404 : 200, { "content-type": "application/json" });
      res.end(body === null ? "{}" : JSON.stringify(body));
    });
    await new Promise<void>((resolve) => hostile.listen(0, "127.0.0.1", resolve));
    const base = `http://127.0.0.1:${(hostile.address() as AddressInfo).port}`;
    const metadata = (extra: Record<string, unknown>) => ({ issuer: base, authorization_endpoint: `${base}/auth`, token_endpoint: `${base}/token`, registration_endpoint: `${base}/reg`, ...extra });
    try {
      for (const [what, answer] of [
        ["an authorization server that is not a URL", (path: string) => (path.startsWith("/.well-known/oauth-protected-resource") ? { resource: `${base}/mcp`, authorization_servers: ["not a url"] } : null)],
        ["a javascript: authorization endpoint", (path: string) => (path.startsWith("/.well-known/oauth-authorization-server") ? metadata({ authorization_endpoint: "javascript:alert(1)" }) : null)],
        ["a token endpoint that is no URL", (path: string) => (path.startsWith("/.well-known/oauth-authorization-server") ? metadata({ token_endpoint: "::::" }) : null)],
      ] as const) {
        publish = answer;
        const res = await t.request("POST", "/v2/auth/providers/mcp-discover", { key: ws.apiKey, body: { provider_id: "hostile", name: "Hostile", mcp_server_url: `${base}/mcp` } });
        expect(res.status, what).toBe(502);
        expect(res.body.detail, what).toMatch(/not a URL|not an http\(s\) URL/);
      }
    } finally {
      await new Promise<void>((resolve) => hostile.close(() => resolve()));
    }
    expect((await t.request("GET", "/v2/auth/providers", { key: ws.apiKey })).body).toEqual([]);
  });

  it("answers 502 to a registered client a provider created by hand could not have, naming the value without quoting it, stores nothing, and deletes the client there", async () => {
    // Its own authorization server, whose RFC 7591 registration answers what the test chooses, and
    // whose RFC 7592 management URI records the deletions asked of it.
    let registered: Record<string, unknown> = {};
    const deletions: string[] = [];
    const hostile = createServer((req, res) => {
      const url = req.url ?? "";
      if (req.method === "DELETE") {
        deletions.push(`${url} ${req.headers.authorization}`);
        res.writeHead(204).end();
        return;
      }
      const body = url.startsWith("/.well-known/oauth-authorization-server")
        ? { issuer: base, authorization_endpoint: `${base}/auth`, token_endpoint: `${base}/token`, registration_endpoint: `${base}/reg` }
        : url.startsWith("/reg")
          ? registered
          : null;
      res.writeHead(body === null ? 404 : url.startsWith("/reg") ? 201 : 200, { "content-type": "application/json" });
      res.end(JSON.stringify(body ?? {}));
    });
    await new Promise<void>((resolve) => hostile.listen(0, "127.0.0.1", resolve));
    const base = `http://127.0.0.1:${(hostile.address() as AddressInfo).port}`;
    // Secrets the server hands out: the guard fails the test if one shows in an answer or a log line.
    const longSecret = t.guard.secret(`${"s".repeat(5000)}-${Date.now()}`);
    const nulSecret = t.guard.secret(`nul\u0000secret-${Date.now()}`);
    try {
      for (const [field, answer] of [
        // PostgreSQL cannot store a NUL: it was a 500.
        ["client_id", { client_id: "abc\u0000def", token_endpoint_auth_method: "none" }],
        // A hand-made provider's client_id is at most 1000 printable characters: this one was stored, and served by every read.
        ["client_id", { client_id: "x".repeat(900_000), token_endpoint_auth_method: "none" }],
        ["client_id", { client_id: "two words", token_endpoint_auth_method: "none" }],
        ["client_secret", { client_id: "ok", client_secret: longSecret, client_secret_expires_at: 0, token_endpoint_auth_method: "client_secret_post" }],
        ["client_secret", { client_id: "ok", client_secret: nulSecret, client_secret_expires_at: 0, token_endpoint_auth_method: "client_secret_post" }],
        ["token_endpoint_auth_method", { client_id: "ok", token_endpoint_auth_method: "private_key_jwt" }],
        ["token_endpoint_auth_method", { client_id: "ok", token_endpoint_auth_method: 7 }],
      ] as const) {
        const n = deletions.length;
        const token = t.guard.secret(`registration-access-token-${n}-${Date.now()}`);
        registered = { ...answer, registration_client_uri: `${base}/reg/${n}`, registration_access_token: token };
        const res = await t.request("POST", "/v2/auth/providers/mcp-discover", { key: ws.apiKey, body: { provider_id: "hostile", name: "Hostile", mcp_server_url: `${base}/mcp` } });
        expect(res.status, `${field}: ${res.text.slice(0, 300)}`).toBe(502);
        expect(res.body).toEqual({ detail: expect.stringContaining(`registered a client whose ${field} `) });
        expect(res.body.detail, field).not.toMatch(/abc|xxxx|two words|private_key_jwt/);
        expect(deletions.slice(n), field).toEqual([`/reg/${n} Bearer ${token}`]);
      }
    } finally {
      await new Promise<void>((resolve) => hostile.close(() => resolve()));
    }
    expect((await t.request("GET", "/v2/auth/providers", { key: ws.apiKey })).body).toEqual([]);
  });
});
