import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DatabaseWatch, editedBody, fieldNamesOf, fuzzRuns, hostileJson, hostileString } from "../support/fuzz.js";
import { type Fixtures, startFuzzApp } from "../support/fuzz-fixtures.js";
import { NOWHERE } from "../support/fuzz-routes.js";
import { expectGraphQLAnswer } from "../support/fuzz-shapes.js";
import type { TestApp } from "../support/app.js";

/**
 * Hostile variables for every GraphQL mutation (and the query fields that take arguments): never a
 * 5xx or an unexpected error, always errors with a code or userErrors of the documented shape, and
 * nothing written when the operation is refused.
 */

const MUTATION_RUNS = fuzzRuns(200);
const QUERY_RUNS = fuzzRuns(150);

let t: TestApp;
let fx: Fixtures;
let watch: DatabaseWatch;

beforeAll(async () => {
  ({ t, fx } = await startFuzzApp());
  watch = await DatabaseWatch.started(t.app.db.sql);
});
afterAll(() => t.close());

const gid = (typename: string, id: string) => Buffer.from(`${typename}:${id}`).toString("base64");
const camel = (key: string) => key.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
/** A REST body as GraphQL input: camelCase names (free-form objects have none to change), enums upper case. */
function toInput(
  value: unknown,
  enumFields = new Set(["source", "revision_source", "deployment_type", "environment", "compute_type", "repository_selection", "provider_type", "token_endpoint_auth_method"]),
): unknown {
  if (Array.isArray(value)) return value.map((v) => toInput(v, enumFields));
  if (typeof value !== "object" || value === null) return value;
  return Object.fromEntries(
    Object.entries(value).map(([k, v]) => [camel(k), enumFields.has(k) && typeof v === "string" ? v.toUpperCase() : toInput(v, enumFields)]),
  );
}

interface Mutation {
  name: string;
  document: string;
  variables: (f: Fixtures) => Record<string, unknown>;
}

const op = (name: string, args: string, params: string, selection: string) =>
  `mutation(${args}) { ${name}(${params}) { ${selection} userErrors { field message code } } }`;

const MUTATIONS: Mutation[] = [
  { name: "deploymentCreate", document: op("deploymentCreate", "$input: DeploymentCreateInput!", "input: $input", "deployment { id }"), variables: (f) => ({ input: toInput(f.bodies.deploymentCreate[0]) }) },
  {
    name: "deploymentUpdate",
    document: op("deploymentUpdate", "$id: ID!, $input: DeploymentUpdateInput!", "id: $id, input: $input", "deployment { id latestRevision { id } }"),
    variables: (f) => ({ id: gid("Deployment", f.deploymentId), input: toInput(f.bodies.deploymentUpdate[0]) }),
  },
  { name: "deploymentDelete", document: op("deploymentDelete", "$id: ID!", "id: $id", "deletedDeploymentId"), variables: () => ({ id: gid("Deployment", NOWHERE) }) },
  {
    name: "revisionCreate",
    document: op("revisionCreate", "$deploymentId: ID!, $input: RevisionCreateInput!", "deploymentId: $deploymentId, input: $input", "revision { id status }"),
    variables: (f) => ({ deploymentId: gid("Deployment", f.deploymentId), input: toInput(f.bodies.revisionCreate[0]) }),
  },
  { name: "revisionInterrupt", document: op("revisionInterrupt", "$id: ID!", "id: $id", "revision { id status }"), variables: (f) => ({ id: gid("Revision", f.revisionId) }) },
  { name: "revisionRedeploy", document: op("revisionRedeploy", "$id: ID!", "id: $id", "deployment { id } revision { id }"), variables: (f) => ({ id: gid("Revision", f.revisionId) }) },
  { name: "listenerCreate", document: op("listenerCreate", "$input: ListenerCreateInput!", "input: $input", "listener { id }"), variables: (f) => ({ input: toInput(f.bodies.listenerCreate[0]) }) },
  {
    name: "listenerUpdate",
    document: op("listenerUpdate", "$id: ID!, $input: ListenerUpdateInput!", "id: $id, input: $input", "listener { id version }"),
    variables: (f) => ({ id: gid("Listener", f.listenerId), input: toInput(f.bodies.listenerUpdate[0]) }),
  },
  { name: "listenerDelete", document: op("listenerDelete", "$id: ID!", "id: $id", "deletedListenerId"), variables: () => ({ id: gid("Listener", NOWHERE) }) },
  {
    name: "codehostInstallationRegister",
    document: op("codehostInstallationRegister", "$input: CodehostInstallationRegisterInput!", "input: $input", "codehostInstallation { id }"),
    variables: (f) => ({ input: toInput(f.bodies.installationRegister[0]) }),
  },
  {
    name: "agentConnectionCreate",
    document: op("agentConnectionCreate", "$agentId: String!, $input: AgentConnectionCreateInput!", "agentId: $agentId, input: $input", "agentConnection { id }"),
    variables: (f) => ({ agentId: f.agentId, input: toInput(f.bodies.connectionCreate[0]) }),
  },
  { name: "agentConnectionDelete", document: op("agentConnectionDelete", "$id: ID!", "id: $id", "deletedAgentConnectionId"), variables: () => ({ id: gid("AgentConnection", NOWHERE) }) },
  {
    name: "deploymentPushTokenCreate",
    document: op("deploymentPushTokenCreate", "$deploymentId: ID!", "deploymentId: $deploymentId", "registryUrl expiresAt"),
    variables: (f) => ({ deploymentId: gid("Deployment", f.deploymentId) }),
  },
  {
    name: "deploymentUploadUrlCreate",
    document: op("deploymentUploadUrlCreate", "$deploymentId: ID!", "deploymentId: $deploymentId", "objectPath expiresAt"),
    variables: (f) => ({ deploymentId: gid("Deployment", f.deploymentId) }),
  },
  {
    name: "codehostInstallationRepositoriesSet",
    document: op("codehostInstallationRepositoriesSet", "$id: ID!, $input: CodehostRepositoriesSetInput!", "id: $id, input: $input", "codehostInstallation { id repositories { repositoryId } }"),
    variables: (f) => ({ id: gid("CodehostInstallation", f.installationId), input: toInput(f.bodies.repositoriesSet[0]) }),
  },
  {
    name: "oauthProviderCreate",
    document: op("oauthProviderCreate", "$input: OAuthProviderCreateInput!", "input: $input", "oauthProvider { id }"),
    variables: (f) => ({ input: toInput(f.bodies.providerCreate[0]) }),
  },
  {
    name: "oauthProviderDiscover",
    document: op("oauthProviderDiscover", "$input: OAuthProviderDiscoverInput!", "input: $input", "oauthProvider { id }"),
    variables: (f) => ({ input: toInput(f.bodies.mcpDiscover[0]) }),
  },
  {
    name: "oauthProviderUpdate",
    document: op("oauthProviderUpdate", "$id: ID!, $input: OAuthProviderUpdateInput!", "id: $id, input: $input", "oauthProvider { id name }"),
    variables: (f) => ({ id: gid("OAuthProvider", f.providerUuid), input: toInput(f.bodies.providerUpdate[0]) }),
  },
  { name: "oauthProviderDelete", document: op("oauthProviderDelete", "$id: ID!", "id: $id", "deletedOAuthProviderId"), variables: () => ({ id: gid("OAuthProvider", NOWHERE) }) },
  {
    name: "oauthAuthenticate",
    document: op("oauthAuthenticate", "$input: OAuthAuthenticateInput!", "input: $input", "status url flow { id } oauthToken { id }"),
    variables: (f) => ({ input: { provider: f.providerId, scopes: ["openid"], forceNew: false, isDefault: true } }),
  },
  {
    name: "oauthFinalize",
    document: op("oauthFinalize", "$providerId: String!, $input: OAuthFinalizeInput!", "providerId: $providerId, input: $input", "flow { id } oauthToken { id }"),
    variables: (f) => ({ providerId: f.providerId, input: f.bodies.finalize[0] }),
  },
  {
    name: "oauthTokenUpdate",
    document: op("oauthTokenUpdate", "$id: ID!, $input: OAuthTokenUpdateInput!", "id: $id, input: $input", "oauthToken { id }"),
    variables: (f) => ({ id: gid("OAuthToken", f.tokenId), input: toInput(f.bodies.tokenUpdate[0]) }),
  },
  { name: "oauthTokenDelete", document: op("oauthTokenDelete", "$id: ID!", "id: $id", "deletedOAuthTokenId"), variables: () => ({ id: gid("OAuthToken", NOWHERE) }) },
];

/** Global ids that are almost right: wrong type, another workspace's object, not base64, not a uuid inside. */
function hostileIds(f: Fixtures): fc.Arbitrary<string> {
  const types = ["Deployment", "Revision", "Listener", "AgentConnection", "CodehostInstallation", "Workspace", "OAuthProvider", "OAuthToken", "OAuthFlow", "Nope", ""];
  const ids = [f.deploymentId, f.revisionId, f.listenerId, f.connectionId, f.installationId, f.other.workspaceId, f.providerUuid, f.tokenId, f.authId, NOWHERE];
  return fc.oneof(
    fc.tuple(fc.constantFrom(...types), fc.constantFrom(...ids)).map(([type, id]) => gid(type, id)),
    fc.tuple(fc.constantFrom(...types), hostileString).map(([type, id]) => gid(type, id)),
    hostileString,
    fc.constantFrom(...ids),
  );
}

/** Variables broken in every way: one to three fields replaced or removed, ids near misses, or anything at all. */
function hostileVariables(mutation: Mutation, f: Fixtures): fc.Arbitrary<unknown> {
  const base = mutation.variables(f);
  const idNames = Object.keys(base).filter((k) => k === "id" || k === "deploymentId");
  return fc.oneof(
    { weight: 5, arbitrary: editedBody(base) },
    ...(idNames.length > 0 ? [{ weight: 2, arbitrary: fc.tuple(fc.constantFrom(...idNames), hostileIds(f)).map(([k, id]) => ({ ...base, [k]: id })) }] : []),
    { weight: 1, arbitrary: hostileJson(fieldNamesOf(base)) },
  );
}

async function run(document: string, variables: unknown, payloadField: string | null) {
  const res = await t.request("POST", "/graphql", {
    key: fx.ws.apiKey,
    body: { query: document, variables },
    headers: { accept: "application/graphql-response+json, application/json" },
  });
  const refused = expectGraphQLAnswer(res, payloadField ? [payloadField] : []);
  await watch.check(refused, `${document.slice(0, 80)} ${JSON.stringify(variables)?.slice(0, 300)} -> ${res.status} ${res.text.slice(0, 300)}`);
}

describe("hostile variables for every mutation", () => {
  it("starts from variables the API accepts (deletes aim at ids that name nothing)", async () => {
    // The interrupt first: any new revision of the deployment makes the fixture's SKIPPED.
    const ordered = [...MUTATIONS].sort((a, b) => Number(b.name === "revisionInterrupt") - Number(a.name === "revisionInterrupt"));
    try {
      for (const mutation of ordered) {
        const res = await t.request("POST", "/graphql", { key: fx.ws.apiKey, body: { query: mutation.document, variables: mutation.variables(fx) } });
        const deleting = mutation.name.endsWith("Delete");
        expect(expectGraphQLAnswer(res, [mutation.name]), `${mutation.name}: ${res.text}`).toBe(deleting);
        if (deleting) expect(res.body.data[mutation.name].userErrors).toEqual([expect.objectContaining({ code: "NOT_FOUND" })]);
      }
    } finally {
      await watch.start();
    }
  });

  for (const mutation of MUTATIONS) {
    it(mutation.name, async () => {
      await fc.assert(
        fc.asyncProperty(hostileVariables(mutation, fx), (variables) => run(mutation.document, variables, mutation.name)),
        { numRuns: MUTATION_RUNS },
      );
    });
  }
});

/**
 * Operations whose variables are, or sit where, secrets go: a [SecretInput!] list, one SecretInput,
 * a String used as a secret's value. graphql-js quotes a value it cannot coerce; these must never be
 * quoted, in the answer or the log (the app's leak guard watches for the fixtures' secret).
 */
const SECRET_OPERATIONS: { name: string; payload: string; document: string }[] = [
  {
    name: "[SecretInput!] variable",
    payload: "deploymentUpdate",
    document: op("deploymentUpdate", "$id: ID!, $s: [SecretInput!]", "id: $id, input: { secrets: $s }", "deployment { id }"),
  },
  {
    name: "SecretInput! variable",
    payload: "revisionCreate",
    document: op("revisionCreate", "$id: ID!, $s: SecretInput!", "deploymentId: $id, input: { secrets: [$s] }", "revision { id }"),
  },
  {
    name: "String! variable as a secret's value",
    payload: "deploymentUpdate",
    document: op("deploymentUpdate", "$id: ID!, $s: String!", 'id: $id, input: { secrets: [{ name: "A", value: $s }] }', "deployment { id }"),
  },
];

/** A secret's value, wrapped and placed in every way a variable can be wrong around it. */
function hostileSecrets(secret: string): fc.Arbitrary<unknown> {
  const value = fc.oneof(
    fc.constant(secret),
    fc.constant({ value: secret }),
    fc.constant([secret]),
    fc.constant([{ name: "A", value: secret }]),
    hostileJson(["name", "value"]).map((junk) => ({ junk, secret })),
  );
  const entry = fc.record(
    { name: fc.oneof(fc.constant("API_TOKEN"), hostileString, hostileJson(["name"])), value, extra: hostileJson(["value"]) },
    { requiredKeys: ["value"] },
  );
  return fc.oneof(value, entry, fc.array(entry, { maxLength: 3 }), fc.constant(null));
}

describe("invalid secret-typed variables", () => {
  for (const operation of SECRET_OPERATIONS) {
    it(operation.name, async () => {
      const secret = t.guard.secret();
      await fc.assert(
        fc.asyncProperty(hostileSecrets(secret), (s) => run(operation.document, { id: gid("Deployment", fx.deploymentId), s }, operation.payload)),
        { numRuns: QUERY_RUNS },
      );
    }, 180_000);
  }
});

const QUERIES: { name: string; document: string; variables: (f: Fixtures) => Record<string, unknown> }[] = [
  {
    name: "deployments",
    document: `query($filter: DeploymentFilter, $first: Int, $after: String, $last: Int, $before: String) {
      deployments(filter: $filter, first: $first, after: $after, last: $last, before: $before) { totalCount edges { cursor node { id } } } }`,
    variables: (f) => ({
      filter: { name: "fuzz-target", nameContains: "fuzz", status: "READY", remoteReconciled: false, tagValueIds: [NOWHERE], imageVersion: "0.4.0", deploymentType: "DEV", deploymentIds: [f.deploymentId], url: "https://x", agentId: "fuzz-agent", agentEnvironment: "PRODUCTION" },
      first: 5, after: null, last: null, before: null,
    }),
  },
  {
    name: "revisions",
    document: `query($id: ID!, $first: Int, $status: [RevisionStatus!]) { node(id: $id) { ... on Deployment { revisions(first: $first, status: $status) { totalCount edges { node { id } } } } } }`,
    variables: (f) => ({ id: gid("Deployment", f.deploymentId), first: 10, status: ["CREATING", "DEPLOYED"] }),
  },
  { name: "nodes", document: `query($ids: [ID!]!) { nodes(ids: $ids) { id } }`, variables: (f) => ({ ids: [gid("Deployment", f.deploymentId), gid("Listener", f.listenerId)] }) },
  { name: "agentConnections", document: `query($agentId: String!, $first: Int) { agentConnections(agentId: $agentId, first: $first) { totalCount } }`, variables: (f) => ({ agentId: f.agentId, first: 3 }) },
  {
    name: "oauthTokens",
    document: `query($providerId: String, $first: Int, $after: String) { oauthTokens(providerId: $providerId, first: $first, after: $after) { totalCount edges { node { id } } } }`,
    variables: (f) => ({ providerId: f.providerId, first: 5, after: null }),
  },
  { name: "oauthProviders", document: `query($first: Int, $last: Int) { oauthProviders(first: $first, last: $last) { totalCount } }`, variables: () => ({ first: 5, last: null }) },
];

describe("hostile variables for the query fields that take arguments", () => {
  for (const query of QUERIES) {
    it(query.name, async () => {
      await fc.assert(
        fc.asyncProperty(editedBody(query.variables(fx)), (variables) => run(query.document, variables, null)),
        { numRuns: QUERY_RUNS },
      );
    });
  }
});
