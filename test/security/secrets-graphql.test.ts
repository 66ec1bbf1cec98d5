import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SecretBox } from "../../src/core/secrets.js";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { TEST_SECRETS_KEY, type TestApp, startTestApp } from "../support/app.js";
import { CIPHERTEXT } from "../support/leak-guard.js";
import { subscribeWs, wsClient } from "../graphql/live.js";
import { gql } from "../graphql/support.js";

/**
 * Secrets through the GraphQL face: deploymentCreate, deploymentUpdate and revisionCreate carry them
 * in, over HTTP and graphql-ws, accepted and refused. No response, stream message or log line (at
 * trace level, the pipeline running) holds a plain value, and the rows hold ciphertext only.
 */

let t: TestApp;
let url: string;
let ws: NewWorkspace;

beforeAll(async () => {
  t = await startTestApp({ PIPELINE_STEP_MS: "5", RATE_LIMIT_PER_MINUTE: "0" });
  url = await t.app.start();
  ws = await t.workspace();
});
afterAll(async () => {
  // The whole file: every response, message and log line, and every row.
  await t.close();
});

const SECRETS = "secrets { name } latestRevision { secrets { name } }";
const CREATE = `mutation($input: DeploymentCreateInput!) { deploymentCreate(input: $input) { deployment { id uuid ${SECRETS} } userErrors { field message code } } }`;
const UPDATE = `mutation($id: ID!, $input: DeploymentUpdateInput!) { deploymentUpdate(id: $id, input: $input) { deployment { id ${SECRETS} } userErrors { field message code } } }`;
const REVISION = `mutation($id: ID!, $input: RevisionCreateInput!) { revisionCreate(deploymentId: $id, input: $input) { revision { id secrets { name } } userErrors { field message code } } }`;

const base = (name: string) => ({ name, source: "INTERNAL_CONTAINER", sourceRevisionConfig: { imageUri: "registry.example/agent:1" } });

/** Every stored secret of the deployment and its revisions, opened: what was stored is what was sent. */
async function stored(deploymentId: string) {
  const rows = await t.app.db.sql.query<{ secrets: { name: string; value: string }[] }>(
    `SELECT secrets FROM deployments WHERE id = $1 UNION ALL SELECT secrets FROM revisions WHERE deployment_id = $1`,
    [deploymentId],
  );
  const box = new SecretBox(Buffer.from(TEST_SECRETS_KEY, "base64"));
  return rows.flatMap((r) => r.secrets.map((s) => (expect(s.value).toMatch(CIPHERTEXT), `${s.name}=${box.open(s.value)}`)));
}

describe("secrets through GraphQL mutations", () => {
  it("go in through deploymentCreate, deploymentUpdate and revisionCreate; only names come out", async () => {
    const [a, b, c, d] = [t.guard.secret(), t.guard.secret(), t.guard.secret(), t.guard.secret()];
    const created = await gql(t, ws.apiKey, CREATE, { input: { ...base("gql-secrets"), secrets: [{ name: "A", value: a }, { name: "B", value: b }] } });
    expect(created.errors).toBeUndefined();
    const deployment = created.data.deploymentCreate.deployment;
    expect(deployment.secrets).toEqual([{ name: "A" }, { name: "B" }]);
    expect(deployment.latestRevision.secrets).toEqual([{ name: "A" }, { name: "B" }]);

    const updated = await gql(t, ws.apiKey, UPDATE, { id: deployment.id, input: { secrets: [{ name: "A", value: a }, { name: "C", value: c }] } });
    expect(updated.data.deploymentUpdate.deployment.secrets).toEqual([{ name: "A" }, { name: "C" }]);
    const revision = await gql(t, ws.apiKey, REVISION, { id: deployment.id, input: { secrets: [{ name: "D", value: d }] } });
    expect(revision.data.revisionCreate.revision.secrets).toEqual([{ name: "D" }]);

    // Reads of every kind while the pipeline works on the revisions.
    const read = await gql(t, ws.apiKey, `query($id: ID!) { node(id: $id) { ... on Deployment { ${SECRETS} revisions { edges { node { secrets { name } events { to message } } } } } } }`, { id: deployment.id });
    expect(read.errors).toBeUndefined();
    // The deployment holds the last set (D); each revision the set it was made with.
    expect((await stored(deployment.uuid)).sort()).toEqual([`D=${d}`, `A=${a}`, `B=${b}`, `A=${a}`, `C=${c}`, `D=${d}`].sort());
    await t.assertNoLeaks();
  });

  it("refused (userErrors or invalid variables) never echo a secret's value", async () => {
    const target = await gql(t, ws.apiKey, CREATE, { input: base("gql-refusals") });
    const id = target.data.deploymentCreate.deployment.id;
    const s = () => t.guard.secret();
    const badSecrets = [
      [{ name: "1-not-a-name", value: s() }],
      [{ name: "DUP", value: s() }, { name: "DUP", value: s() }],
      [{ name: "LONG", value: t.guard.secret(`long-${"x".repeat(70_000)}`) }],
      [{ name: "NUL", value: `${s()}\u0000` }],
      // Invalid variables: graphql-js quotes the value it could not coerce.
      [{ value: s() }],
      [{ name: "EXTRA", value: s(), extra: true }],
      [{ name: "LISTED", value: [s()] }],
      [{ name: 7, value: s() }],
      { name: "NOT_A_LIST", value: s(), unknown: 1 },
    ];
    for (const secrets of badSecrets) {
      for (const [query, variables, field] of [
        [CREATE, { input: { ...base("gql-refused"), secrets } }, "deploymentCreate"],
        [CREATE, { input: { ...base("gql-refused"), secrets, bogus: 1 } }, "deploymentCreate"],
        [UPDATE, { id, input: { secrets } }, "deploymentUpdate"],
        [REVISION, { id, input: { secrets, sourceConfig: { resourceSpec: { cpu: -1 } } } }, "revisionCreate"],
      ] as const) {
        const res = await gql(t, ws.apiKey, query, variables);
        const refused = res.errors !== undefined || res.data?.[field]?.userErrors.length > 0;
        expect(refused, `${field} ${JSON.stringify(secrets).slice(0, 100)}`).toBe(true);
      }
    }
    // Still told where and why, only not what.
    const missing = await gql(t, ws.apiKey, CREATE, { input: { ...base("gql-refused"), secrets: [{ value: s() }] } });
    expect(missing.status).toBe(400);
    expect(missing.errors).toEqual([
      expect.objectContaining({
        message: 'Variable "$input" got an invalid value at "input.secrets[0]"; Field "name" of required type "String!" was not provided.',
        extensions: { code: "BAD_USER_INPUT" },
      }),
    ]);
    await t.assertNoLeaks();
  });

  it("over graphql-ws: a mutation carrying secrets, then the revision's statuses to DEPLOYED", async () => {
    const value = t.guard.secret();
    const client = wsClient(url, ws.apiKey);
    try {
      const mutation = subscribeWs(client, CREATE, { input: { ...base("gql-ws-secrets"), secrets: [{ name: "WS", value }] } });
      await mutation.done;
      t.guard.record("graphql-ws deploymentCreate", JSON.stringify(mutation.messages));
      const deployment = mutation.messages[0]!.data.deploymentCreate.deployment;
      expect(deployment.secrets).toEqual([{ name: "WS" }]);
      const refused = subscribeWs(client, CREATE, { input: { ...base("gql-ws-refused"), secrets: [{ value: t.guard.secret() }] } });
      await refused.done.catch((err: unknown) => t.guard.record("graphql-ws refusal", JSON.stringify(err)));
      t.guard.record("graphql-ws refused deploymentCreate", JSON.stringify(refused.messages));

      const revisionId = (await gql(t, ws.apiKey, `query($id: ID!) { node(id: $id) { ... on Deployment { latestRevision { id } } } }`, { id: deployment.id })).data.node.latestRevision.id;
      const statuses = subscribeWs(client, `subscription($id: ID!) { revisionStatusChanged(revisionId: $id) { status revision { secrets { name } } } }`, { id: revisionId });
      await statuses.done;
      t.guard.record("graphql-ws revisionStatusChanged", JSON.stringify(statuses.messages));
      expect(statuses.messages.at(-1)!.data.revisionStatusChanged).toEqual({ status: "DEPLOYED", revision: { secrets: [{ name: "WS" }] } });
    } finally {
      await client.dispose();
    }
    await t.assertNoLeaks();
  });
});
