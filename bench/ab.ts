import { rmSync } from "node:fs";
import { join } from "node:path";
import { params } from "./lib/args.js";
import { compare, type LoadResult, type Target } from "./lib/load.js";
import { runMain } from "./lib/main.js";
import { LIST_QUERY, NESTED_QUERY } from "./lib/queries.js";
import { fmt, Report, RESULT_HEADERS, resultRow } from "./lib/report.js";
import { SEED_STEP_MS, SIZED_SPEC, seedDeployments, seedRevisions, waitAllServingLatest } from "./lib/seed.js";
import { API_KEY, type BenchServer, ROOT, startServer } from "./lib/server.js";
import { createDatabase } from "./lib/database.js";
import { Client } from "./lib/http.js";
import { refCommandLine, withRefSource } from "./lib/ref-source.js";
import { buildServer } from "../scripts/build.mjs";

/**
 * ab: the server as a git ref has it (A) against the working tree (B), on one PostgreSQL database,
 * every target of both alternating in each round: what a change does to the hot reads, with the
 * machine's drift hitting both sides alike. Both must first give the same answers (cursors aside),
 * byte for byte: a variant that answers differently (an error is fast) is not timed.
 *
 *   npx tsx bench/ab.ts <git ref> [--set deployments=300] [--set rounds=5] [--set servers=1] [--set specs=1] [--no-record]
 *
 * `specs=1` gives every deployment a resource spec (SIZED_SPEC), as a team that sizes its
 * deployments has them; by default they have none, as the command-line tool's deploy makes them.
 *
 * The ref's src/ is taken from git and bundled as `npm start` bundles the working tree; the Prisma
 * client (generated, not in git) and the migrations are the working tree's, so both sides must have
 * the same schema.
 */
const { sha, args } = refCommandLine("npx tsx bench/ab.ts <git ref> [--set deployments=300] [--set rounds=5] [--set servers=1] [--set specs=1] [--no-record]");
const p = params(args, {
  full: { deployments: 300, revisionsEach: 3, page: 100, connections: 10, duration: 5, rounds: 5, maxRequests: 500_000, servers: 1, specs: 0 },
  small: { deployments: 100, revisionsEach: 2, page: 100, connections: 10, duration: 2, rounds: 2, maxRequests: 50_000, servers: 1, specs: 0 },
});

/** Bundles the ref's src/ into build/server/ (where the working tree's bundle is: the same relative paths). */
function bundleRef(sha: string): Promise<string> {
  return withRefSource(sha, "ab-src-", async (tree) => {
    const outfile = join(ROOT, "build", "server", `ab-${sha}.mjs`);
    await buildServer({ entry: join(tree, "src", "main.ts"), outfile });
    return outfile;
  });
}

const KINDS = ["REST list", "GraphQL list", "GraphQL dashboard"] as const;

/** A side's figure from its servers (measured for the same time): mean requests/s, CPU per request over all their requests. */
function pooled(results: LoadResult[]): { rps: number; cpu: number; range: string } {
  const requests = results.reduce((n, r) => n + r.requests, 0);
  const cpus = results.map((r) => r.cpuPerRequest);
  return {
    rps: results.reduce((n, r) => n + r.rps, 0) / results.length,
    cpu: results.reduce((n, r) => n + r.cpuPerRequest * r.requests, 0) / requests,
    range: `${Math.min(...cpus).toFixed(2)}–${Math.max(...cpus).toFixed(2)} ms`,
  };
}

const CURSORS = /"(endCursor|startCursor|cursor)":"[^"]*"/g;

/** The answer's text, cursors aside (they are signed, and the signature may differ between processes). */
async function answer(server: BenchServer, target: Target): Promise<string> {
  const res = await fetch(`${server.url}${target.path}`, {
    method: target.method ?? "GET",
    headers: { "x-api-key": API_KEY, ...(target.body !== undefined && { "content-type": "application/json" }) },
    body: target.body === undefined ? undefined : JSON.stringify(target.body),
    signal: AbortSignal.timeout(30_000),
  });
  return `${res.status} ${(await res.text()).replace(CURSORS, '"$1":"<cursor>"')}`;
}

runMain(async () => {
  const bundleA = await bundleRef(sha);
  const report = new Report("ab", args.scale, p);
  const db = await createDatabase("postgres");
  try {
    // Seeded by a server of its own: A and B then start alike, on the same data. Its pipeline runs
    // (quick steps) until every deployment serves its latest revision, as a workspace at rest does.
    const seeder = await startServer({ db, env: { PIPELINE_STEP_MS: SEED_STEP_MS } });
    try {
      const client = new Client(seeder.url);
      await seedRevisions(client, await seedDeployments(client, p.deployments, 8, p.specs ? SIZED_SPEC : undefined), p.revisionsEach - 1);
      await waitAllServingLatest(client, 600);
    } finally {
      await seeder.stop();
    }
    // servers > 1: several servers per side, started A, B, A, B…, every target of every server
    // alternating; a side's figure pools its servers. The same code measures up to ±10 % apart from
    // one server start to the next (bench/README.md, Peers), which one server per side cannot tell
    // from a change.
    const a: BenchServer[] = [];
    const b: BenchServer[] = [];
    try {
      for (let i = 0; i < p.servers; i++) {
        a.push(await startServer({ db, env: { PIPELINE_WORKER: "off" }, bundle: bundleA }));
        b.push(await startServer({ db, env: { PIPELINE_WORKER: "off" } }));
      }
      const sideName = (side: "A" | "B", i: number) => `${side === "A" ? `A (${sha})` : "B (working tree)"}${p.servers > 1 ? ` #${i + 1}` : ""}`;
      const kinds = (name: string, server: BenchServer): Target[] => [
        { name: `${name}: ${KINDS[0]}`, url: server.url, pid: server.pid, path: `/v2/deployments?limit=${p.page}` },
        { name: `${name}: ${KINDS[1]}`, url: server.url, pid: server.pid, path: "/graphql", method: "POST", body: { query: LIST_QUERY, variables: { first: p.page } } },
        { name: `${name}: ${KINDS[2]}`, url: server.url, pid: server.pid, path: "/graphql", method: "POST", body: { query: NESTED_QUERY, variables: { first: p.page } } },
      ];
      const targetsA = a.map((server, i) => kinds(sideName("A", i), server));
      const targetsB = b.map((server, i) => kinds(sideName("B", i), server));
      const reference = targetsA[0]!;
      for (const [k, target] of reference.entries()) {
        const expected = await answer(a[0]!, target);
        if (!expected.startsWith("200 ")) throw new Error(`${target.name} answered ${expected.slice(0, 300)}`);
        for (const [i, server] of [...a, ...b].entries()) {
          const got = await answer(server, target);
          if (got !== expected) {
            const who = i < a.length ? sideName("A", i) : sideName("B", i - a.length);
            throw new Error(`${KINDS[k]}: ${who} answers differently from ${sideName("A", 0)}; not timing them.\nexpected: ${expected.slice(0, 300)}\ngot: ${got.slice(0, 300)}`);
          }
        }
      }
      const all = targetsA.flatMap((targets, i) => [...targets, ...targetsB[i]!]);
      // Warm every server (graphql-jit compiles a document on its second run), then measure.
      await compare(all, { connections: p.connections, durationS: 2, maxRequests: p.maxRequests, rounds: 1 });
      const results = await compare(all, { connections: p.connections, durationS: p.duration, maxRequests: p.maxRequests, rounds: p.rounds });
      report.table(`postgres: ${p.deployments} deployments${p.specs ? " with resource specs" : ""} × ${p.revisionsEach} revisions, A and B alternating`, RESULT_HEADERS, results.map(resultRow));
      const byName = new Map(results.map((r) => [r.name, r]));
      const side = (targets: Target[][], k: number) => pooled(targets.map((t) => byName.get(t[k]!.name)!));
      for (const [k, kind] of KINDS.entries()) {
        const [x, y] = [side(targetsA, k), side(targetsB, k)];
        report.note(
          `${kind}: B ÷ A = ${fmt.ratio(y.rps / x.rps)} in requests/s, server CPU per request ${x.cpu.toFixed(2)} → ${y.cpu.toFixed(2)} ms` +
            (p.servers > 1 ? ` (by server: A ${x.range}, B ${y.range})` : ""),
        );
      }
      const ratio = (targets: Target[][]) => side(targets, 1).rps / side(targets, 0).rps;
      report.note(`GraphQL list ÷ REST list: A ${fmt.ratio(ratio(targetsA))}, B ${fmt.ratio(ratio(targetsB))} (requests/s).`);
      report.note(`Every server gave the same answers (cursors aside) before they were timed.`);
    } finally {
      await Promise.all([...a, ...b].map((server) => server.stop()));
    }
  } finally {
    await db.drop();
    rmSync(bundleA, { force: true });
  }
  report.finish(args.record);
});
