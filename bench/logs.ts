import { parseBenchArgs, params } from "./lib/args.js";
import { type BenchDatabase, createDatabase } from "./lib/database.js";
import { Client } from "./lib/http.js";
import { percentile } from "./lib/load.js";
import { runMain } from "./lib/main.js";
import { type Cell, fmt, Report } from "./lib/report.js";
import { seedDeployments, waitAllDeployed } from "./lib/seed.js";
import { startServer } from "./lib/server.js";
import { withServer } from "./lib/session.js";
import { closeGroup, collectDelays, type Group, latestRevisionGlobalId, openGroups, split } from "./lib/subscriber-groups.js";
import type { SubscriberConfig } from "./lib/subscribers.js";
import type { DbKind } from "./lib/args.js";

/**
 * logs, in two parts.
 * 1. Lines written by the pipeline: N revisions created with the worker off, then one server with
 *    the worker on (PIPELINE_STEP_MS=stepMs) moves them all to DEPLOYED while the simulator and the
 *    status changes write their lines. Throughput comes from the table itself: the lines the worker
 *    wrote over the time between its first and its last. The audit checks that every revision's
 *    deploy log ends with its DEPLOYED line.
 * 2. One new line to many live subscribers: W graphql-ws and S SSE subscribers (in their own
 *    processes) follow one revision's build log (revisionLogAppended, tail 1); the revision is
 *    interrupted through REST, which writes its final line; the time until each subscriber has it.
 */
const args = parseBenchArgs();
const p = params(args, {
  full: { revisions: 500, stepMs: 10, timeoutSeconds: 600, ws: 900, sse: 100, wsProcesses: 1, batch: 100, deliverySeconds: 60 },
  small: { revisions: 50, stepMs: 10, timeoutSeconds: 180, ws: 180, sse: 20, wsProcesses: 1, batch: 50, deliverySeconds: 60 },
});

const CREATED = "[CREATING] Revision created";
const FINAL_LINE = "[INTERRUPTED] Interrupted by a user";
const SUBSCRIPTION = `subscription Follow($id: ID!) { revisionLogAppended(revisionId: $id, kind: BUILD, tail: 1) { id message } }`;

interface Written {
  lines: number;
  seconds: number;
  statements: number;
  cpuMs: number;
  endedWell: number;
}

async function pipelineLines(kind: DbKind): Promise<Written> {
  const db = await createDatabase(kind);
  try {
    const seeder = await startServer({ db, env: { PIPELINE_WORKER: "off" } });
    try {
      await seedDeployments(new Client(seeder.url), p.revisions, 8);
    } finally {
      await seeder.stop();
    }
    const env = { PIPELINE_WORKER: "on", PIPELINE_STEP_MS: String(p.stepMs), BENCH_COUNT_SQL: "1" };
    const worker = await startServer({ db, env, readyTimeoutMs: p.timeoutSeconds * 1000 });
    let statements: number;
    let cpuMs: number;
    try {
      await waitAllDeployed(new Client(worker.url), p.timeoutSeconds);
      statements = await worker.statements();
      cpuMs = await worker.cpuMs();
    } finally {
      await worker.stop();
    }
    return { statements, cpuMs, ...(await audit(db)) };
  } finally {
    await db.drop();
  }
}

/** The lines the worker wrote (every line but the creation lines the seeder wrote) and over how long. */
async function audit(db: BenchDatabase): Promise<Omit<Written, "statements" | "cpuMs">> {
  const [span] = await db.query<{ lines: number | string; seconds: number | string }>(
    `SELECT COUNT(*) AS lines, EXTRACT(EPOCH FROM MAX("timestamp") - MIN("timestamp")) AS seconds FROM revision_logs WHERE message <> $1`,
    [CREATED],
  );
  const [ended] = await db.query<{ n: number | string }>(
    `SELECT COUNT(*) AS n FROM (
       SELECT DISTINCT ON (revision_id) revision_id, message FROM revision_logs WHERE kind = 'deploy' ORDER BY revision_id, "timestamp" DESC, id DESC
     ) last WHERE message = '[DEPLOYED] Deployed'`,
  );
  return { lines: Number(span?.lines), seconds: Number(span?.seconds), endedWell: Number(ended?.n) };
}

async function delivery(kind: DbKind, rows: Cell[][], report: Report): Promise<void> {
  await withServer(kind, { PIPELINE_WORKER: "off", BENCH_COUNT_SQL: "1" }, async ({ server, client }) => {
    const [deployment] = await seedDeployments(client, 1);
    const base: Omit<SubscriberConfig, "kind" | "count"> = {
      url: server.url,
      query: SUBSCRIPTION,
      variables: { id: await latestRevisionGlobalId(client, deployment!.id) },
      field: "revisionLogAppended",
      key: "message",
      status: FINAL_LINE,
      batch: p.batch,
    };
    const groups: Group[] = [];
    try {
      await openGroups(base, "ws", split(p.ws, p.wsProcesses), groups);
      await openGroups(base, "sse", split(p.sse, 1), groups);
      // The one new line: everything after this instant is writing it and delivering it.
      const change0 = await server.statements();
      const t0 = performance.timeOrigin + performance.now();
      await client.expect(200, "POST", `/v2/deployments/${deployment!.id}/revisions/${deployment!.latest_revision_id}/interrupt`);
      const delivered = await collectDelays(groups, t0, p.deliverySeconds);
      for (const k of ["ws", "sse"] as const) {
        const { delays, missing } = delivered[k];
        if (delays.length + missing === 0) continue;
        rows.push([
          kind,
          k === "ws" ? "graphql-ws" : "SSE",
          fmt.int(k === "ws" ? p.ws : p.sse),
          `${fmt.int(delays.length)}${missing ? ` (${missing} missing)` : ""}`,
          fmt.ms(percentile(delays, 50)),
          fmt.ms(percentile(delays, 99)),
          fmt.ms(Math.max(...delays)),
        ]);
      }
      const all = [...delivered.ws.delays, ...delivered.sse.delays];
      report.note(
        `${kind}: all ${fmt.int(p.ws + p.sse)} subscribers: p50 ${fmt.ms(percentile(all, 50))}, p99 ${fmt.ms(percentile(all, 99))}; ` +
          `SQL statements for the interrupt, its line and its delivery to all: ${fmt.int((await server.statements()) - change0)}`,
      );
    } finally {
      await Promise.all(groups.map(closeGroup));
    }
  });
}

runMain(async () => {
  const report = new Report("logs", args.scale, p);
  const written: Cell[][] = [];
  const delivered: Cell[][] = [];
  for (const kind of args.dbs) {
    const w = await pipelineLines(kind);
    written.push([
      kind,
      fmt.int(p.revisions),
      fmt.int(w.lines),
      (w.lines / p.revisions).toFixed(1),
      `${w.seconds.toFixed(2)} s`,
      `${fmt.int(w.lines / w.seconds)}/s`,
      (w.statements / w.lines).toFixed(2),
      fmt.ms(w.cpuMs / w.lines),
      w.endedWell === p.revisions ? "all" : `${w.endedWell} (NOT all)`,
    ]);
    await delivery(kind, delivered, report);
  }
  report.table(
    `lines written by the pipeline: ${p.revisions} revisions, PIPELINE_STEP_MS=${p.stepMs}`,
    ["database", "revisions", "lines written", "lines per revision", "first to last line", "lines/s", "SQL statements per line", "server CPU per line", "deploy logs ending with DEPLOYED"],
    written,
  );
  report.table(
    `one new log line to ${fmt.int(p.ws + p.sse)} live subscribers of revisionLogAppended`,
    ["database", "transport", "subscribers", "received", "p50", "p99", "max"],
    delivered,
  );
  report.note(
    "Lines/s is the pipeline's whole work (claims, steps, transitions and their lines) as it runs, not the writer alone; statements and CPU per line are the " +
      "worker server's totals divided by the lines. Delivery: from just before the REST interrupt (which writes the revision's final line) to each " +
      `subscriber's receipt; subscribers run in ${p.wsProcesses} graphql-ws process(es) and 1 SSE process beside the server.`,
  );
  report.finish(args.record);
});
