import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { createDeployment, gql, gqlOk } from "../graphql/support.js";
import { LIST_QUERY, NESTED_QUERY } from "../../bench/lib/queries.js";

let t: TestApp;
let ws: NewWorkspace;

beforeAll(async () => {
  t = await startTestApp({ PIPELINE_WORKER: "off", RATE_LIMIT_PER_MINUTE: "0" });
  ws = await t.workspace();
  for (let i = 0; i < 3; i++) {
    const d = await createDeployment(t, ws.apiKey, { sourceConfig: { deploymentType: "DEV" } });
    await gqlOk(t, ws.apiKey, `mutation($d: ID!) { revisionCreate(deploymentId: $d, input: {}) { revision { id } } }`, { d: d.id });
  }
  await gqlOk(t, ws.apiKey, `mutation { listenerCreate(input: {computeType: K8S, computeId: "c1", version: "1", computeConfig: {k8sNamespaces: ["default"]}}) { listener { id } } }`);
});
afterAll(() => t.close());

// A query runs on graphql-js the first time and compiled (graphql-jit) from the second: both must answer alike.
// Each with whether it answers an error (then both engines must answer the same one).
const QUERIES: [string, string, Record<string, unknown>, "answers data" | "answers an error"][] = [
  ["a page of deployments with every field", LIST_QUERY, { first: 100 }, "answers data"],
  ["deployments with their latest revision and first revisions", NESTED_QUERY, { first: 10 }, "answers data"],
  [
    "paging, counts, filters, fragments, aliases, directives and typenames",
    `query Q($n: Int!, $skip: Boolean!) {
      viewer { __typename id uuid name }
      byType: deployments(first: $n, filter: { deploymentType: DEV }) {
        totalCount pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
        edges { cursor node { ...D revisions(last: 1) @skip(if: $skip) { totalCount edges { node { status } } } } }
      }
      listeners { totalCount edges { node { __typename id computeId } } }
    }
    fragment D on Deployment { __typename id uuid name status other: name }`,
    { n: 2, skip: false },
    "answers data",
  ],
  [
    "introspection of enums and scalars beside the same types' values (a query that introspects compiles against the real schema, leaves serialised: jit.ts)",
    `query T {
      __type(name: "RevisionStatus") { kind name enumValues { name } }
      __schema { types { kind name } }
      viewer { uuid }
      deployments(first: 3, filter: { deploymentType: DEV }) { edges { node { uuid status source shareable sourceConfig { deploymentType } revisions(first: 2) { edges { node { status uuid } } } } } }
    }`,
    {},
    "answers data",
  ],
  [
    "enum literals and variables, on the compiled path (no introspection)",
    `query E($type: DeploymentType, $status: DeploymentStatus, $statuses: [RevisionStatus!]) {
      dev: deployments(first: 3, filter: { deploymentType: DEV }) { totalCount edges { node { uuid status source sourceConfig { deploymentType } } } }
      typed: deployments(first: 3, filter: { deploymentType: $type }) { edges { node { uuid revisions(first: 2, status: $statuses) { edges { node { uuid status source } } } } } }
      none: deployments(first: 3, filter: { status: $status }) { totalCount }
    }`,
    { type: "DEV", status: "AWAITING_DATABASE", statuses: ["CREATING", "QUEUED"] },
    "answers data",
  ],
  ["a variable of the wrong type", `query($n: Int!) { deployments(first: $n) { totalCount } }`, { n: "many" }, "answers an error"],
  ["an argument out of range", `{ deployments(first: 500) { totalCount } }`, {}, "answers an error"],
  ["a malformed cursor", `{ deployments(first: 1, after: "nope") { totalCount } }`, {}, "answers an error"],
];

describe("compiled queries answer as graphql-js does", () => {
  for (const [what, query, variables, answers] of QUERIES) {
    it(what, async () => {
      const first = await gql(t, ws.apiKey, query, variables);
      expect(first.errors === undefined ? "answers data" : "answers an error", JSON.stringify(first.errors)).toBe(answers);
      const second = await gql(t, ws.apiKey, query, variables);
      const third = await gql(t, ws.apiKey, query, variables);
      expect(second.status).toBe(first.status);
      expect({ data: second.data, errors: second.errors }).toEqual({ data: first.data, errors: first.errors });
      expect({ data: third.data, errors: third.errors }).toEqual({ data: first.data, errors: first.errors });
    });
  }

  it("nodes by global id, through the Node interface", async () => {
    const page: { deployments: { edges: { node: { id: string; latestRevision: { id: string } } }[] } } = await gqlOk(
      t,
      ws.apiKey,
      `{ deployments(first: 2) { edges { node { id latestRevision { id } } } } }`,
    );
    const ids = page.deployments.edges.flatMap(({ node }) => [node.id, node.latestRevision.id]);
    const query = `query N($ids: [ID!]!) { nodes(ids: $ids) { __typename id ... on Deployment { uuid status } ... on Revision { uuid revisionStatus: status } } }`;
    const answers = [];
    for (let i = 0; i < 3; i++) answers.push(await gql(t, ws.apiKey, query, { ids }));
    expect(answers[0]!.errors).toBeUndefined();
    expect((answers[0]!.data as { nodes: unknown[] }).nodes).toHaveLength(4);
    for (const a of answers.slice(1)) expect({ data: a.data, errors: a.errors }).toEqual({ data: answers[0]!.data, errors: answers[0]!.errors });
  });

  it("a stored value of the wrong type in a String list (a row older than its validation)", async () => {
    const listener = await t.app.db.prisma.listener.findFirstOrThrow({ where: { workspaceId: ws.workspaceId } });
    await t.app.db.prisma.listener.update({ where: { id: listener.id }, data: { computeConfig: { k8s_namespaces: [1, "ns"] } } });
    const query = `query L { listeners { edges { node { uuid computeConfig { k8sNamespaces } } } } }`;
    const answers = [];
    for (let i = 0; i < 3; i++) answers.push(await gql(t, ws.apiKey, query));
    expect(answers[0]!.errors).toBeUndefined();
    expect((answers[0]!.data as any).listeners.edges[0].node.computeConfig).toEqual({ k8sNamespaces: ["ns"] });
    for (const a of answers.slice(1)) expect({ data: a.data, errors: a.errors }).toEqual({ data: answers[0]!.data, errors: answers[0]!.errors });
  });

  it("an unexpected error in a resolver: the same masked error, with its location and path", async () => {
    const spy = vi.spyOn(t.app.core.batch, "workspace").mockRejectedValue(new Error("boom: internal detail"));
    try {
      const answers = [];
      for (let i = 0; i < 3; i++) answers.push(await gql(t, ws.apiKey, `query Viewer { viewer { id } }`));
      expect(answers[0]!.errors).toEqual([expect.objectContaining({ message: "Unexpected error.", locations: [{ line: 1, column: 16 }], path: ["viewer"] })]);
      for (const a of answers.slice(1)) expect({ data: a.data, errors: a.errors }).toEqual({ data: answers[0]!.data, errors: answers[0]!.errors });
    } finally {
      spy.mockRestore();
    }
  });
});
