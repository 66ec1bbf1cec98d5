import { Hono } from "hono";
import { z } from "zod";
import type { LogLine, LogPage, LogService } from "../core/logs.js";
import type { LogKind } from "../core/schemas/logs.js";
import { type Env, pathParams, readJson } from "./http.js";

const deploymentParam = z.object({ deployment_id: z.uuid() });
const revisionParams = z.object({ deployment_id: z.uuid(), revision_id: z.uuid() });

/** COMPAT.md's log entry: timestamps as ISO 8601 strings (the official tool reads them or epoch ms). */
export const presentLogLine = (l: LogLine) => ({ id: l.id, timestamp: l.timestamp.toISOString(), level: l.level, message: l.message });

const presentPage = (page: LogPage) => ({ logs: page.logs.map(presentLogLine), next_offset: page.nextOffset });

/** The paths of the log reads: POSTs that change nothing (no Idempotency-Key bookkeeping). */
export const isLogRead = (path: string) => /^\/v1\/projects\/[^/]+\/(revisions\/[^/]+\/)?(build|deploy)_logs$/.test(path);

/** The log reads the official command-line tool makes (COMPAT.md "Logs"): POSTs that read. */
export function logRoutes(logs: LogService) {
  const revisionLog = (kind: LogKind) => async (c: import("hono").Context<Env>) => {
    const { deployment_id, revision_id } = pathParams(c, revisionParams);
    return c.json(presentPage(await logs.revisionLogs(c.var.tenant, deployment_id, revision_id, kind, await readJson(c))));
  };
  return new Hono<Env>()
    .post("/v1/projects/:deployment_id/revisions/:revision_id/build_logs", revisionLog("build"))
    .post("/v1/projects/:deployment_id/revisions/:revision_id/deploy_logs", revisionLog("deploy"))
    .post("/v1/projects/:deployment_id/deploy_logs", async (c) => {
      const { deployment_id } = pathParams(c, deploymentParam);
      return c.json(presentPage(await logs.deploymentLogs(c.var.tenant, deployment_id, await readJson(c))));
    });
}
