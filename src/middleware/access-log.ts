import { randomUUID } from "node:crypto";
import type { Context, MiddlewareHandler } from "hono";
import { matchedRoutes } from "hono/route";
import type { Tenant } from "../core/auth.js";
import type { Logger } from "../logger.js";
import type { Metrics, RequestRecord } from "./metrics.js";

/** A caller's X-Request-Id is kept when it is a plain token of sane length; otherwise one is made. */
export const REQUEST_ID = /^[A-Za-z0-9][A-Za-z0-9._:@+=\/-]{0,127}$/;

export type ObservedEnv = { Variables: { requestId: string; record: RequestRecord; tenant: Tenant } };

/** The pattern of the route that answered (`/v2/deployments/:deployment_id`), never the URL itself. */
export function routePattern(c: Context): string {
  const routes = matchedRoutes(c).filter((r) => r.method !== "ALL");
  return routes.at(-1)?.path ?? "unmatched";
}

/** What a tenant says about its caller: the workspace, and the API key's id (never the key). */
export function recordTenant(record: RequestRecord, tenant: Tenant): void {
  record.workspaceId = tenant.workspaceId;
  record.actor = tenant.actor;
  if (tenant.actor.startsWith("api_key:")) record.keyId = tenant.actor.slice("api_key:".length);
}

/**
 * The first middleware: gives the request its id (X-Request-Id, returned on the answer), then, once
 * answered, writes one JSON access line and counts it in the HTTP metrics. The line names the route
 * pattern, not the URL, so no query string (an upload's signature, an OAuth callback's code and
 * state) is ever logged, and no header but the request id is. Client errors (4xx) log at info, like
 * any answer; 5xx at warn: the fault itself is logged, with its stack, where it is caught.
 */
export function observeRequests(logger: Logger, metrics: Metrics | null): MiddlewareHandler<ObservedEnv> {
  const log = logger.child({ component: "http" });
  return async (c, next) => {
    const started = performance.now();
    const given = c.req.header("x-request-id");
    const requestId = given !== undefined && REQUEST_ID.test(given) ? given : randomUUID();
    const record: RequestRecord = {};
    c.set("requestId", requestId);
    c.set("record", record);
    try {
      await next();
    } finally {
      const tenant = c.get("tenant");
      if (tenant && !record.workspaceId) recordTenant(record, tenant);
      const status = c.res.status;
      const route = routePattern(c);
      const seconds = (performance.now() - started) / 1000;
      c.res.headers.set("X-Request-Id", requestId);
      metrics?.httpRequests.inc({ route, method: c.req.method, status: String(status) });
      metrics?.httpDuration.observe({ route, method: c.req.method, status: String(status) }, seconds);
      const line = {
        request_id: requestId,
        method: c.req.method,
        route,
        status,
        duration_ms: Math.round(seconds * 10_000) / 10,
        workspace_id: record.workspaceId,
        key_id: record.keyId,
        operation_name: record.operationName,
      };
      if (status >= 500) log.warn(line, "request");
      else log.info(line, "request");
    }
  };
}
