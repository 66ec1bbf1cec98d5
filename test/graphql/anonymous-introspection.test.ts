import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/app.js";

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t.close());

const post = (query: string, headers: Record<string, string> = {}) =>
  t.request("POST", "/graphql", { body: { query }, headers: { "x-graphql-yoga-csrf": "1", ...headers } });

describe("introspection without a key (GraphiQL loading its docs)", () => {
  it("answers a document that only introspects", async () => {
    const res = await post("query IntrospectionQuery { __schema { queryType { name } types { name } } }");
    expect(res.status).toBe(200);
    expect(res.body.data.__schema.queryType).toEqual({ name: "Query" });
  });

  it("still refuses anything that reads data, even beside introspection", async () => {
    for (const query of ["{ __schema { queryType { name } } deployments(first: 1) { totalCount } }", "{ deployments(first: 1) { totalCount } }", "{ ...F } fragment F on Query { __typename }"]) {
      const res = await post(query);
      expect(res.status, query).toBe(401);
      expect(res.body.errors[0].extensions.code, query).toBe("UNAUTHENTICATED");
    }
  });

  it("is off where introspection is off (production)", async () => {
    const prod = await startTestApp({ NODE_ENV: "production" });
    try {
      const res = await prod.request("POST", "/graphql", { body: { query: "{ __schema { queryType { name } } }" }, headers: { "x-graphql-yoga-csrf": "1" } });
      expect(res.status).toBe(401);
    } finally {
      await prod.close();
    }
  });
});
