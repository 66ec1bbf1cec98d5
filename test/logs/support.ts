import { expect } from "vitest";
import { LogWriter, type NewLogLine } from "../../src/core/log-writer.js";
import type { LogKind, LogLevel } from "../../src/core/schemas/logs.js";
import type { TestApp } from "../support/app.js";

export interface Target {
  deploymentId: string;
  revisionId: string;
}

/** A deployment made through REST (the pipeline is off in these tests: its revision stays CREATING). */
export async function newDeployment(t: TestApp, key: string, body: Record<string, unknown> = {}): Promise<Target> {
  const res = await t.request("POST", "/v2/deployments", {
    key,
    body: { name: `logs-${Math.random().toString(36).slice(2, 10)}`, source: "internal_container", source_revision_config: { image_uri: "r.example/a:1" }, ...body },
  });
  expect(res.status, res.text).toBe(201);
  return { deploymentId: res.body.id, revisionId: res.body.latest_revision_id };
}

/** Writes lines as the pipeline does (one statement, one timestamp for them all) and tells subscribers. */
export async function write(t: TestApp, target: Target, lines: (Partial<NewLogLine> & { message: string })[]): Promise<number> {
  const writer = new LogWriter(t.app.deps, t.app.logger);
  const full = lines.map((l) => ({ kind: "build" as LogKind, level: "INFO" as LogLevel, ...l }));
  const row = await t.app.db.prisma.revision.findUniqueOrThrow({ where: { id: target.revisionId }, select: { workspaceId: true } });
  return writer.append({ id: target.revisionId, deploymentId: target.deploymentId, workspaceId: row.workspaceId }, full);
}

export interface RestLine {
  id: string;
  timestamp: string;
  level: string;
  message: string;
}

export const buildLogsPath = (x: Target, kind: LogKind = "build") => `/v1/projects/${x.deploymentId}/revisions/${x.revisionId}/${kind}_logs`;

/** POSTs a log read; fails the test unless it answers 200. */
export async function read(t: TestApp, key: string, path: string, body: Record<string, unknown>): Promise<{ logs: RestLine[]; next_offset: string | null }> {
  const res = await t.request("POST", path, { key, body });
  expect(res.status, res.text).toBe(200);
  return res.body;
}

/** Pages through a log with next_offset until it is null (or a page comes back empty). */
export async function readAll(t: TestApp, key: string, path: string, body: Record<string, unknown>): Promise<{ lines: RestLine[]; pages: number }> {
  const lines: RestLine[] = [];
  let offset: string | null = null;
  let pages = 0;
  for (;;) {
    const page = await read(t, key, path, { ...body, ...(offset && { offset }) });
    pages++;
    lines.push(...page.logs);
    if (page.next_offset === null || page.logs.length === 0) return { lines, pages };
    offset = page.next_offset;
    if (pages > 10_000) throw new Error("paging does not end");
  }
}

/** The log as stored, in (timestamp, line) order, each line with the id REST and GraphQL show (its number). */
export async function stored(t: TestApp, revisionId: string, kind: LogKind = "build"): Promise<{ id: string; message: string; timestamp: Date }[]> {
  const rows = await t.app.db.prisma.revisionLog.findMany({ where: { revisionId, kind }, orderBy: [{ timestamp: "asc" }, { line: "asc" }] });
  return rows.map((r) => ({ id: String(r.line), message: r.message, timestamp: r.timestamp }));
}
