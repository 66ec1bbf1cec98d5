import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { type GraphQLObjectType, isObjectType } from "graphql";
import { schema } from "../../src/graphql/types/index.js";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { countSql } from "./sql-count.js";
import { createDeployment, globalId, gqlOk } from "./support.js";

let t: TestApp;
let ws: NewWorkspace;

// No pipeline worker: its polling would be counted too.
beforeAll(async () => {
  t = await startTestApp({ PIPELINE_WORKER: "off", RATE_LIMIT_PER_MINUTE: "0" });
  ws = await t.workspace();
  const listeners: string[] = [];
  for (let i = 0; i < 4; i++) {
    const res = await gqlOk(t, ws.apiKey, `mutation($c: String!) { listenerCreate(input: {computeType: K8S, computeId: $c, version: "1", computeConfig: {k8sNamespaces: ["default"]}}) { listener { uuid } } }`, {
      c: `cluster-${i}`,
    });
    listeners.push(res.listenerCreate.listener.uuid);
  }
  for (let i = 0; i < 100; i++) {
    const selfHosted = i % 2 === 0;
    const d = await createDeployment(
      t,
      ws.apiKey,
      selfHosted
        ? { source: "EXTERNAL_CONTAINER", sourceConfig: { listenerId: listeners[i % 4] }, sourceRevisionConfig: { imageUri: `r/x:${i}` } }
        : {},
    );
    // Some deployments have more revisions than the 5 asked for.
    const extra = i % 10 === 0 ? 7 : i % 3;
    for (let r = 0; r < extra; r++) {
      await gqlOk(t, ws.apiKey, `mutation($d: ID!) { revisionCreate(deploymentId: $d, input: {}) { userErrors { message } } }`, { d: d.id });
    }
  }
}, 300_000);
afterAll(() => t.close());

const DASHBOARD = /* GraphQL */ `
  query Dashboard($first: Int!) {
    deployments(first: $first) {
      edges { node {
        id name status
        sourceRevisionConfig { imageUri }
        latestRevision { id status statusMessage sourceRevisionConfig { imageUri } }
        listener { id computeId }
        revisions(first: 5) { totalCount edges { node { id status createdAt } } pageInfo { hasNextPage } }
      } }
    }
  }`;

describe("DataLoaders", () => {
  it("costs the same few SQL statements for a page of 10 or 100 deployments with latest revision, listener and first 5 revisions", async () => {
    await gqlOk(t, ws.apiKey, DASHBOARD, { first: 1 }); // warms the API key cache
    const sql = countSql();
    try {
      const counts: Record<number, number> = {};
      let page100: any = null;
      for (const first of [10, 100]) {
        const { result: data, statements } = await sql.within(() => gqlOk(t, ws.apiKey, DASHBOARD, { first }));
        counts[first] = statements;
        if (first === 100) page100 = data;
      }
      // One statement per level: deployments with their latest revisions (joined: the page's
      // selection shows them), listeners by id, the windowed revision pages, and the grouped counts.
      expect(counts[100]).toBe(counts[10]);
      expect(counts[10]).toBe(4);

      // And the answer is right: every deployment with its own data.
      const edges = page100.deployments.edges.map((e: any) => e.node);
      expect(edges).toHaveLength(100);
      for (const d of edges) {
        const revisions = d.revisions.edges.map((e: any) => e.node);
        expect(revisions.length).toBe(Math.min(5, d.revisions.totalCount));
        expect(d.revisions.pageInfo.hasNextPage).toBe(d.revisions.totalCount > 5);
        expect(revisions[0].id).toBe(d.latestRevision.id);
        const times = revisions.map((r: any) => r.createdAt);
        expect([...times].sort().reverse()).toEqual(times);
        // Self-hosted deployments (images r/x:N) have a listener.
        if (d.latestRevision.sourceRevisionConfig.imageUri?.startsWith("r/x:")) expect(d.listener).not.toBeNull();
        expect(d.sourceRevisionConfig).toEqual(d.latestRevision.sourceRevisionConfig);
      }
      expect(edges.filter((d: any) => d.revisions.totalCount > 5).length).toBeGreaterThan(0);
      expect(edges.filter((d: any) => d.listener).length).toBe(50);
    } finally {
      sql.restore();
    }
  });

  it("reads no revision past a page's end when the selection has no pageInfo, and answers the same edges", async () => {
    const query = (pageInfo: string) =>
      `query { deployments(first: 100) { edges { node { id revisions(first: 5) { edges { node { id status } } ${pageInfo} } } } } }`;
    const spy = vi.spyOn(t.app.deps.prepared, "tuples");
    try {
      const edges = (data: any) => data.deployments.edges.map((e: any) => e.node.revisions.edges.map((r: any) => r.node.id));
      const withInfo = await gqlOk(t, ws.apiKey, query("pageInfo { hasNextPage }"));
      const without = await gqlOk(t, ws.apiKey, query(""));
      expect(edges(without)).toEqual(edges(withInfo));
      const pageTakes = spy.mock.calls.filter(([statement]) => statement.name.startsWith("revision_pages_")).map(([, values]) => values.at(-1));
      expect(pageTakes).toEqual([6, 5]);
      expect(withInfo.deployments.edges.some((e: any) => e.node.revisions.pageInfo.hasNextPage)).toBe(true);
    } finally {
      spy.mockRestore();
    }
  });

  it("reads only the latest revisions' config when the page shows no more of them, answering as a summary read would", async () => {
    const page = (latest: string, fragments = "") =>
      `query { deployments(first: 100) { edges { node { id sourceRevisionConfig { imageUri repoRef } latestRevision { ${latest} } } } } } ${fragments}`;
    // Deployment pages are read as tuples (deployment-reads.ts).
    const spy = vi.spyOn(t.app.deps.prepared, "tuples");
    const pageStatements = () => spy.mock.calls.map(([statement]) => statement.name).filter((name) => name.startsWith("deployments_"));
    try {
      const configOnly = await gqlOk(t, ws.apiKey, page("__typename id uuid sourceRevisionConfig { imageUri repoCommitSha }"));
      expect(pageStatements()).toEqual(["deployments_with_latest_config_first"]);
      spy.mockClear();
      const summary = await gqlOk(t, ws.apiKey, page("__typename id uuid sourceRevisionConfig { imageUri repoCommitSha } status"));
      expect(pageStatements()).toEqual(["deployments_with_latest_summary_first"]);
      const withoutStatus = summary.deployments.edges.map(({ node }: any) => {
        const { status, ...latest } = node.latestRevision;
        expect(status).toMatch(/^[A-Z_]+$/);
        return { ...node, latestRevision: latest };
      });
      expect(configOnly.deployments.edges.map((e: any) => e.node)).toEqual(withoutStatus);
      expect(configOnly.deployments.edges.every((e: any) => e.node.latestRevision.uuid && e.node.latestRevision.sourceRevisionConfig)).toBe(true);

      // A field outside the config asked through a fragment, or under a directive, still reads the summary.
      spy.mockClear();
      const fragment = await gqlOk(t, ws.apiKey, page("uuid ...R", "fragment R on Revision { createdAt }"));
      expect(pageStatements()).toEqual(["deployments_with_latest_summary_first"]);
      expect(fragment.deployments.edges[0].node.latestRevision.createdAt).toMatch(/^\d{4}-/);
      spy.mockClear();
      await gqlOk(t, ws.apiKey, page("uuid statusMessage @skip(if: true)"));
      expect(pageStatements()).toEqual(["deployments_with_latest_summary_first"]);
    } finally {
      spy.mockRestore();
    }
  });

  it("answers a revision asked only for its ids from the deployment's column, as a read would answer it", async () => {
    // Half the page has an active revision (its latest; no pipeline runs here to deploy one).
    const page = await gqlOk(t, ws.apiKey, `query { deployments(first: 100) { edges { node { uuid latestRevision { uuid } } } } }`);
    const deployed = page.deployments.edges.map((e: any) => e.node).filter((_: unknown, i: number) => i % 2 === 0);
    for (const d of deployed) {
      await t.app.db.prisma.deployment.update({ where: { id: d.uuid }, data: { activeRevisionId: d.latestRevision.uuid } });
    }
    const query = (active: string, fragments = "") => `query { deployments(first: 100) { edges { node { uuid activeRevision { ${active} } } } } } ${fragments}`;
    const spy = vi.spyOn(t.app.deps.prepared, "tuples");
    const revisionReads = () => spy.mock.calls.map(([statement]) => statement.name).filter((name) => name.startsWith("revision"));
    try {
      const idsOnly = await gqlOk(t, ws.apiKey, query("__typename id uuid ...I", "fragment I on Revision { uuid }"));
      expect(revisionReads()).toEqual([]);
      const read = await gqlOk(t, ws.apiKey, query("__typename id uuid status"));
      expect(revisionReads()).toEqual(["revision_summaries_by_ids"]);
      const withoutStatus = read.deployments.edges.map(({ node }: any) => {
        if (!node.activeRevision) return node;
        const { status, ...ids } = node.activeRevision;
        expect(status).toBe("CREATING");
        return { ...node, activeRevision: ids };
      });
      expect(idsOnly.deployments.edges.map((e: any) => e.node)).toEqual(withoutStatus);
      const active = withoutStatus.filter((d: any) => d.activeRevision);
      expect(active.map((d: any) => d.activeRevision.uuid)).toEqual(deployed.map((d: any) => d.latestRevision.uuid));
      expect(active.every((d: any) => d.activeRevision.__typename === "Revision" && d.activeRevision.id !== d.activeRevision.uuid)).toBe(true);
      expect(withoutStatus.length - active.length).toBe(50);

      // A deployment not read by a page (its latest revision not read along) answers the same way.
      spy.mockClear();
      const [first] = deployed;
      const node = await gqlOk(t, ws.apiKey, `query($id: ID!) { node(id: $id) { ... on Deployment { latestRevision { uuid } activeRevision { id } } } }`, {
        id: globalId("Deployment", first.uuid),
      });
      expect(revisionReads()).toEqual([]);
      expect(node.node).toEqual({ latestRevision: { uuid: first.latestRevision.uuid }, activeRevision: { id: globalId("Revision", first.latestRevision.uuid) } });
    } finally {
      spy.mockRestore();
      for (const d of deployed) await t.app.db.prisma.deployment.update({ where: { id: d.uuid }, data: { activeRevisionId: null } });
    }
  });

  it("keeps a config-only latest revision to its page: the same deployment reached elsewhere in the operation shows its revision whole", async () => {
    const first = await gqlOk(t, ws.apiKey, `query { deployments(first: 1) { edges { node { id latestRevision { uuid status createdAt } } } } }`);
    const { id, latestRevision } = first.deployments.edges[0].node;
    // The revisions' deployment is loaded after the page has been read (by the deployment loader).
    const data = await gqlOk(
      t,
      ws.apiKey,
      `query {
        deployments(first: 1) { edges { node {
          id latestRevision { uuid }
          revisions(first: 1) { edges { node { deployment { latestRevision { uuid status createdAt } } } } }
        } } }
      }`,
    );
    const node = data.deployments.edges[0].node;
    expect(node.id).toBe(id);
    expect(node.latestRevision).toEqual({ uuid: latestRevision.uuid });
    expect(node.revisions.edges[0].node.deployment.latestRevision).toEqual(latestRevision);
  });
});

describe("resolver calls", () => {
  // graphql-jit answers a field without a resolver by reading the property; a field with one costs a
  // call (a closure, a resolve info and its path) for every object shown. Stored configs are read
  // once into views (source-config.ts, resource-spec.ts) so that their fields need none.
  it.each(["SourceConfig", "SourceRevisionConfig", "ResourceSpec", "ListenerConfig", "SecretReference", "Agent"])("answers every field of %s by a property read", (name) => {
    const type = schema.getType(name);
    expect(isObjectType(type)).toBe(true);
    const resolved = Object.values((type as GraphQLObjectType).getFields()).filter((f) => f.resolve !== undefined).map((f) => f.name);
    expect(resolved).toEqual([]);
  });

  // A deployment is shown as a DeploymentView (deployment-view.ts): its columns and what is read from
  // its small stored JSON (secrets, secret references, agent) are properties; only what loads, plans
  // or is large keeps a resolver.
  it("answers a Deployment's columns by property reads: only relations, the Relay id and the stored configs resolve", () => {
    const type = schema.getType("Deployment") as GraphQLObjectType;
    const resolved = Object.values(type.getFields()).filter((f) => f.resolve !== undefined).map((f) => f.name);
    expect(resolved.sort()).toEqual(["activeRevision", "id", "integration", "latestRevision", "listener", "revisions", "sourceConfig", "sourceRevisionConfig"]);
  });

  // Every page shows its nodes through edges (builder.ts): one call an item would be one for nothing.
  it("answers every connection edge's node and cursor by property reads", () => {
    const edges = Object.values(schema.getTypeMap()).filter((t): t is GraphQLObjectType => isObjectType(t) && t.name.endsWith("Edge"));
    expect(edges.length).toBeGreaterThan(3);
    for (const edge of edges) {
      const { node, cursor } = edge.getFields();
      expect([edge.name, node?.resolve, cursor?.resolve]).toEqual([edge.name, undefined, undefined]);
    }
  });
});
