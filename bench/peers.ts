import { spawn, spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { parseBenchArgs, params } from "./lib/args.js";
import { Client } from "./lib/http.js";
import { compare, type LoadResult } from "./lib/load.js";
import { runMain } from "./lib/main.js";
import { LIST_QUERY, NESTED_QUERY } from "./lib/queries.js";
import { type Cell, fmt, Report, RESULT_HEADERS, resultRow } from "./lib/report.js";
import { type RestDeployment, SEED_STEP_MS, seedDeployments, seedRevisions, waitAllServingLatest } from "./lib/seed.js";
import { postgresCpuMs } from "./lib/procs.js";
import { API_KEY, captureTail, freePort, ROOT, startServer } from "./lib/server.js";
import { SERVER_NODE_FLAGS } from "../scripts/lib/processes.js";
import { withServer } from "./lib/session.js";

/**
 * peers: the service's hot reads against what a team could run instead, on the same PostgreSQL data
 * (seeded through the service's REST API): PostGraphile 5 for the GraphQL list and dashboard pages,
 * and a minimal node:http + pg handler (bench/minimal-server.ts) for REST GET by id and the REST
 * list. All targets alternate in each round, so that the machine's load hits each alike; ratios are
 * by requests/s and by the serving process's CPU per request (PostgreSQL's own CPU is not in it).
 *
 * PostGraphile is installed into bench/peers/ on the first run (its own package.json), never one of
 * the service's dependencies. PostgreSQL only (PostGraphile needs it).
 */
const args = parseBenchArgs();
const p = params(args, {
  full: { deployments: 1000, revisionsEach: 6, page: 100, connections: 10, duration: 10, rounds: 3, maxRequests: 500_000 },
  small: { deployments: 200, revisionsEach: 6, page: 100, connections: 10, duration: 3, rounds: 2, maxRequests: 50_000 },
});
const PEERS = join(ROOT, "bench", "peers");

/** PostGraphile's selection of the same columns our GraphQL list answers from (secrets aside: see the README). */
const PG_DEPLOYMENT = `rowId workspaceId createdAt updatedAt name displayName source sourceConfig deploymentType listenerId integrationId
  secretReferences status latestRevisionId activeRevisionId agentId agentEnvironment shareable routeThroughGateway tracerSessionId
  url isPreview imageVersion isManagedDeepAgent deploymentTier computeTier databaseTier`;
const PG_REVISION = "rowId createdAt updatedAt status source sourceRevisionConfig repoCommitSha repoCommitTitle statusMessage";
const PG_LIST = `query List($ws: UUID!, $first: Int!) {
  allDeployments(condition: { workspaceId: $ws }, orderBy: [CREATED_AT_DESC, PRIMARY_KEY_DESC], first: $first) {
    edges { node { ${PG_DEPLOYMENT} latestRevision { rowId sourceRevisionConfig repoCommitSha repoCommitTitle } } }
    pageInfo { hasNextPage endCursor }
  }
}`;
const PG_DASHBOARD = `query Dashboard($ws: UUID!, $first: Int!) {
  allDeployments(condition: { workspaceId: $ws }, orderBy: [CREATED_AT_DESC, PRIMARY_KEY_DESC], first: $first) {
    edges { node { ${PG_DEPLOYMENT}
      latestRevision { ${PG_REVISION} }
      revisionsByDeploymentId(first: 5, orderBy: [CREATED_AT_DESC, PRIMARY_KEY_DESC]) { edges { node { ${PG_REVISION} } } }
    } }
    pageInfo { hasNextPage endCursor }
  }
}`;

interface Peer {
  url: string;
  pid: number;
  stop(): Promise<void>;
}

function installPeers(): void {
  if (existsSync(join(PEERS, "node_modules", "postgraphile", "package.json"))) return;
  process.stdout.write("installing PostGraphile 5 into bench/peers/ (first run) …\n");
  const npm = process.platform === "win32" ? "npm.cmd" : "npm";
  const done = spawnSync(npm, ["install", "--no-audit", "--no-fund", "--engine-strict=false"], { cwd: PEERS, stdio: "inherit", timeout: 600_000 });
  if (done.status !== 0) throw new Error("npm install in bench/peers failed");
}

/**
 * Starts a peer process on 127.0.0.1 and waits until `ready` answers true (at most 120 s). Under the
 * node flags the service runs with (npm start's), which would serve a peer as well.
 */
async function startPeer(name: string, argv: string[], env: Record<string, string>, ready: (url: string) => Promise<boolean>): Promise<Peer> {
  const port = await freePort();
  const child = spawn(process.execPath, [...SERVER_NODE_FLAGS, ...argv], { cwd: ROOT, env: { ...process.env, ...env, PORT: String(port), NODE_ENV: "production" }, stdio: ["ignore", "pipe", "pipe"] });
  const tail = captureTail(child);
  let exited = false;
  const gone = new Promise<void>((resolve) => child.once("exit", () => ((exited = true), resolve())));
  const url = `http://127.0.0.1:${port}`;
  const stop = async () => {
    if (exited) return;
    child.kill("SIGTERM");
    const killer = setTimeout(() => child.kill("SIGKILL"), 10_000);
    await gone;
    clearTimeout(killer);
  };
  const deadline = performance.now() + 120_000;
  for (;;) {
    if (exited) throw new Error(`${name} exited before it was ready:\n${tail()}`);
    if (await ready(url).catch(() => false)) break;
    if (performance.now() > deadline) {
      await stop();
      throw new Error(`${name} not ready within 120 s:\n${tail()}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return { url, pid: child.pid!, stop };
}

async function postJson<T>(url: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: T }> {
  const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body), signal: AbortSignal.timeout(30_000) });
  return { status: res.status, body: (await res.json()) as T };
}

type Node = { uuid: string; latestRevision: { uuid: string } | null; revisions?: { edges: { node: { uuid: string } }[] } };
type PgNode = { rowId: string; latestRevisionId: string | null; latestRevision: { rowId: string } | null; revisionsByDeploymentId?: { edges: { node: { rowId: string } }[] } };

runMain(async () => {
  installPeers();
  const report = new Report("peers", args.scale, p);
  // The seeding server's pipeline deploys what it seeds (quick steps), as a workspace at rest has it.
  await withServer("postgres", { PIPELINE_STEP_MS: SEED_STEP_MS }, async ({ db, client }) => {
    const deployments = await seedDeployments(client, p.deployments);
    await seedRevisions(client, deployments, p.revisionsEach - 1);
    await waitAllServingLatest(client, 900);
    const page = await client.expect<{ resources: RestDeployment[] }>(200, "GET", `/v2/deployments?limit=${p.page}`);
    const workspaceId = page.resources[0]!.tenant_id as string;
    const databaseUrl = db.env.DATABASE_URL!;

    // Every server measured starts after the seeding, ours too, as PostGraphile and the minimal
    // handler do: the server that seeded has served some 6,000 writes, and its compiled code is not
    // that of a server that starts (ab.ts measured the same REST code 16 % slower on it). The seeder
    // stays up, idle, as another replica would.
    const ours = await startServer({ db, env: { PIPELINE_WORKER: "off" } });
    try {
      const postgraphile = await startPeer("PostGraphile", ["bench/peers/postgraphile-server.mjs"], { DATABASE_URL: databaseUrl }, async (url) => {
        const r = await postJson<{ data?: unknown }>(`${url}/graphql`, { query: "{ __typename }" });
        return r.status === 200;
      });
      const minimal = await startPeer("minimal handler", ["--import", "tsx", "bench/minimal-server.ts"], { DATABASE_URL: databaseUrl }, async (url) => (await fetch(`${url}/readyz`)).status === 200);
      try {
        // The same deployments, in the same order, with the same latest and first 5 revisions, from every server.
        const ourPage = await new Client(ours.url).graphql<{ deployments: { edges: { node: Node }[] } }>(NESTED_QUERY, { first: p.page });
        const theirs = await postJson<{ data?: { allDeployments: { edges: { node: PgNode }[] } }; errors?: unknown }>(`${postgraphile.url}/graphql`, {
          query: PG_DASHBOARD,
          variables: { ws: workspaceId, first: p.page },
        });
        if (!theirs.body.data) throw new Error(`PostGraphile: ${JSON.stringify(theirs.body).slice(0, 800)}`);
        const a = ourPage.deployments.edges.map((e) => e.node);
        const b = theirs.body.data.allDeployments.edges.map((e) => e.node);
        if (a.length !== p.page || b.length !== p.page) throw new Error(`page sizes: ours ${a.length}, PostGraphile ${b.length}`);
        a.forEach((d, i) => {
          const g = b[i]!;
          const revs = (n: { edges: { node: { uuid?: string; rowId?: string } }[] } | undefined) => n?.edges.map((e) => e.node.uuid ?? e.node.rowId).join();
          if (d.uuid !== g.rowId || d.latestRevision?.uuid !== g.latestRevision?.rowId || revs(d.revisions) !== revs(g.revisionsByDeploymentId)) {
            throw new Error(`deployment ${i} differs between the service and PostGraphile`);
          }
        });
        const minimalPage = await fetch(`${minimal.url}/v2/deployments?limit=${p.page}`, { headers: { "x-api-key": API_KEY } });
        const minimalIds = ((await minimalPage.json()) as { resources: { id: string }[] }).resources.map((r) => r.id);
        if (minimalIds.join() !== page.resources.map((r) => r.id).join()) throw new Error("the minimal handler's list differs from the service's");

        // GET by id cycles through a page of ids on both.
        const ids = page.resources.map((r) => r.id);
        const getSequence = ids.map((id) => ({ method: "GET" as const, path: `/v2/deployments/${id}` }));
        const gql = (query: string, variables: Record<string, unknown>) => ({ path: "/graphql", method: "POST" as const, body: { query, variables } });
        const results = await compare(
          [
            { name: `ours: GraphQL list (first: ${p.page})`, url: ours.url, pid: ours.pid, ...gql(LIST_QUERY, { first: p.page }) },
            { name: `PostGraphile: list (first: ${p.page})`, url: postgraphile.url, pid: postgraphile.pid, anonymous: true, ...gql(PG_LIST, { ws: workspaceId, first: p.page }) },
            { name: `ours: GraphQL dashboard (${p.page}, latest, first 5 revisions)`, url: ours.url, pid: ours.pid, ...gql(NESTED_QUERY, { first: p.page }) },
            { name: `PostGraphile: dashboard (${p.page}, latest, first 5 revisions)`, url: postgraphile.url, pid: postgraphile.pid, anonymous: true, ...gql(PG_DASHBOARD, { ws: workspaceId, first: p.page }) },
            { name: "ours: REST GET /v2/deployments/{id}", url: ours.url, pid: ours.pid, sequence: getSequence },
            { name: "minimal: GET /v2/deployments/{id}", url: minimal.url, pid: minimal.pid, sequence: getSequence },
            { name: `ours: REST GET /v2/deployments?limit=${p.page}`, url: ours.url, pid: ours.pid, path: `/v2/deployments?limit=${p.page}` },
            { name: `minimal: GET /v2/deployments?limit=${p.page}`, url: minimal.url, pid: minimal.pid, path: `/v2/deployments?limit=${p.page}` },
          ].map((target) => ({ ...target, databaseCpu: postgresCpuMs })),
          { connections: p.connections, durationS: p.duration, maxRequests: p.maxRequests, rounds: p.rounds },
        );
        const [gList, pgList, gDash, pgDash, rGet, mGet, rList, mList] = results as [LoadResult, LoadResult, LoadResult, LoadResult, LoadResult, LoadResult, LoadResult, LoadResult];
        report.table(`postgres: ${p.deployments} deployments × ${p.revisionsEach} revisions, all targets alternating`, RESULT_HEADERS, results.map(resultRow));
        const row = (what: string, a: LoadResult, b: LoadResult, target: number): Cell[] => {
          const ratio = a.rps / b.rps;
          const total = (r: LoadResult) => r.cpuPerRequest + r.databaseCpuPerRequest;
          return [
            what,
            fmt.ratio(ratio),
            `${fmt.ms(a.cpuPerRequest)} vs ${fmt.ms(b.cpuPerRequest)}`,
            fmt.ratio(b.cpuPerRequest / a.cpuPerRequest),
            `${fmt.ms(a.databaseCpuPerRequest)} vs ${fmt.ms(b.databaseCpuPerRequest)}`,
            fmt.ratio(total(b) / total(a)),
            `≥ ${target.toFixed(1)}×`,
            fmt.verdict(ratio >= target),
          ];
        };
        report.table(
          "ratios (requests/s; CPU per request, ours vs theirs, and as a ratio theirs ÷ ours)",
          ["comparison", "requests/s ratio", "server CPU per request", "server CPU ratio", "PostgreSQL CPU per request", "server + PostgreSQL CPU ratio", "target", "verdict"],
          [
            row("our GraphQL list ÷ PostGraphile", gList, pgList, 1.0),
            row("our GraphQL dashboard ÷ PostGraphile", gDash, pgDash, 1.0),
            row("our REST GET by id ÷ minimal handler", rGet, mGet, 0.5),
            row("our REST list ÷ minimal handler", rList, mList, 0.5),
            row("our GraphQL list ÷ our REST list", gList, rList, 0.8),
          ],
        );
        report.note(
          "Same data (checked before measuring: the same deployments, latest and first 5 revisions from both GraphQL servers, the same list from the minimal handler). " +
            "All three servers start once the data is seeded (ours through another server of the service, whose pipeline deployed every deployment's latest revision first, and which stays up, idle). " +
            "The service runs with its API key auth, limits and masking; PostGraphile gets no auth (the workspace is a condition in its query) and its selection leaves out secrets (masking would be a computed column); " +
            "the minimal handler does the same cached key lookup and SELECT as named prepared statements and answers the rows' JSON, unpresented. " +
            "Server CPU per request is the serving process's own (user + system, from /proc); PostgreSQL's is that of every postgres process over the same rounds (the benchmark's database server, shared by all three, idle between requests). The machine is shared: see the load average.",
        );
      } finally {
        await postgraphile.stop();
        await minimal.stop();
      }
    } finally {
      await ours.stop();
    }
  });
  report.finish(args.record);
});
