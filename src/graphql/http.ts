import type { CORSOptions } from "@whatwg-node/server";

/** Where GraphQL is served, over HTTP and graphql-ws alike. */
export const GRAPHQL_PATH = "/graphql";

/**
 * GraphQL's CORS, for yoga's answers and for the limits' refusals ahead of it (refusal.ts): any origin
 * may call with a key (dashboards live elsewhere); credentials are headers, never cookies, so none are
 * shared; a browser may read when to retry and the request's id.
 */
export const GRAPHQL_CORS: CORSOptions = { credentials: false, exposedHeaders: ["Retry-After", "X-Request-Id"] };
