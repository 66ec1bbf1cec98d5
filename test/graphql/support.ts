import type { TestApp } from "../support/app.js";

export interface GraphQLResponse {
  status: number;
  // GraphQL answers are whatever the operation selects; tests assert on their shape.
  data: any;
  errors?: { message: string; path?: (string | number)[]; extensions?: Record<string, unknown> }[];
  headers: Headers;
}

/** POSTs an operation to /graphql through app.fetch, as a dashboard would. */
export async function gql(
  t: TestApp,
  key: string | null,
  query: string,
  variables?: Record<string, unknown>,
  headers: Record<string, string> = {},
): Promise<GraphQLResponse> {
  const res = await t.request("POST", "/graphql", {
    ...(key && { key }),
    body: { query, variables },
    headers: { accept: "application/graphql-response+json, application/json", ...headers },
  });
  return { status: res.status, data: res.body?.data, errors: res.body?.errors, headers: res.headers };
}

/** The data of an operation that must succeed: fails the test with the errors otherwise. */
export async function gqlOk(t: TestApp, key: string, query: string, variables?: Record<string, unknown>): Promise<any> {
  const res = await gql(t, key, query, variables);
  if (res.errors || res.status !== 200) {
    throw new Error(`GraphQL failed (${res.status}): ${JSON.stringify(res.errors)}`);
  }
  return res.data;
}
