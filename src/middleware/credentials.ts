import type { Credentials } from "../core/auth.js";

/** Anything headers can be read from by name: a fetch `Headers`, or connection params (see paramsAsHeaders). */
export interface HeaderSource {
  get(name: string): string | null | undefined;
}

/**
 * The one reading of credentials, for every face: X-Api-Key (+ X-Tenant-Id), or Authorization:
 * Bearer. REST routes, idempotency, rate limits, GraphQL over HTTP and graphql-ws all call it.
 */
export function credentialsFrom(headers: HeaderSource): Credentials {
  return { apiKey: headers.get("x-api-key"), tenantId: headers.get("x-tenant-id"), authorization: headers.get("authorization") };
}

/** graphql-ws connection params read like HTTP headers, whatever their case: { "X-Api-Key": "…" }. */
export function paramsAsHeaders(params: Readonly<Record<string, unknown>> | undefined): HeaderSource {
  const lower = new Map(Object.entries(params ?? {}).map(([k, v]) => [k.toLowerCase(), typeof v === "string" ? v : null]));
  return { get: (name) => lower.get(name) };
}
