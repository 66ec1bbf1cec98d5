import type { DbKind } from "./lib/args.js";
import { parseBenchArgs, params } from "./lib/args.js";
import { type BenchDatabase, createDatabase } from "./lib/database.js";
import { Client } from "./lib/http.js";
import { runMain } from "./lib/main.js";
import { type Cell, fmt, Report } from "./lib/report.js";
import { type RestDeployment, seedDeployments, waitAllDeployed } from "./lib/seed.js";
import { type BenchServer, startServer } from "./lib/server.js";

/**
 * pipeline: N deployments (N revisions) are created with the worker off, then 1 (or 2, on PostgreSQL)
 * replicas with the worker on are started on that database and move them all to DEPLOYED. Throughput
 * comes from the database's own event log: first worker transition to last DEPLOYED. Then the log is
 * checked: every revision DEPLOYED, no status entered twice by any revision.
 */
const args = parseBenchArgs();
const p = params(args, {
  full: { revisions: 1000, stepMs: 10, timeoutSeconds: 600, createConcurrency: 16 },
  small: { revisions: 100, stepMs: 10, timeoutSeconds: 180, createConcurrency: 8 },
});

interface Outcome {
  replicas: number;
  /** Summed over the replicas, while they worked (server start excluded). */
  statements: number;
  cpuMs: number;
  /** Spawn to /readyz 200 of the slowest replica, with the work waiting. */
  readySeconds: number;
  createSeconds: number;
  makespanSeconds: number;
  statuses: string;
  duplicates: number;
  paths: string;
  deployed: number;
}

interface Baseline {
  statements: number;
  cpuMs: number;
  readySeconds: number;
}

/** What a server with the same settings costs up to /readyz on a database with nothing to do (a warm start, as the workers' is). */
async function baselineOf(kind: DbKind): Promise<Baseline> {
  const db = await createDatabase(kind);
  try {
    const env = { PIPELINE_WORKER: "on", PIPELINE_STEP_MS: String(p.stepMs), BENCH_COUNT_SQL: "1" };
    await (await startServer({ db, env })).stop();
    const server = await startServer({ db, env });
    try {
      return { statements: await server.statements(), cpuMs: await server.cpuMs(), readySeconds: server.readyMs / 1000 };
    } finally {
      await server.stop();
    }
  } finally {
    await db.drop();
  }
}

async function run(kind: DbKind, replicas: number, baseline: Baseline): Promise<Outcome> {
  const db = await createDatabase(kind);
  try {
    // 1. Create every revision while no worker runs: they are all there "at once" when work starts.
    const seeder = await startServer({ db, env: { PIPELINE_WORKER: "off" } });
    let createSeconds: number;
    let deployments: RestDeployment[];
    try {
      const t0 = performance.now();
      deployments = await seedDeployments(new Client(seeder.url), p.revisions, p.createConcurrency);
      createSeconds = (performance.now() - t0) / 1000;
    } finally {
      await seeder.stop();
    }
    // 2. The workers, started together. A worker starts before its server answers /readyz, so the
    // counts are taken from process start, less what an idle server costs to start (baseline).
    const env = { PIPELINE_WORKER: "on", PIPELINE_STEP_MS: String(p.stepMs), BENCH_COUNT_SQL: "1" };
    // On PGlite the waiting work can hold /readyz back until it is done (see bench/README.md).
    const readyTimeoutMs = p.timeoutSeconds * 1000;
    const servers: BenchServer[] = await Promise.all(Array.from({ length: replicas }, () => startServer({ db, env, readyTimeoutMs })));
    let statements = -baseline.statements * replicas;
    let cpuMs = -baseline.cpuMs * replicas;
    const readySeconds = Math.max(...servers.map((s) => s.readyMs)) / 1000;
    try {
      await waitAllDeployed(new Client(servers[0]!.url), p.timeoutSeconds);
      for (const s of servers) {
        statements += await s.statements();
        cpuMs += await s.cpuMs();
      }
    } finally {
      await Promise.all(servers.map((s) => s.stop()));
    }
    if (deployments.length !== p.revisions) throw new Error(`created ${deployments.length} deployments, not ${p.revisions}`);
    // 3. The database's account (PGlite can only be read once the server has let go of it).
    return { replicas, createSeconds, statements, cpuMs, readySeconds, ...(await audit(db)) };
  } finally {
    await db.drop();
  }
}

async function audit(db: BenchDatabase): Promise<Omit<Outcome, "replicas" | "createSeconds" | "statements" | "cpuMs" | "readySeconds">> {
  const [span] = await db.query<{ seconds: number | string }>(
    `SELECT EXTRACT(EPOCH FROM (MAX(at) FILTER (WHERE to_status = 'DEPLOYED') - MIN(at) FILTER (WHERE from_status IS NOT NULL))) AS seconds
       FROM revision_events`,
  );
  const statuses = await db.query<{ status: string; n: number | string }>(
    `SELECT status, COUNT(*) AS n FROM revisions GROUP BY status ORDER BY status`,
  );
  const [dup] = await db.query<{ n: number | string }>(
    `SELECT COUNT(*) AS n FROM (SELECT revision_id, to_status FROM revision_events GROUP BY 1, 2 HAVING COUNT(*) > 1) d`,
  );
  const paths = await db.query<{ path: string; n: number | string }>(
    `SELECT path, COUNT(*) AS n FROM (
       SELECT revision_id, STRING_AGG(to_status, '>' ORDER BY id) AS path FROM revision_events GROUP BY revision_id
     ) r GROUP BY path ORDER BY COUNT(*) DESC`,
  );
  return {
    makespanSeconds: Number(span?.seconds),
    statuses: statuses.map((s) => `${s.status}: ${s.n}`).join(", "),
    deployed: Number(statuses.find((s) => s.status === "DEPLOYED")?.n ?? 0),
    duplicates: Number(dup?.n),
    paths: paths.map((r) => `${r.n}× ${r.path}`).join("; "),
  };
}

runMain(async () => {
  const report = new Report("pipeline", args.scale, p);
  const rows: Cell[][] = [];
  const notes: string[] = [];
  for (const kind of args.dbs) {
    const counts = kind === "postgres" ? [1, 2] : [1];
    const outcomes: Outcome[] = [];
    const baseline = await baselineOf(kind);
    for (const replicas of counts) outcomes.push(await run(kind, replicas, baseline));
    const base = p.revisions / outcomes[0]!.makespanSeconds;
    for (const o of outcomes) {
      const rate = p.revisions / o.makespanSeconds;
      const allDeployed = o.deployed === p.revisions;
      rows.push([
        kind,
        o.replicas,
        `${o.createSeconds.toFixed(1)} s`,
        `${o.makespanSeconds.toFixed(2)} s`,
        `${rate.toFixed(1)}/s`,
        o.replicas === 1 ? "1.00×" : fmt.ratio(rate / base),
        `${fmt.verdict(allDeployed)} (${o.statuses})`,
        o.duplicates === 0 ? "none (met)" : `${o.duplicates} (NOT met)`,
        (o.statements / p.revisions).toFixed(1),
        fmt.ms(o.cpuMs / p.revisions),
      ]);
      notes.push(
        `${kind}, ${o.replicas} replica(s): /readyz answered after ${o.readySeconds.toFixed(1)} s with the work waiting ` +
          `(${baseline.readySeconds.toFixed(1)} s with none); event paths: ${o.paths}`,
      );
    }
  }
  report.table(
    `${p.revisions} revisions, PIPELINE_STEP_MS=${p.stepMs}`,
    ["database", "replicas", "create (worker off)", "first step to last DEPLOYED", "revisions/s", "vs 1 replica", "all DEPLOYED", "status entered twice", "SQL statements per revision", "server CPU per revision"],
    rows,
  );
  for (const n of notes) report.note(n);
  report.note("Target: two replicas near 2× one (PostgreSQL only: embedded PGlite serves one process).");
  report.finish(args.record);
});
