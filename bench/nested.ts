import { parseBenchArgs, params } from "./lib/args.js";
import { type Client, mapLimit } from "./lib/http.js";
import { compare, median } from "./lib/load.js";
import { runMain } from "./lib/main.js";
import { NESTED_QUERY } from "./lib/queries.js";
import { type Cell, fmt, Report, RESULT_HEADERS, resultRow } from "./lib/report.js";
import { type RestDeployment, type RestRevision, seedDeployments, seedRevisions } from "./lib/seed.js";
import type { BenchServer } from "./lib/server.js";
import { withServer } from "./lib/session.js";

/**
 * nested: a page of deployments, each with its latest revision and first 5 revisions, as one GraphQL
 * query, against the REST calls a client needs for the same data: GET /v2/deployments?limit=100, then
 * GET /v2/deployments/{id}/revisions?limit=5 for each (newest first, so its first item is the latest
 * revision: checked). Also the SQL statements each costs, for several page sizes.
 */
const args = parseBenchArgs();
const p = params(args, {
  full: { deployments: 100, revisionsEach: 6, connections: 10, duration: 10, rounds: 3, maxRequests: 500_000, samples: 20, clientConcurrency: 6 },
  small: { deployments: 50, revisionsEach: 6, connections: 10, duration: 3, rounds: 1, maxRequests: 50_000, samples: 5, clientConcurrency: 6 },
});
const PAGE_SIZES = [1, 10, 50, 100];

type Page = { resources: RestDeployment[] };
type RevisionPage = { resources: RestRevision[] };
type GraphNested = {
  deployments: { edges: { node: { uuid: string; latestRevision: { uuid: string } | null; revisions: { edges: { node: { uuid: string } }[] } } }[] };
};

/** What a REST client does for the data: the page, then each deployment's first 5 revisions. */
async function restSequence(client: Client, first: number, concurrency: number) {
  const page = await client.expect<Page>(200, "GET", `/v2/deployments?limit=${first}`);
  const revisions = await mapLimit(page.resources, concurrency, (d) =>
    client.expect<RevisionPage>(200, "GET", `/v2/deployments/${d.id}/revisions?limit=5`),
  );
  return { page, revisions };
}

/** The two answers hold the same deployments and revisions. */
async function sameData(client: Client, first: number) {
  const rest = await restSequence(client, first, p.clientConcurrency);
  const graph = await client.graphql<GraphNested>(NESTED_QUERY, { first });
  const nodes = graph.deployments.edges.map((e) => e.node);
  rest.page.resources.forEach((d, i) => {
    const g = nodes[i];
    const restRevs = rest.revisions[i]!.resources.map((r) => r.id);
    const graphRevs = g?.revisions.edges.map((e) => e.node.uuid) ?? [];
    if (restRevs[0] !== d.latest_revision_id) throw new Error(`deployment ${d.id}: first revision listed is not the latest`);
    if (g?.uuid !== d.id || g.latestRevision?.uuid !== d.latest_revision_id || restRevs.join() !== graphRevs.join()) {
      throw new Error(`deployment ${i} differs between REST and GraphQL`);
    }
    if (restRevs.length !== 5) throw new Error(`deployment ${d.id} has ${restRevs.length} revisions listed, not 5`);
  });
  if (nodes.length !== rest.page.resources.length) throw new Error("page sizes differ");
}

async function statementsOf(server: BenchServer, fn: () => Promise<unknown>): Promise<number> {
  const before = await server.statements();
  await fn();
  return (await server.statements()) - before;
}

/** Wall time of one whole client-side fetch, one at a time: the median of `samples`. */
async function latency(fn: () => Promise<unknown>): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < p.samples; i++) {
    const t0 = performance.now();
    await fn();
    times.push(performance.now() - t0);
  }
  return median(times);
}

runMain(async () => {
  const report = new Report("nested", args.scale, p);
  const sqlRows: Cell[][] = [];
  const latencyRows: Cell[][] = [];
  const page = p.deployments;
  for (const kind of args.dbs) {
    // Statements are counted on this server (BENCH_COUNT_SQL=1: one counter increment per statement).
    await withServer(kind, { PIPELINE_WORKER: "off", BENCH_COUNT_SQL: "1" }, async ({ server, client }) => {
      const deployments = await seedDeployments(client, p.deployments);
      await seedRevisions(client, deployments, p.revisionsEach - 1);
      await sameData(client, page);

      if ((await statementsOf(server, () => client.expect(200, "GET", "/v2/deployments?limit=1"))) === 0) {
        throw new Error("no SQL statements counted: is BENCH_COUNT_SQL wired (src/db/statement-counter.ts)?");
      }
      const sizes = PAGE_SIZES.filter((n) => n <= p.deployments);
      const graphCounts: number[] = [];
      const restCounts: number[] = [];
      for (const n of sizes) {
        // Warm first (auth cache, prepared plans), then count.
        await client.graphql(NESTED_QUERY, { first: n });
        graphCounts.push(await statementsOf(server, () => client.graphql(NESTED_QUERY, { first: n })));
        restCounts.push(await statementsOf(server, () => restSequence(client, n, 1)));
      }
      sqlRows.push([kind, "GraphQL, one query", ...graphCounts]);
      sqlRows.push([kind, "REST, 1 + N calls", ...restCounts]);
      const constant = graphCounts.every((c) => c === graphCounts[0]);
      report.note(`${kind}: GraphQL statements per query constant in page size: ${fmt.verdict(constant)} (${graphCounts.join(", ")} for first: ${sizes.join(", ")})`);

      const graphMs = await latency(() => client.graphql(NESTED_QUERY, { first: page }));
      const restMs = await latency(() => restSequence(client, page, p.clientConcurrency));
      latencyRows.push([kind, fmt.ms(graphMs), fmt.ms(restMs), fmt.ratio(restMs / graphMs), fmt.verdict(graphMs < restMs)]);

      // Throughput: every connection cycles through the REST calls of one sequence (1 + page requests).
      const sequence = [
        { method: "GET" as const, path: `/v2/deployments?limit=${page}` },
        ...deployments.slice(0, page).map((d) => ({ method: "GET" as const, path: `/v2/deployments/${d.id}/revisions?limit=5` })),
      ];
      const [graph, rest] = await compare(
        [
          { name: `GraphQL, ${page} deployments with revisions`, url: server.url, pid: server.pid, path: "/graphql", method: "POST", body: { query: NESTED_QUERY, variables: { first: page } } },
          { name: `REST, ${sequence.length} calls cycled`, url: server.url, pid: server.pid, sequence },
        ],
        { connections: p.connections, durationS: p.duration, maxRequests: p.maxRequests, rounds: p.rounds },
      );
      const restSequences = rest!.rps / sequence.length;
      report.table(`${kind}: throughput under load`, RESULT_HEADERS, [resultRow(graph!), resultRow(rest!)]);
      report.note(
        `${kind}: whole fetches per second: GraphQL ${graph!.rps.toFixed(1)}, REST ${restSequences.toFixed(1)} ` +
          `(${rest!.rps.toFixed(0)} requests/s ÷ ${sequence.length}): GraphQL ${fmt.ratio(graph!.rps / restSequences)} (target: faster: ${fmt.verdict(graph!.rps > restSequences)}); ` +
          `server CPU per whole fetch: GraphQL ${fmt.ms(graph!.cpuPerRequest)}, REST ${fmt.ms(rest!.cpuPerRequest * sequence.length)}`,
      );
    });
  }
  report.table(
    "SQL statements per whole fetch, by page size (counted by the server)",
    ["database", "how", ...PAGE_SIZES.filter((n) => n <= p.deployments).map((n) => `${n} deployments`)],
    sqlRows,
  );
  report.table(
    `one whole fetch of ${page} deployments with revisions, alone (median of ${p.samples}; REST with ${p.clientConcurrency} calls in flight, as a browser)`,
    ["database", "GraphQL", "REST sequence", "REST / GraphQL", "GraphQL faster"],
    latencyRows,
  );
  report.finish(args.record);
});
