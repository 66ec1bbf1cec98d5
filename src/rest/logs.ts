import { Hono } from "hono";
import { z } from "zod";
import type { LogLine, LogPage, LogService } from "../core/logs.js";
import { type LogKind, logQuerySchema } from "../core/schemas/logs.js";
import { describe, notFound, timestamp } from "./docs.js";
import { type Env, pathParams, readJson } from "./http.js";
import { isoString } from "../time.js";

const deploymentParam = z.object({ deployment_id: z.guid() });
const revisionParams = z.object({ deployment_id: z.guid(), revision_id: z.guid() });

/** COMPAT.md's log entry: timestamps as ISO 8601 strings (the official tool reads them or epoch ms). */
export const presentLogLine = (l: LogLine): z.input<typeof logLineSchema> => ({ id: l.id, timestamp: isoString(l.timestamp), level: l.level, message: l.message });

const presentPage = (page: LogPage): z.input<typeof logPage> => ({ logs: page.logs.map(presentLogLine), next_offset: page.nextOffset });

const logLineSchema = z.object({ id: z.string(), timestamp, level: z.string(), message: z.string() });
const logPage = z.object({
  logs: z.array(logLineSchema),
  next_offset: z.string().nullable().describe("Pass it back as `offset` for the next page; null at the end"),
});
const tag = "Logs";
const logDoc = (summary: string, params: z.ZodType) =>
  // The body may be left out: every field has its default.
  ({ tag, summary, params, body: logQuerySchema.optional(), responses: { 200: { description: "A page of log lines", schema: logPage }, 404: notFound } }) as const;

/** The log reads the official command-line tool makes (COMPAT.md "Logs"): POSTs that read. */
export function logRoutes(logs: LogService) {
  const revisionLog = (kind: LogKind) => async (c: import("hono").Context<Env>) => {
    const { deployment_id, revision_id } = pathParams(c, revisionParams);
    return c.json(presentPage(await logs.revisionLogs(c.var.tenant, deployment_id, revision_id, kind, await readJson(c))));
  };
  return new Hono<Env>()
    .post("/v1/projects/:deployment_id/revisions/:revision_id/build_logs", describe(logDoc("Read a revision's build log", revisionParams), revisionLog("build")))
    .post("/v1/projects/:deployment_id/revisions/:revision_id/deploy_logs", describe(logDoc("Read a revision's deploy log", revisionParams), revisionLog("deploy")))
    .post("/v1/projects/:deployment_id/deploy_logs", describe(logDoc("Read a deployment's deploy log (all its revisions)", deploymentParam), async (c) => {
      const { deployment_id } = pathParams(c, deploymentParam);
      return c.json(presentPage(await logs.deploymentLogs(c.var.tenant, deployment_id, await readJson(c))));
    }));
}
