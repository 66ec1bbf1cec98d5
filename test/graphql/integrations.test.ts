import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { storeToken } from "../support/oauth.js";
import { gql, gqlOk } from "./support.js";

let t: TestApp;
let ws: NewWorkspace;

beforeAll(async () => {
  t = await startTestApp({ PIPELINE_WORKER: "off" });
  ws = await t.workspace();
});
afterAll(() => t.close());

const REGISTER = `mutation($input: CodehostInstallationRegisterInput!) { codehostInstallationRegister(input: $input) {
  codehostInstallation { id uuid installationId name repositorySelection settingsUrl createdAt } userErrors { field message code } } }`;
const CONNECT = `mutation($agent: String!, $input: AgentConnectionCreateInput!) { agentConnectionCreate(agentId: $agent, input: $input) {
  agentConnection { id uuid agentId oauthTokenId providerId providerAccountLabel scopes expiresAt createdBy createdAt } userErrors { field message code } } }`;
const DISCONNECT = `mutation($id: ID!) { agentConnectionDelete(id: $id) { deletedAgentConnectionId userErrors { field message code } } }`;

describe("codehostInstallationRegister", () => {
  it("registers an installation, lists it, and answers a duplicate with CONFLICT", async () => {
    const input = { installationId: 4242, name: "acme", repositorySelection: "SELECTED", settingsUrl: "https://git.example/settings/4242" };
    const res = (await gqlOk(t, ws.apiKey, REGISTER, { input })).codehostInstallationRegister;
    expect(res).toEqual({
      codehostInstallation: { id: expect.any(String), uuid: expect.any(String), createdAt: expect.any(String), ...input },
      userErrors: [],
    });
    const list = await gqlOk(t, ws.apiKey, `{ codehostInstallations { totalCount edges { node { id name } } } }`);
    expect(list.codehostInstallations).toEqual({ totalCount: 1, edges: [{ node: { id: res.codehostInstallation.id, name: "acme" } }] });
    const rest = await t.request("GET", "/v1/integrations/codehost/install", { key: ws.apiKey });
    expect(rest.body).toEqual([{ id: res.codehostInstallation.uuid, installation_id: 4242, name: "acme" }]);

    const dup = (await gqlOk(t, ws.apiKey, REGISTER, { input })).codehostInstallationRegister;
    expect(dup).toEqual({ codehostInstallation: null, userErrors: [{ field: ["input", "installationId"], message: expect.stringContaining("4242"), code: "CONFLICT" }] });
  });

  it("names invalid fields", async () => {
    const res = (await gqlOk(t, ws.apiKey, REGISTER, { input: { installationId: 0, name: "x", settingsUrl: "http://insecure.example" } }))
      .codehostInstallationRegister;
    expect(res.codehostInstallation).toBeNull();
    expect(res.userErrors.map((e: { field: string[]; code: string }) => [e.field.join("."), e.code])).toEqual([
      ["input.installationId", "INVALID"],
      ["input.settingsUrl", "INVALID"],
    ]);
  });
});

describe("agent connections", () => {
  it("connects, lists per agent, and disconnects", async () => {
    const token = await storeToken(t, ws.apiKey);
    const created = (await gqlOk(t, ws.apiKey, CONNECT, { agent: "support-bot", input: { oauthTokenId: token.id } })).agentConnectionCreate;
    expect(created).toEqual({
      agentConnection: {
        id: expect.any(String),
        uuid: expect.any(String),
        agentId: "support-bot",
        oauthTokenId: token.id,
        providerId: "github",
        providerAccountLabel: "acme-bot",
        scopes: ["repo"],
        expiresAt: token.expiresAt!.toISOString(),
        createdBy: expect.stringMatching(/^api_key:/),
        createdAt: expect.any(String),
      },
      userErrors: [],
    });
    await gqlOk(t, ws.apiKey, CONNECT, { agent: "other-bot", input: { oauthTokenId: token.id } });
    const list = await gqlOk(t, ws.apiKey, `{ agentConnections(agentId: "support-bot") { totalCount edges { node { id } } } }`);
    expect(list.agentConnections).toEqual({ totalCount: 1, edges: [{ node: { id: created.agentConnection.id } }] });

    const intruder = await t.workspace();
    const foreign = (await gqlOk(t, intruder.apiKey, DISCONNECT, { id: created.agentConnection.id })).agentConnectionDelete;
    expect(foreign).toEqual({ deletedAgentConnectionId: null, userErrors: [{ field: ["id"], message: expect.any(String), code: "NOT_FOUND" }] });

    const deleted = (await gqlOk(t, ws.apiKey, DISCONNECT, { id: created.agentConnection.id })).agentConnectionDelete;
    expect(deleted).toEqual({ deletedAgentConnectionId: created.agentConnection.id, userErrors: [] });
    const rest = await t.request("GET", "/v2/auth/agents/support-bot/connections", { key: ws.apiKey });
    expect(rest.body).toEqual({ data: [] });
  });

  it("validates the agent id with REST's rule and the token id, and refuses a duplicate", async () => {
    const bad = (await gqlOk(t, ws.apiKey, CONNECT, { agent: "Bad_Agent", input: { oauthTokenId: "has space" } })).agentConnectionCreate;
    expect(bad.agentConnection).toBeNull();
    expect(bad.userErrors.map((e: { field: string[] }) => e.field.join("."))).toEqual(["agentId"]);
    const token = (await gqlOk(t, ws.apiKey, CONNECT, { agent: "good-agent", input: { oauthTokenId: "has space" } })).agentConnectionCreate;
    expect(token.userErrors).toEqual([{ field: ["input", "oauthTokenId"], message: expect.any(String), code: "INVALID" }]);
    const stored = await storeToken(t, ws.apiKey);
    await gqlOk(t, ws.apiKey, CONNECT, { agent: "good-agent", input: { oauthTokenId: stored.id } });
    const dup = (await gqlOk(t, ws.apiKey, CONNECT, { agent: "good-agent", input: { oauthTokenId: stored.id } })).agentConnectionCreate;
    expect(dup.userErrors).toEqual([{ field: ["input", "oauthTokenId"], message: expect.any(String), code: "CONFLICT" }]);
    const unknown = (await gqlOk(t, ws.apiKey, CONNECT, { agent: "good-agent", input: { oauthTokenId: "github:made-up" } })).agentConnectionCreate;
    expect(unknown.userErrors).toEqual([{ field: ["input", "oauthTokenId"], message: "OAuth token ID github:made-up not found.", code: "NOT_FOUND" }]);

    const listBad = await gql(t, ws.apiKey, `{ agentConnections(agentId: "NOPE!") { totalCount } }`);
    expect(listBad.errors).toEqual([expect.objectContaining({ message: expect.stringMatching(/^agentId: /), extensions: { code: "BAD_USER_INPUT" } })]);
  });
});
