import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { createDeployment, gqlOk } from "./support.js";

/**
 * A mutation acts on what is there when it runs, and its payload shows what it left: nothing read
 * earlier in the request (by an earlier mutation of the document, or by this one before its write)
 * is answered from the request's loaders. The request's loaders once kept such reads, so that a
 * document deleting a provider, creating another under its provider_id and updating the first by its
 * id renamed the second, and an interrupted revision's deployment still showed it QUEUED.
 */

let t: TestApp;
let ws: NewWorkspace;

beforeAll(async () => {
  t = await startTestApp({ PIPELINE_WORKER: "off" });
  ws = await t.workspace();
});
afterAll(() => t.close());

const errors = "userErrors { field message code }";
const provider = (providerId: string, name: string) => ({ providerId, name, clientId: "c", authUrl: "https://a.example/auth", tokenUrl: "https://a.example/token" });
const CREATE_PROVIDER = `mutation($input: OAuthProviderCreateInput!) { oauthProviderCreate(input: $input) { oauthProvider { id } ${errors} } }`;

const providers = async () =>
  (await gqlOk(t, ws.apiKey, `{ oauthProviders { edges { node { id providerId name } } } }`)).oauthProviders.edges.map((e: { node: unknown }) => e.node);

describe("a mutation after another in one document", () => {
  for (const [name, act] of [
    ["oauthProviderUpdate", `c: oauthProviderUpdate(id: $old, input: { name: "changed" }) { oauthProvider { id } ${errors} }`],
    ["oauthProviderDelete", `c: oauthProviderDelete(id: $old) { deletedOAuthProviderId ${errors} }`],
  ] as const) {
    it(`${name} of a provider deleted earlier in the document finds it gone, and leaves the provider now under its provider_id alone`, async () => {
      const slug = `p-${name.toLowerCase()}`;
      const old = (await gqlOk(t, ws.apiKey, CREATE_PROVIDER, { input: provider(slug, "first") })).oauthProviderCreate.oauthProvider.id;
      const data = await gqlOk(
        t,
        ws.apiKey,
        `mutation($old: ID!, $input: OAuthProviderCreateInput!) {
          a: oauthProviderDelete(id: $old) { deletedOAuthProviderId ${errors} }
          b: oauthProviderCreate(input: $input) { oauthProvider { id } ${errors} }
          ${act}
        }`,
        { old, input: provider(slug, "second") },
      );
      expect(data.a).toEqual({ deletedOAuthProviderId: old, userErrors: [] });
      const second = data.b.oauthProvider.id;
      expect(second).not.toBe(old);
      expect(data.c.userErrors).toEqual([{ field: ["id"], message: expect.stringMatching(/not found/), code: "NOT_FOUND" }]);
      expect(await providers()).toContainEqual({ id: second, providerId: slug, name: "second" });
    });
  }

  it("revisionCreate twice: the second payload's deployment has the second revision as its latest", async () => {
    const d = await createDeployment(t, ws.apiKey);
    const create = (alias: string) => `${alias}: revisionCreate(deploymentId: $d, input: {}) { revision { id deployment { latestRevision { id } } } ${errors} }`;
    const data = await gqlOk(t, ws.apiKey, `mutation($d: ID!) { ${create("one")} ${create("two")} }`, { d: d.id });
    expect(data.one.revision.deployment.latestRevision.id).toBe(data.one.revision.id);
    expect(data.two.revision.deployment.latestRevision.id).toBe(data.two.revision.id);
  });
});

describe("a mutation's payload", () => {
  it("revisionInterrupt: the revision and its deployment's latest revision both INTERRUPTED", async () => {
    const d = await createDeployment(t, ws.apiKey);
    const data = await gqlOk(
      t,
      ws.apiKey,
      `mutation($id: ID!) { revisionInterrupt(id: $id) { revision { status deployment { latestRevision { id status } } } ${errors} } }`,
      { id: d.revisionId },
    );
    expect(data.revisionInterrupt).toEqual({
      revision: { status: "INTERRUPTED", deployment: { latestRevision: { id: d.revisionId, status: "INTERRUPTED" } } },
      userErrors: [],
    });
  });
});

describe("a mutation whose upstream fails", () => {
  it("answers UPSTREAM in its userErrors, and the mutations before it in the document keep their payloads", async () => {
    const computeId = `upstream-${Date.now()}`;
    const data = await gqlOk(
      t,
      ws.apiKey,
      `mutation($computeId: String!) {
        a: listenerCreate(input: { computeType: K8S, computeId: $computeId, computeConfig: {} }) { listener { computeId } ${errors} }
        b: oauthProviderDiscover(input: { providerId: "mcp-down", name: "m", mcpServerUrl: "https://127.0.0.1:1/mcp" }) { oauthProvider { id } ${errors} }
      }`,
      { computeId },
    );
    expect(data.a).toEqual({ listener: { computeId }, userErrors: [] });
    expect(data.b).toEqual({ oauthProvider: null, userErrors: [{ field: null, message: expect.stringMatching(/^Could not reach/), code: "UPSTREAM" }] });
    expect((await providers()).map((p: { providerId: string }) => p.providerId)).not.toContain("mcp-down");
  });
});
