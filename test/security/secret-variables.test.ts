import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { type TestApp, startTestApp } from "../support/app.js";
import { subscribeWs, wsClient } from "../graphql/live.js";
import { globalId, gql } from "../graphql/support.js";

/**
 * graphql-js quotes a value it cannot use: a variable's (`got invalid value …`) or a literal's
 * (`found …`). Where that value is of an input type that carries secrets (SecretInput, and every
 * input holding one, at any depth), or sits where a secret goes, neither the answer nor any log line
 * may quote it: in production and in development, over HTTP and graphql-ws.
 */

const PAYLOAD = "deployment { id } userErrors { field message code }";
/** Operations and the variables that make graphql-js quote a secret, `S` standing for the secret. */
const CASES: { name: string; query: string; variables: (id: string, s: string) => Record<string, unknown> }[] = [
  {
    name: "a [SecretInput!] variable with an unknown field",
    query: `mutation($id: ID!, $s: [SecretInput!]) { deploymentUpdate(id: $id, input: { secrets: $s }) { ${PAYLOAD} } }`,
    variables: (id, s) => ({ id, s: [{ name: "A", value: s, extra: 1 }] }),
  },
  {
    name: "a [SecretInput!] variable whose value is an object",
    query: `mutation($id: ID!, $s: [SecretInput!]) { deploymentUpdate(id: $id, input: { secrets: $s }) { ${PAYLOAD} } }`,
    variables: (id, s) => ({ id, s: [{ name: "A", value: { nested: s } }] }),
  },
  {
    name: "a single SecretInput variable (coerced to a list) missing its name",
    query: `mutation($id: ID!, $s: SecretInput!) { deploymentUpdate(id: $id, input: { secrets: [$s] }) { ${PAYLOAD} } }`,
    variables: (id, s) => ({ id, s: { value: s } }),
  },
  {
    name: "a String variable used as a secret's value, given a list",
    query: `mutation($id: ID!, $v: String!) { deploymentUpdate(id: $id, input: { secrets: [{ name: "A", value: $v }] }) { ${PAYLOAD} } }`,
    variables: (id, s) => ({ id, v: [s] }),
  },
  {
    name: "a whole DeploymentUpdateInput variable, its secrets deep inside",
    query: `mutation($id: ID!, $input: DeploymentUpdateInput!) { deploymentUpdate(id: $id, input: $input) { ${PAYLOAD} } }`,
    variables: (id, s) => ({ id, input: { sourceConfig: { resourceSpec: { cpu: "x" } }, secrets: [{ name: "A", value: s }] } }),
  },
  {
    name: "a literal object as a secret's value",
    query: `mutation($id: ID!) { deploymentUpdate(id: $id, input: { secrets: [{ name: "A", value: { nested: "S" } }] }) { ${PAYLOAD} } }`,
    variables: (id) => ({ id }),
  },
  {
    name: "a literal list as a secret's value",
    query: `mutation($id: ID!) { deploymentUpdate(id: $id, input: { secrets: [{ name: "A", value: ["S"] }] }) { ${PAYLOAD} } }`,
    variables: (id) => ({ id }),
  },
  {
    name: "a String variable used as a secret's value, its default a list",
    query: `mutation($id: ID!, $v: String = ["S"]) { deploymentUpdate(id: $id, input: { secrets: [{ name: "A", value: $v }] }) { ${PAYLOAD} } }`,
    variables: (id) => ({ id }),
  },
  {
    name: "a literal secrets list given where an enum goes",
    query: `mutation($id: ID!) { deploymentUpdate(id: $id, input: { revisionSource: [{ name: "A", value: "S" }] }) { ${PAYLOAD} } }`,
    variables: (id) => ({ id }),
  },
  // An authorization code and its flow's state: whoever reads them can finish the caller's flow.
  {
    name: "an OAuthFinalizeInput variable with an unknown field (its code)",
    query: `mutation($i: OAuthFinalizeInput!) { oauthFinalize(providerId: "p", input: $i) { userErrors { message } } }`,
    variables: (_id, s) => ({ i: { code: s, state: "a-state", extra: 1 } }),
  },
  {
    name: "an OAuthFinalizeInput variable with an unknown field (its state)",
    query: `mutation($i: OAuthFinalizeInput!) { oauthFinalize(providerId: "p", input: $i) { userErrors { message } } }`,
    variables: (_id, s) => ({ i: { code: "a-code", state: s, extra: 1 } }),
  },
];

const ON_WS = `mutation($id: ID!, $s: [SecretInput!]) { deploymentUpdate(id: $id, input: { secrets: $s }) { ${PAYLOAD} } }`;

for (const nodeEnv of ["production", "development"]) {
  describe(`invalid secret-typed GraphQL input (${nodeEnv})`, () => {
    let t: TestApp;
    let ws: NewWorkspace;
    let id: string;
    let url: string;

    beforeAll(async () => {
      t = await startTestApp({ NODE_ENV: nodeEnv, PIPELINE_WORKER: "off" });
      url = await t.app.start();
      ws = await t.workspace();
      const created = await t.request("POST", "/v2/deployments", {
        key: ws.apiKey,
        body: { name: "gql-secret-target", source: "internal_container", source_config: { deployment_type: "dev" }, source_revision_config: {} },
      });
      expect(created.status).toBe(201);
      id = globalId("Deployment", created.body.id);
    });
    afterAll(() => t.close());

    for (const c of CASES) {
      it(`${c.name}: refused, told where and why, the value quoted nowhere`, async () => {
        const secret = t.guard.secret();
        const res = await gql(t, ws.apiKey, c.query.replace('"S"', JSON.stringify(secret)), c.variables(id, secret));
        expect(res.status, JSON.stringify(res.errors)).toBe(400);
        expect(res.errors?.length).toBeGreaterThan(0);
        for (const error of res.errors!) {
          expect(error.message).not.toContain(secret);
          expect(error.extensions?.code).toMatch(/^(BAD_USER_INPUT|GRAPHQL_VALIDATION_FAILED)$/);
        }
        expect(JSON.stringify(res.errors)).not.toContain(secret);
        // Every log line (the app logs at trace level) too.
        await t.assertNoLeaks();
      });
    }

    it("over graphql-ws: the error message holds no secret, and no log line does", async () => {
      const secret = t.guard.secret();
      const client = wsClient(url, ws.apiKey);
      try {
        const sub = subscribeWs(client, ON_WS, { id, s: [{ name: "A", value: { nested: secret } }] });
        const outcome = await sub.done.then(
          () => sub.messages,
          (err: unknown) => err,
        );
        const text = JSON.stringify(outcome);
        expect(text).toMatch(/\$s/);
        expect(text).not.toContain(secret);
      } finally {
        await client.dispose();
      }
      t.guard.record("graphql-ws", "");
      await t.assertNoLeaks();
    });
  });
}
