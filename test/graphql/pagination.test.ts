import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { storeToken } from "../support/oauth.js";
import { createDeployment, gql, gqlOk } from "./support.js";

let t: TestApp;

beforeAll(async () => {
  t = await startTestApp({ PIPELINE_WORKER: "off" });
});
afterAll(() => t.close());

interface Page {
  totalCount: number;
  edges: { cursor: string; node: { id: string } }[];
  pageInfo: { hasNextPage: boolean; hasPreviousPage: boolean; startCursor: string | null; endCursor: string | null };
}

/** One connection under test: a query with $first/$after/$last/$before, and where its page is in the answer. */
interface Subject {
  name: string;
  seed(ws: NewWorkspace, n: number): Promise<void>;
  query: string;
  variables?: Record<string, unknown>;
  pick(data: any): Page;
}

const PAGE = "totalCount edges { cursor node { id } } pageInfo { hasNextPage hasPreviousPage startCursor endCursor }";
const ARGS = "first: $first, after: $after, last: $last, before: $before";
const VARS = "$first: Int, $after: String, $last: Int, $before: String";

let deploymentOfRevisions = "";
/** Installation ids are unique in a workspace: each seeded one gets the next. */
let nextInstallationId = 1000;

const subjects: Subject[] = [
  {
    name: "deployments",
    seed: async (ws, n) => {
      for (let i = 0; i < n; i++) await createDeployment(t, ws.apiKey);
    },
    query: `query(${VARS}) { deployments(${ARGS}) { ${PAGE} } }`,
    pick: (d) => d.deployments,
  },
  {
    name: "listeners",
    seed: async (ws, n) => {
      for (let i = 0; i < n; i++) {
        await gqlOk(t, ws.apiKey, `mutation($c: String!) { listenerCreate(input: {computeType: K8S, computeId: $c, version: "1", computeConfig: {k8sNamespaces: ["default"]}}) { listener { id } } }`, { c: `c-${i}-${Math.random()}` });
      }
    },
    query: `query(${VARS}) { listeners(${ARGS}) { ${PAGE} } }`,
    pick: (d) => d.listeners,
  },
  {
    name: "codehostInstallations",
    seed: async (ws, n) => {
      for (let i = 0; i < n; i++) {
        await gqlOk(t, ws.apiKey, `mutation($i: Int!) { codehostInstallationRegister(input: {installationId: $i, name: "p"}) { codehostInstallation { id } } }`, {
          i: nextInstallationId++,
        });
      }
    },
    query: `query(${VARS}) { codehostInstallations(${ARGS}) { ${PAGE} } }`,
    pick: (d) => d.codehostInstallations,
  },
  {
    name: "agentConnections",
    seed: async (ws, n) => {
      for (let i = 0; i < n; i++) {
        const token = await storeToken(t, ws.apiKey);
        await gqlOk(t, ws.apiKey, `mutation($o: String!) { agentConnectionCreate(agentId: "pager", input: {oauthTokenId: $o}) { agentConnection { id } } }`, { o: token.id });
      }
    },
    query: `query(${VARS}) { agentConnections(agentId: "pager", ${ARGS}) { ${PAGE} } }`,
    pick: (d) => d.agentConnections,
  },
  {
    name: "oauthProviders",
    seed: async (ws, n) => {
      for (let i = 0; i < n; i++) await storeToken(t, ws.apiKey, { providerId: `pager-${i}` });
    },
    query: `query(${VARS}) { oauthProviders(${ARGS}) { ${PAGE} } }`,
    pick: (d) => d.oauthProviders,
  },
  {
    name: "oauthTokens",
    seed: async (ws, n) => {
      for (let i = 0; i < n; i++) await storeToken(t, ws.apiKey);
    },
    query: `query(${VARS}) { oauthTokens(${ARGS}) { ${PAGE} } }`,
    pick: (d) => d.oauthTokens,
  },
  {
    name: "Deployment.revisions",
    seed: async (ws, n) => {
      const d = await createDeployment(t, ws.apiKey);
      deploymentOfRevisions = d.id;
      for (let i = 1; i < n; i++) {
        await gqlOk(t, ws.apiKey, `mutation($d: ID!) { revisionCreate(deploymentId: $d, input: {}) { revision { id } } }`, { d: d.id });
      }
    },
    query: `query($id: ID!, ${VARS}) { node(id: $id) { ... on Deployment { revisions(${ARGS}) { ${PAGE} } } } }`,
    get variables() {
      return { id: deploymentOfRevisions };
    },
    pick: (d) => d.node.revisions,
  },
];

async function page(s: Subject, ws: NewWorkspace, args: Record<string, unknown>): Promise<Page> {
  return s.pick(await gqlOk(t, ws.apiKey, s.query, { ...s.variables, ...args }));
}

async function forward(s: Subject, ws: NewWorkspace, size: number): Promise<{ ids: string[]; pages: Page[] }> {
  const pages: Page[] = [];
  let after: string | null = null;
  for (;;) {
    const p: Page = await page(s, ws, { first: size, after });
    pages.push(p);
    if (!p.pageInfo.hasNextPage) break;
    after = p.pageInfo.endCursor;
    if (pages.length > 50) throw new Error("does not end");
  }
  return { ids: pages.flatMap((p) => p.edges.map((e) => e.node.id)), pages };
}

async function backward(s: Subject, ws: NewWorkspace, size: number): Promise<{ ids: string[]; pages: Page[] }> {
  const pages: Page[] = [];
  let before: string | null = null;
  for (;;) {
    const p: Page = await page(s, ws, { last: size, before });
    pages.unshift(p);
    if (!p.pageInfo.hasPreviousPage) break;
    before = p.pageInfo.startCursor;
    if (pages.length > 50) throw new Error("does not end");
  }
  return { ids: pages.flatMap((p) => p.edges.map((e) => e.node.id)), pages };
}

describe.each(subjects)("$name", (s) => {
  it.each([0, 1, 2, 5, 7])("pages %i items forward and backward by 2 to the same ordered set, with correct pageInfo", async (n) => {
    const ws = await t.workspace();
    await s.seed(ws, Math.max(n, s.name === "Deployment.revisions" ? 1 : 0));
    const expected = s.name === "Deployment.revisions" ? Math.max(n, 1) : n;
    const everything = await page(s, ws, { first: 100 });
    expect(everything.totalCount).toBe(expected);
    expect(everything.edges).toHaveLength(expected);

    const fwd = await forward(s, ws, 2);
    const bwd = await backward(s, ws, 2);
    const all = everything.edges.map((e) => e.node.id);
    expect(fwd.ids).toEqual(all);
    expect(bwd.ids).toEqual(all);
    expect(new Set(all).size).toBe(all.length);

    expect(fwd.pages[0]!.pageInfo.hasPreviousPage).toBe(false);
    expect(fwd.pages.at(-1)!.pageInfo.hasNextPage).toBe(false);
    expect(bwd.pages[0]!.pageInfo.hasPreviousPage).toBe(false);
    for (const p of [...fwd.pages, ...bwd.pages]) {
      expect(p.totalCount).toBe(expected);
      expect(p.edges.length).toBeLessThanOrEqual(2);
      expect(p.pageInfo.startCursor).toBe(p.edges[0]?.cursor ?? null);
      expect(p.pageInfo.endCursor).toBe(p.edges.at(-1)?.cursor ?? null);
    }
    // Every page but the last forward one says more follow; every backward page but the first says more precede.
    for (const p of fwd.pages.slice(0, -1)) expect(p.pageInfo.hasNextPage).toBe(true);
    for (const p of bwd.pages.slice(1)) expect(p.pageInfo.hasPreviousPage).toBe(true);
  });

  it("is stable under concurrent inserts: no item skipped or repeated", async () => {
    const ws = await t.workspace();
    await s.seed(ws, 5);
    const before = (await page(s, ws, { first: 100 })).edges.map((e) => e.node.id);
    const first = await page(s, ws, { first: 2 });
    // New items arrive while the client is paging (newest first: ahead of the pages read).
    if (s.name === "Deployment.revisions") {
      await gqlOk(t, ws.apiKey, `mutation($d: ID!) { revisionCreate(deploymentId: $d, input: {}) { revision { id } } }`, { d: deploymentOfRevisions });
    } else {
      await s.seed(ws, 2);
    }
    const rest: string[] = [];
    let after = first.pageInfo.endCursor;
    for (;;) {
      const p = await page(s, ws, { first: 2, after });
      rest.push(...p.edges.map((e) => e.node.id));
      if (!p.pageInfo.hasNextPage) break;
      after = p.pageInfo.endCursor;
    }
    expect([...first.edges.map((e) => e.node.id), ...rest]).toEqual(before);
  });

  it("refuses sizes over 100 or below 0 and cursors it did not issue for this connection", async () => {
    const ws = await t.workspace();
    await s.seed(ws, 1);
    const foreignCursor = (await gqlOk(t, ws.apiKey, `{ viewer { id } listeners(first: 1) { edges { cursor } } }`)).listeners.edges[0]?.cursor;
    const bad: Record<string, unknown>[] = [{ first: 101 }, { last: 101 }, { first: -1 }, { after: "forged" }, { before: "eyJ0IjoiMjAyNCJ9.AAAA" }];
    if (s.name !== "listeners" && foreignCursor) bad.push({ after: foreignCursor });
    // The same connection's cursor, issued to another workspace: it names a position there, not here.
    if (!s.variables) {
      const other = await t.workspace();
      await s.seed(other, 1);
      const theirs = s.pick(await gqlOk(t, other.apiKey, s.query, { first: 1 })).edges[0]!.cursor;
      bad.push({ after: theirs }, { before: theirs });
    }
    for (const args of bad) {
      const res = await gql(t, ws.apiKey, s.query, { ...s.variables, ...args });
      expect(res.errors, JSON.stringify(args)).toEqual([expect.objectContaining({ extensions: { code: "BAD_USER_INPUT" } })]);
      expect(res.errors![0]!.message).toMatch(/^(first|last|after|before): /);
    }
    const hundred = await gql(t, ws.apiKey, s.query, { ...s.variables, first: 100 });
    expect(hundred.errors).toBeUndefined();
  });
});

describe("cursors of a connection scoped to a parent", () => {
  it("takes an agent's connection cursor only for that agent, as Deployment.revisions does its deployment's", async () => {
    const ws = await t.workspace();
    for (const agent of ["agent-a", "agent-b"]) {
      for (let i = 0; i < 2; i++) {
        const token = await storeToken(t, ws.apiKey);
        await gqlOk(t, ws.apiKey, `mutation($a: String!, $o: String!) { agentConnectionCreate(agentId: $a, input: {oauthTokenId: $o}) { agentConnection { id } } }`, { a: agent, o: token.id });
      }
    }
    const q = `query($a: String!, ${VARS}) { agentConnections(agentId: $a, ${ARGS}) { ${PAGE} } }`;
    const ofA: Page = (await gqlOk(t, ws.apiKey, q, { a: "agent-a", first: 1 })).agentConnections;
    const next: Page = (await gqlOk(t, ws.apiKey, q, { a: "agent-a", first: 1, after: ofA.pageInfo.endCursor })).agentConnections;
    expect(next.edges).toHaveLength(1);
    expect(next.edges[0]!.node.id).not.toBe(ofA.edges[0]!.node.id);
    const res = await gql(t, ws.apiKey, q, { a: "agent-b", first: 1, after: ofA.pageInfo.endCursor });
    expect(res.errors).toEqual([expect.objectContaining({ extensions: { code: "BAD_USER_INPUT" } })]);
    expect(res.errors![0]!.message).toMatch(/^after: Value error, invalid cursor: pass a cursor from this connection/);
  });
});
