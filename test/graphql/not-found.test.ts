import { randomUUID } from "node:crypto";
import { getNamedType, isInputObjectType, type GraphQLInputType } from "graphql";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { schema } from "../../src/graphql/types/index.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { storeToken } from "../support/oauth.js";
import { globalId, gqlOk } from "./support.js";

/**
 * UserError.field is "the path to the input field at fault": a NOT_FOUND names the argument (or input
 * field) that referred to the missing object, and never an argument the mutation does not have.
 */

let t: TestApp;
let ws: NewWorkspace;
let githubToken: string;

beforeAll(async () => {
  t = await startTestApp({ PIPELINE_WORKER: "off" });
  ws = await t.workspace();
  githubToken = (await storeToken(t, ws.apiKey, { providerId: "github" })).id;
  await storeToken(t, ws.apiKey, { providerId: "gitlab" });
});
afterAll(() => t.close());

const unknown = (typename: string) => globalId(typename, randomUUID());
const errors = "userErrors { field message code }";

/** [mutation, a call of it naming something that does not exist, its variables, the field the NOT_FOUND names]. */
const CASES = (): [string, string, Record<string, unknown>, string[]][] => [
  ["agentConnectionCreate", `mutation { agentConnectionCreate(agentId: "abc", input: { oauthTokenId: "nope" }) { ${errors} } }`, {}, ["input", "oauthTokenId"]],
  ["agentConnectionDelete", `mutation($id: ID!) { agentConnectionDelete(id: $id) { ${errors} } }`, { id: unknown("AgentConnection") }, ["id"]],
  [
    "codehostInstallationRepositoriesSet",
    `mutation($id: ID!) { codehostInstallationRepositoriesSet(id: $id, input: { repositories: [] }) { ${errors} } }`,
    { id: unknown("CodehostInstallation") },
    ["id"],
  ],
  ["deploymentDelete", `mutation($id: ID!) { deploymentDelete(id: $id) { ${errors} } }`, { id: unknown("Deployment") }, ["id"]],
  ["deploymentPushTokenCreate", `mutation($id: ID!) { deploymentPushTokenCreate(deploymentId: $id) { ${errors} } }`, { id: unknown("Deployment") }, ["deploymentId"]],
  ["deploymentUpdate", `mutation($id: ID!) { deploymentUpdate(id: $id, input: { shareable: true }) { ${errors} } }`, { id: unknown("Deployment") }, ["id"]],
  ["deploymentUploadUrlCreate", `mutation($id: ID!) { deploymentUploadUrlCreate(deploymentId: $id) { ${errors} } }`, { id: unknown("Deployment") }, ["deploymentId"]],
  ["listenerDelete", `mutation($id: ID!) { listenerDelete(id: $id) { ${errors} } }`, { id: unknown("Listener") }, ["id"]],
  ["listenerUpdate", `mutation($id: ID!) { listenerUpdate(id: $id, input: { version: "2" }) { ${errors} } }`, { id: unknown("Listener") }, ["id"]],
  ["oauthAuthenticate", `mutation { oauthAuthenticate(input: { provider: "nope", scopes: ["a"] }) { ${errors} } }`, {}, ["input", "provider"]],
  [
    "oauthAuthenticate",
    `mutation($token: String!) { oauthAuthenticate(input: { provider: "github", scopes: ["a"], tokenId: $token }) { ${errors} } }`,
    { token: randomUUID() },
    ["input", "tokenId"],
  ],
  [
    "oauthAuthenticate",
    `mutation($token: String!) { oauthAuthenticate(input: { provider: "gitlab", scopes: ["a"], tokenId: $token }) { ${errors} } }`,
    { token: githubToken },
    ["input", "tokenId"],
  ],
  ["oauthProviderDelete", `mutation($id: ID!) { oauthProviderDelete(id: $id) { ${errors} } }`, { id: unknown("OAuthProvider") }, ["id"]],
  ["oauthProviderUpdate", `mutation($id: ID!) { oauthProviderUpdate(id: $id, input: { name: "n" }) { ${errors} } }`, { id: unknown("OAuthProvider") }, ["id"]],
  ["oauthTokenDelete", `mutation($id: ID!) { oauthTokenDelete(id: $id) { ${errors} } }`, { id: unknown("OAuthToken") }, ["id"]],
  ["oauthTokenUpdate", `mutation($id: ID!) { oauthTokenUpdate(id: $id, input: { providerAccountLabel: "l" }) { ${errors} } }`, { id: unknown("OAuthToken") }, ["id"]],
  ["revisionCreate", `mutation($id: ID!) { revisionCreate(deploymentId: $id, input: {}) { ${errors} } }`, { id: unknown("Deployment") }, ["deploymentId"]],
  ["revisionInterrupt", `mutation($id: ID!) { revisionInterrupt(id: $id) { ${errors} } }`, { id: unknown("Revision") }, ["id"]],
  ["revisionRedeploy", `mutation($id: ID!) { revisionRedeploy(id: $id) { ${errors} } }`, { id: unknown("Revision") }, ["id"]],
];

/** Mutations that refer to no existing object, so never answer NOT_FOUND. */
const NEVER_NOT_FOUND = ["codehostInstallationRegister", "deploymentCreate", "listenerCreate", "oauthFinalize", "oauthProviderCreate", "oauthProviderDiscover"];

/** Whether `path` leads from one of the mutation's arguments through its input fields. */
function isArgumentPath(mutation: string, path: string[]): boolean {
  const [argument, ...fields] = path;
  let type: GraphQLInputType | undefined = schema.getMutationType()!.getFields()[mutation]?.args.find((a) => a.name === argument)?.type;
  for (const field of fields) {
    const named = type && getNamedType(type);
    type = named && isInputObjectType(named) ? named.getFields()[field]?.type : undefined;
  }
  return type !== undefined;
}

describe("NOT_FOUND userErrors", () => {
  it("covers every mutation: each either appears below or cannot answer NOT_FOUND", () => {
    const covered = new Set([...CASES().map(([name]) => name), ...NEVER_NOT_FOUND]);
    expect([...covered].sort()).toEqual(Object.keys(schema.getMutationType()!.getFields()).sort());
  });

  it("names the argument or input field that referred to the missing object, one the mutation has", async () => {
    for (const [name, query, variables, field] of CASES()) {
      const what = `${name} ${JSON.stringify(variables)}`;
      expect(isArgumentPath(name, field), `${what}: ${field.join(".")} is not an argument path`).toBe(true);
      const payload = (await gqlOk(t, ws.apiKey, query, variables))[name];
      expect(payload.userErrors, what).toEqual([{ field, message: expect.stringMatching(/not found/), code: "NOT_FOUND" }]);
    }
  });
});
