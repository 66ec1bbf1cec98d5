import { parseBenchArgs, params } from "./lib/args.js";
import type { Client } from "./lib/http.js";
import { compare } from "./lib/load.js";
import { runMain } from "./lib/main.js";
import { LIST_QUERY } from "./lib/queries.js";
import { fmt, Report, RESULT_HEADERS, resultRow } from "./lib/report.js";
import { type RestDeployment, SEED_STEP_MS, seedDeployments, waitAllServingLatest } from "./lib/seed.js";
import { withServer } from "./lib/session.js";

/**
 * list: GET /v2/deployments?limit=100 against the GraphQL query selecting the same fields
 * (deployments(first: 100)), over the same seeded deployments, side by side.
 */
const args = parseBenchArgs();
const p = params(args, {
  full: { deployments: 1000, page: 100, connections: 10, duration: 10, rounds: 3, maxRequests: 500_000 },
  small: { deployments: 100, page: 100, connections: 10, duration: 3, rounds: 1, maxRequests: 50_000 },
});

type GraphDeployment = { uuid: string; name: string; status: string; url: string; latestRevision: { uuid: string } | null };

/** Both faces must answer the same deployments, in the same order, with the same values. */
async function sameData(client: Client): Promise<{ restBytes: number; graphBytes: number }> {
  const rest = await client.call<{ resources: RestDeployment[] }>("GET", `/v2/deployments?limit=${p.page}`);
  const graph = await client.call<{ data: { deployments: { edges: { node: GraphDeployment }[] } } }>("POST", "/graphql", {
    query: LIST_QUERY,
    variables: { first: p.page },
  });
  const a = rest.body.resources;
  const b = graph.body.data?.deployments.edges.map((e) => e.node) ?? [];
  const expected = Math.min(p.page, p.deployments);
  if (a.length !== expected || b.length !== expected) throw new Error(`page sizes: REST ${a.length}, GraphQL ${b.length}, expected ${expected}`);
  a.forEach((d, i) => {
    const g = b[i]!;
    if (d.id !== g.uuid || d.name !== g.name || d.status !== g.status || d.url !== g.url || d.latest_revision_id !== g.latestRevision?.uuid) {
      throw new Error(`item ${i} differs: REST ${JSON.stringify(d).slice(0, 200)} GraphQL ${JSON.stringify(g).slice(0, 200)}`);
    }
  });
  return { restBytes: JSON.stringify(rest.body).length, graphBytes: JSON.stringify(graph.body).length };
}

runMain(async () => {
  const report = new Report("list", args.scale, p);
  for (const kind of args.dbs) {
    // The pipeline (quick steps) deploys what is seeded, as a workspace at rest has it, then idles.
    await withServer(kind, { PIPELINE_STEP_MS: SEED_STEP_MS }, async ({ server, client }) => {
      await seedDeployments(client, p.deployments);
      await waitAllServingLatest(client, 600);
      const sizes = await sameData(client);
      const [rest, graph] = await compare(
        [
          { name: `REST GET /v2/deployments?limit=${p.page}`, url: server.url, pid: server.pid, path: `/v2/deployments?limit=${p.page}` },
          { name: `GraphQL deployments(first: ${p.page})`, url: server.url, pid: server.pid, path: "/graphql", method: "POST", body: { query: LIST_QUERY, variables: { first: p.page } } },
        ],
        { connections: p.connections, durationS: p.duration, maxRequests: p.maxRequests, rounds: p.rounds },
      );
      const ratio = graph!.rps / rest!.rps;
      report.table(`${kind}: a page of ${p.page} of ${p.deployments} deployments`, RESULT_HEADERS, [resultRow(rest!), resultRow(graph!)]);
      report.note(
        `${kind}: GraphQL / REST = ${fmt.ratio(ratio)} in requests/s (target at least 0.80×: ${fmt.verdict(ratio >= 0.8)}), ` +
          `${fmt.ratio(rest!.cpuPerRequest / graph!.cpuPerRequest)} by server CPU per request; ` +
          `answer sizes: REST ${fmt.int(sizes.restBytes)} B, GraphQL ${fmt.int(sizes.graphBytes)} B`,
      );
    });
  }
  report.note("Both answer the same deployments in the same order (checked before measuring). Every deployment serves its latest revision before measuring (its pipeline ran with 10 ms steps), and the data then stays still.");
  report.finish(args.record);
});
