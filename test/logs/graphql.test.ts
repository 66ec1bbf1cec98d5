import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { countSql } from "../graphql/sql-count.js";
import { gql, gqlOk, globalId } from "../graphql/support.js";
import { newDeployment, stored, type Target, write } from "./support.js";

/** Revision.buildLogs and Revision.deployLogs: Relay connections over a revision's logs. */

let t: TestApp;
let ws: NewWorkspace;
let x: Target;
let ids: string[];

const LOGS = /* GraphQL */ `
  query($id: ID!, $first: Int, $after: String, $last: Int, $before: String, $filter: LogFilter) {
    node(id: $id) { ... on Revision {
      buildLogs(first: $first, after: $after, last: $last, before: $before, filter: $filter) {
        totalCount
        edges { cursor node { id timestamp level message } }
        pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
      }
    } }
  }`;

const logs = async (variables: Record<string, unknown>) => (await gqlOk(t, ws.apiKey, LOGS, { id: globalId("Revision", x.revisionId), ...variables })).node.buildLogs;

beforeAll(async () => {
  t = await startTestApp({ PIPELINE_WORKER: "off", RATE_LIMIT_PER_MINUTE: "0" });
  ws = await t.workspace();
  x = await newDeployment(t, ws.apiKey);
  await write(t, x, Array.from({ length: 30 }, (_, i) => ({ level: i % 10 === 9 ? "ERROR" : "INFO", message: `line ${i}` })));
  await write(t, x, [{ kind: "deploy", message: "deploy line" }]);
  ids = (await stored(t, x.revisionId)).map((l) => l.id);
});
afterAll(() => t.close());

describe("Revision.buildLogs", () => {
  it("lists the log oldest first, 20 by default, with totalCount; last: 5 is the tail", async () => {
    const page = await logs({});
    expect(page.totalCount).toBe(31);
    expect(page.edges.map((e: any) => e.node.id)).toEqual(ids.slice(0, 20));
    expect(page.pageInfo).toMatchObject({ hasNextPage: true, hasPreviousPage: false });
    expect(page.edges[1].node).toEqual({ id: ids[1], timestamp: expect.any(String), level: "INFO", message: "line 0" });
    const tail = await logs({ last: 5 });
    expect(tail.edges.map((e: any) => e.node.message)).toEqual(["line 25", "line 26", "line 27", "line 28", "line 29"]);
    expect(tail.pageInfo).toMatchObject({ hasNextPage: false, hasPreviousPage: true });
  });

  it("pages forward and backward by 2 over the same ordered lines", async () => {
    const forward: string[] = [];
    let after: string | null = null;
    for (;;) {
      const page: any = await logs({ first: 2, after });
      forward.push(...page.edges.map((e: any) => e.node.id));
      if (!page.pageInfo.hasNextPage) break;
      after = page.pageInfo.endCursor;
    }
    const backward: string[] = [];
    let before: string | null = null;
    for (;;) {
      const page: any = await logs({ last: 2, before });
      backward.unshift(...page.edges.map((e: any) => e.node.id));
      if (!page.pageInfo.hasPreviousPage) break;
      before = page.pageInfo.startCursor;
    }
    expect(forward).toEqual(ids);
    expect(backward).toEqual(ids);
  });

  it("filters as REST does, and counts what the filter keeps", async () => {
    const errors = await logs({ filter: { level: "ERROR" } });
    expect(errors.edges.map((e: any) => e.node.message)).toEqual(["line 9", "line 19", "line 29"]);
    expect(errors.totalCount).toBe(3);
    const found = await logs({ filter: { query: "LINE 2", level: "INFO" }, first: 3 });
    expect(found.edges.map((e: any) => e.node.message)).toEqual(["line 2", "line 20", "line 21"]);
    expect(found.totalCount).toBe(11);
    const from = (await stored(t, x.revisionId))[1]!.timestamp.toISOString();
    expect((await logs({ filter: { startTime: from, endTime: from } })).totalCount).toBe(30);
  });

  it("refuses a cursor of another filter, and bounds that cross", async () => {
    const page = await logs({ first: 2 });
    const other = await gql(t, ws.apiKey, LOGS, { id: globalId("Revision", x.revisionId), first: 2, after: page.pageInfo.endCursor, filter: { level: "ERROR" } });
    expect(other.errors?.[0]?.extensions?.code).toBe("BAD_USER_INPUT");
    const crossed = await gql(t, ws.apiKey, LOGS, {
      id: globalId("Revision", x.revisionId),
      filter: { startTime: "2026-03-02T00:00:00Z", endTime: "2026-03-01T00:00:00Z" },
    });
    expect(crossed.errors?.[0]).toMatchObject({ message: expect.stringContaining("end_time must not be before start_time"), extensions: { code: "BAD_USER_INPUT" } });
  });

  it("refuses bounds before year 1, and dates and times that do not exist, as bad input (as REST does)", async () => {
    // Date.parse rolls 2026-02-30 over into March, and 24:00 into the next day.
    for (const startTime of ["0000-01-01T00:00:00Z", "0001-01-01T00:00:00+23:59", "2026-02-30T00:00:00Z", "2026-01-01T24:00:00Z", "2026-01-01T12:60:00Z"]) {
      const res = await gql(t, ws.apiKey, LOGS, { id: globalId("Revision", x.revisionId), filter: { startTime } });
      expect(res.errors?.[0]?.extensions?.code, startTime).toBe("BAD_USER_INPUT");
      expect(res.errors?.[0]?.message, startTime).toMatch(/DateTime/);
    }
  });

  it("reads the logs of a whole page of revisions in the same few statements as one revision's", async () => {
    const d = await newDeployment(t, ws.apiKey);
    for (let i = 0; i < 9; i++) {
      const r = await t.request("POST", `/v2/deployments/${d.deploymentId}/revisions`, { key: ws.apiKey, body: {} });
      await write(t, { deploymentId: d.deploymentId, revisionId: r.body.id }, [{ message: `rev ${i}` }, { kind: "deploy", message: "d" }]);
    }
    const query = /* GraphQL */ `query($id: ID!, $n: Int!) { node(id: $id) { ... on Deployment { revisions(first: $n) { edges { node {
      buildLogs(last: 3) { totalCount edges { node { message } } } deployLogs(first: 1, filter: { level: INFO }) { edges { node { id } } } } } } } } }`;
    const variables = (n: number) => ({ id: globalId("Deployment", d.deploymentId), n });
    await gqlOk(t, ws.apiKey, query, variables(1)); // warms the key cache
    const sql = countSql();
    try {
      const { statements: one } = await sql.within(() => gqlOk(t, ws.apiKey, query, variables(1)));
      const { result: ten, statements } = await sql.within(() => gqlOk(t, ws.apiKey, query, variables(10)));
      expect(statements).toBe(one);
      expect(ten.node.revisions.edges).toHaveLength(10);
      expect(ten.node.revisions.edges[0].node.buildLogs.edges.at(-1).node.message).toBe("rev 8");
    } finally {
      sql.restore();
    }
  });
});
