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

/** The REST id inside a global id. */
export const restId = (globalId: string) => Buffer.from(globalId, "base64").toString("utf8").split(":").slice(1).join(":");

/** The global id of a REST id, as the schema makes them. */
export const globalId = (typename: string, id: string) => Buffer.from(`${typename}:${id}`).toString("base64");

export const DEPLOYMENT_CREATE = /* GraphQL */ `
  mutation Create($input: DeploymentCreateInput!) {
    deploymentCreate(input: $input) {
      deployment { id uuid name status latestRevision { id uuid status } }
      userErrors { field message code }
    }
  }`;

/**
 * Creates an internal_container deployment (of an image, so that it has something to build)
 * through the mutation; returns its and its first revision's ids.
 */
export async function createDeployment(t: TestApp, key: string, input: Record<string, unknown> = {}) {
  const data = await gqlOk(t, key, DEPLOYMENT_CREATE, {
    input: {
      name: `d-${Math.random().toString(36).slice(2, 10)}`,
      source: "INTERNAL_CONTAINER",
      sourceRevisionConfig: { imageUri: "registry.example/agent:1" },
      ...input,
    },
  });
  const payload = data.deploymentCreate;
  if (payload.userErrors.length > 0) throw new Error(`deploymentCreate refused: ${JSON.stringify(payload.userErrors)}`);
  return {
    id: payload.deployment.id as string,
    uuid: payload.deployment.uuid as string,
    name: payload.deployment.name as string,
    revisionId: payload.deployment.latestRevision.id as string,
  };
}
