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

  it("asks for the schema once a document: aliases of __schema, each a whole copy of it, are refused", async () => {
    const copies = Array.from({ length: 30 }, (_, i) => `a${i}: __schema { ...S }`).join(" ");
    const keyed = { "x-api-key": (await t.workspace()).apiKey };
    for (const query of [`{ ${copies} } fragment S on __Schema { types { name fields { name } } }`, "{ a: __schema { queryType { name } } b: __schema { queryType { name } } }"]) {
      for (const headers of [{ accept: "application/graphql-response+json" }, { accept: "application/graphql-response+json", ...keyed }]) {
        const res = await post(query, headers);
        expect(res.status, query.slice(0, 60)).toBe(400);
        expect(res.body.errors, query.slice(0, 60)).toEqual([
          expect.objectContaining({ message: "The schema is asked for more than once (__schema): ask for it once a document.", extensions: expect.objectContaining({ code: "GRAPHQL_VALIDATION_FAILED" }) }),
        ]);
      }
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
