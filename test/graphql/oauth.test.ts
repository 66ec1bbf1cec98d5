import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { callbackUrl, OAUTH_ENV, pathOf } from "../support/oauth.js";
import { type OAuthServer, startOAuthServer } from "../support/oauth-server.js";
import { subscribeSse, subscribeWs, wsClient } from "./live.js";
import { gql, gqlOk } from "./support.js";
import { waitFor } from "../support/wait.js";

/** The OAuth service over GraphQL: providers, flows (and their subscription over graphql-ws and SSE), tokens without values. */

let t: TestApp;
let url: string;
let server: OAuthServer;
let ws: NewWorkspace;
let providerGid: string;

const errors = "userErrors { field message code }";
const AUTHENTICATE = `mutation($input: OAuthAuthenticateInput!) { oauthAuthenticate(input: $input) {
  status url flow { id uuid status scopes expiresAt provider { providerId } } oauthToken { id uuid } ${errors} } }`;
const FLOW_SUB = `subscription($id: ID!) { oauthFlowStatusChanged(flowId: $id) { uuid status message oauthToken { uuid providerId scopes providerAccountLabel } } }`;

beforeAll(async () => {
  server = await startOAuthServer();
  t = await startTestApp({ ...OAUTH_ENV, PIPELINE_WORKER: "off" });
  url = await t.app.start();
  ws = await t.workspace();
  const { clientId, clientSecret } = await server.addClient({ redirectUris: [callbackUrl("idp")] });
  const created = await gqlOk(
    t,
    ws.apiKey,
    `mutation($input: OAuthProviderCreateInput!) { oauthProviderCreate(input: $input) { oauthProvider { id uuid providerId hasClientSecret usesPkce tokenEndpointAuthMethod } ${errors} } }`,
    {
      input: {
        providerId: "idp", name: "IdP", clientId, clientSecret: t.guard.secret(clientSecret!), authUrl: `${server.issuer}/auth`, tokenUrl: `${server.issuer}/token`,
        usesPkce: true, tokenEndpointAuthMethod: "CLIENT_SECRET_BASIC", revocationUrl: `${server.issuer}/token/revocation`,
      },
    },
  );
  expect(created.oauthProviderCreate).toMatchObject({
    oauthProvider: { providerId: "idp", hasClientSecret: true, usesPkce: true, tokenEndpointAuthMethod: "client_secret_basic" },
    userErrors: [],
  });
  providerGid = created.oauthProviderCreate.oauthProvider.id;
});
afterAll(async () => {
  await t?.close();
  await server?.close();
});

describe("providers over GraphQL", () => {
  it("refuses a provider id taken in the workspace with a CONFLICT at providerId", async () => {
    const again = await gqlOk(
      t,
      ws.apiKey,
      `mutation($input: OAuthProviderCreateInput!) { oauthProviderCreate(input: $input) { oauthProvider { id } ${errors} } }`,
      { input: { providerId: "idp", name: "IdP again", clientId: "another", authUrl: `${server.issuer}/auth`, tokenUrl: `${server.issuer}/token` } },
    );
    expect(again.oauthProviderCreate).toEqual({
      oauthProvider: null,
      userErrors: [{ field: ["input", "providerId"], message: expect.stringContaining("'idp' already exists"), code: "CONFLICT" }],
    });
  });
});

describe("flows over GraphQL", () => {
  it("starts a flow, follows it over graphql-ws and SSE until it completes, and shows the token without its value", async () => {
    const started = (await gqlOk(t, ws.apiKey, AUTHENTICATE, { input: { provider: "idp", scopes: ["openid", "email"] } })).oauthAuthenticate;
    expect(started).toMatchObject({ status: "PENDING", url: expect.stringContaining(`${server.issuer}/auth?`), oauthToken: null, userErrors: [] });
    expect(started.flow).toMatchObject({ status: "PENDING", scopes: ["openid", "email"], provider: { providerId: "idp" } });

    const client = wsClient(url, ws.apiKey);
    try {
      const overWs = subscribeWs(client, FLOW_SUB, { id: started.flow.id });
      const overSse = subscribeSse(t, ws.apiKey, FLOW_SUB, { id: started.flow.id });
      await waitFor(() => overWs.messages.length > 0 && overSse.messages.length > 0, Boolean, { what: "the current status" });

      const back = await server.follow(started.url, { account: "dana" });
      expect((await t.request("GET", pathOf(back))).status).toBe(200);
      await Promise.all([overWs.done, overSse.done]);
      for (const messages of [overWs.messages, overSse.messages]) {
        expect(messages.map((m) => m.data.oauthFlowStatusChanged.status)).toEqual(["PENDING", "COMPLETED"]);
        expect(messages[1]!.data.oauthFlowStatusChanged.oauthToken).toEqual({
          uuid: expect.any(String), providerId: "idp", scopes: ["openid", "email"], providerAccountLabel: "dana@example.test",
        });
      }
    } finally {
      await client.dispose();
    }

    const again = (await gqlOk(t, ws.apiKey, AUTHENTICATE, { input: { provider: "idp", scopes: ["email"] } })).oauthAuthenticate;
    expect(again).toMatchObject({ status: "COMPLETED", url: null, flow: null, oauthToken: { uuid: expect.any(String) } });
    // No field of the schema gives a token's value.
    const tokens = await gqlOk(t, ws.apiKey, `{ oauthTokens(providerId: "idp") { totalCount edges { node { uuid providerId isDefault provider { id } } } } }`);
    expect(tokens.oauthTokens).toMatchObject({ totalCount: 1, edges: [{ node: { providerId: "idp", isDefault: true, provider: { id: providerGid } } }] });
  });

  it("answers a providerId PostgreSQL cannot hold, or longer than REST's, with BAD_USER_INPUT naming it, as REST does", async () => {
    // Found by the GraphQL fuzzer: a NUL reached PostgreSQL and came back a 500.
    const TOKENS = `query($p: String) { oauthTokens(providerId: $p) { totalCount edges { node { uuid } } } }`;
    for (const [providerId, why] of [["\u0000", /providerId: .*NUL/], ["a".repeat(101), /providerId: .*at most 100/]] as const) {
      const res = await gql(t, ws.apiKey, TOKENS, { p: providerId });
      expect(res.status).toBe(200);
      expect(res.data).toBeNull();
      expect(res.errors).toEqual([expect.objectContaining({ message: expect.stringMatching(why), path: ["oauthTokens"], extensions: { code: "BAD_USER_INPUT" } })]);
      const rest = await t.request("GET", `/v2/auth/tokens?provider_id=${encodeURIComponent(providerId)}`, { key: ws.apiKey });
      expect(rest.status).toBe(422);
    }
    // An unknown provider is no error: it has no tokens.
    expect((await gqlOk(t, ws.apiKey, TOKENS, { p: "nobody" })).oauthTokens).toEqual({ totalCount: 0, edges: [] });
  });

  it("ends the subscription with a failed flow, and finalizes with the code and state", async () => {
    const first = (await gqlOk(t, ws.apiKey, AUTHENTICATE, { input: { provider: "idp", scopes: ["openid"], forceNew: true } })).oauthAuthenticate;
    const sse = subscribeSse(t, ws.apiKey, FLOW_SUB, { id: first.flow.id });
    await waitFor(() => sse.messages.length > 0, Boolean, { what: "the current status" });
    const denied = await server.follow(first.url, { deny: true });
    expect((await t.request("GET", pathOf(denied))).status).toBe(400);
    await sse.done;
    expect(sse.messages.map((m) => m.data.oauthFlowStatusChanged)).toEqual([
      { uuid: first.flow.uuid, status: "PENDING", message: "", oauthToken: null },
      { uuid: first.flow.uuid, status: "FAILED", message: expect.stringContaining("access_denied"), oauthToken: null },
    ]);

    const second = (await gqlOk(t, ws.apiKey, AUTHENTICATE, { input: { provider: "idp", scopes: ["openid"], forceNew: true, isDefault: false } })).oauthAuthenticate;
    const back = await server.follow(second.url);
    const FINALIZE = `mutation($p: String!, $input: OAuthFinalizeInput!) { oauthFinalize(providerId: $p, input: $input) { flow { status } oauthToken { isDefault } ${errors} } }`;
    const done = (await gqlOk(t, ws.apiKey, FINALIZE, { p: "idp", input: { code: back.searchParams.get("code"), state: back.searchParams.get("state") } })).oauthFinalize;
    expect(done).toEqual({ flow: { status: "COMPLETED" }, oauthToken: { isDefault: false }, userErrors: [] });
    const replay = (await gqlOk(t, ws.apiKey, FINALIZE, { p: "idp", input: { code: back.searchParams.get("code"), state: back.searchParams.get("state") } })).oauthFinalize;
    expect(replay).toEqual({ flow: null, oauthToken: null, userErrors: [{ field: null, message: expect.stringMatching(/already been used/), code: "NOT_ALLOWED" }] });
  });

  it("refuses another workspace's flow in the subscription and an unknown provider in the mutation", async () => {
    const flow = (await gqlOk(t, ws.apiKey, AUTHENTICATE, { input: { provider: "idp", scopes: [], forceNew: true } })).oauthAuthenticate.flow;
    const intruder = await t.workspace();
    const sse = subscribeSse(t, intruder.apiKey, FLOW_SUB, { id: flow.id });
    await sse.done;
    expect(sse.messages).toEqual([{ errors: [expect.objectContaining({ extensions: { code: "NOT_FOUND" } })] }]);
    const unknown = (await gqlOk(t, intruder.apiKey, AUTHENTICATE, { input: { provider: "idp", scopes: [] } })).oauthAuthenticate;
    expect(unknown.userErrors).toEqual([{ field: ["input", "provider"], message: "Provider ID idp not found.", code: "NOT_FOUND" }]);
  });
});

describe("providers and tokens over GraphQL", () => {
  it("updates and deletes a provider, relabels and deletes a token", async () => {
    const mine = await t.workspace();
    const create = `mutation($input: OAuthProviderCreateInput!) { oauthProviderCreate(input: $input) { oauthProvider { id } ${errors} } }`;
    const bad = (await gqlOk(t, mine.apiKey, create, { input: { providerId: "x y", name: "n", clientId: "c", authUrl: "nope", tokenUrl: "https://t.example", clientSecret: "hidden-secret-value-1" } }))
      .oauthProviderCreate;
    expect(bad.userErrors.map((e: { field: string[] }) => e.field.join("."))).toEqual(["input.providerId", "input.authUrl"]);
    const id = (await gqlOk(t, mine.apiKey, create, { input: { providerId: "gh", name: "GH", clientId: "c", authUrl: "https://a.example", tokenUrl: "https://t.example" } }))
      .oauthProviderCreate.oauthProvider.id;
    const updated = await gqlOk(t, mine.apiKey, `mutation($id: ID!) { oauthProviderUpdate(id: $id, input: { name: "GitHub" }) { oauthProvider { name } ${errors} } }`, { id });
    expect(updated.oauthProviderUpdate).toEqual({ oauthProvider: { name: "GitHub" }, userErrors: [] });
    const listed = await gqlOk(t, mine.apiKey, `{ oauthProviders { totalCount edges { node { id providerId } } } }`);
    expect(listed.oauthProviders).toEqual({ totalCount: 1, edges: [{ node: { id, providerId: "gh" } }] });
    const deleted = await gqlOk(t, mine.apiKey, `mutation($id: ID!) { oauthProviderDelete(id: $id) { deletedOAuthProviderId ${errors} } }`, { id });
    expect(deleted.oauthProviderDelete).toEqual({ deletedOAuthProviderId: id, userErrors: [] });
    const again = await gqlOk(t, mine.apiKey, `mutation($id: ID!) { oauthProviderDelete(id: $id) { deletedOAuthProviderId ${errors} } }`, { id });
    expect(again.oauthProviderDelete.userErrors).toEqual([{ field: ["id"], message: expect.stringMatching(/not found/), code: "NOT_FOUND" }]);

    const token = (await gqlOk(t, ws.apiKey, `{ oauthTokens(first: 1) { edges { node { id } } } }`)).oauthTokens.edges[0].node.id;
    const relabel = `mutation($id: ID!) { oauthTokenUpdate(id: $id, input: { providerAccountLabel: "work" }) { oauthToken { providerAccountLabel } ${errors} } }`;
    expect((await gqlOk(t, ws.apiKey, relabel, { id: token })).oauthTokenUpdate).toEqual({ oauthToken: { providerAccountLabel: "work" }, userErrors: [] });
    expect((await gqlOk(t, mine.apiKey, relabel, { id: token })).oauthTokenUpdate.userErrors[0].code).toBe("NOT_FOUND");
    const remove = `mutation($id: ID!) { oauthTokenDelete(id: $id) { deletedOAuthTokenId ${errors} } }`;
    expect((await gqlOk(t, mine.apiKey, remove, { id: token })).oauthTokenDelete.userErrors[0].code).toBe("NOT_FOUND");
    expect((await gqlOk(t, ws.apiKey, remove, { id: token })).oauthTokenDelete).toEqual({ deletedOAuthTokenId: token, userErrors: [] });
    expect((await gql(t, ws.apiKey, `query($id: ID!) { node(id: $id) { id } }`, { id: token })).data).toEqual({ node: null });
  });
});
