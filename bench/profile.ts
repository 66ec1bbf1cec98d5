import { writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseBenchArgs, params } from "./lib/args.js";
import { compare, type Target } from "./lib/load.js";
import { runMain } from "./lib/main.js";
import { LIST_QUERY, NESTED_QUERY } from "./lib/queries.js";
import { type RestDeployment, seedDeployments, seedRevisions } from "./lib/seed.js";
import { withServer } from "./lib/session.js";

/**
 * Where the server's time goes under one kind of load: a V8 CPU profile taken inside the server
 * (through the benchmark probe) while autocannon drives it, summarised by package and by function.
 * A tool for finding what stands between a figure and its target; it records nothing.
 *
 *   npx tsx bench/profile.ts get|list|graphql-list|nested|typename [--db pglite|postgres] [--set duration=10] [--set page=100]
 */
const TARGETS = ["get", "list", "graphql-list", "nested", "typename"] as const;
type Which = (typeof TARGETS)[number];
const which = process.argv[2] as Which;
if (!TARGETS.includes(which)) {
  process.stderr.write(`usage: npx tsx bench/profile.ts ${TARGETS.join("|")} [--db pglite|postgres] [--set duration=10]\n`);
  process.exit(2);
}
const args = parseBenchArgs(process.argv.slice(3));
const p = params(args, {
  full: { deployments: 100, page: 100, duration: 10, connections: 10, top: 25 },
  small: { deployments: 100, page: 100, duration: 5, connections: 10, top: 25 },
});

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const shortUrl = (url: string) =>
  url === "" ? "(native)" : url.replace(/^.*node_modules\//, "").replace(/^file:\/\/\/.*?\/(src|bench)\//, "$1/");
const packageOf = (url: string) => {
  const short = shortUrl(url);
  if (short.startsWith("src/")) return short;
  const parts = short.split("/");
  return parts[0]!.startsWith("@") ? `${parts[0]}/${parts[1]}` : parts[0]!;
};

function summarise(profile: Profile, top: number): string {
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map<number, number>();
  profile.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));
  const total = [...self.values()].reduce((a, b) => a + b, 0);
  const byPackage = new Map<string, number>();
  const byFunction = new Map<string, number>();
  for (const [id, us] of self) {
    const f = nodes.get(id)!.callFrame;
    const pkg = f.functionName === "(idle)" ? "(idle)" : packageOf(f.url);
    byPackage.set(pkg, (byPackage.get(pkg) ?? 0) + us);
    const key = `${f.functionName || "(anonymous)"} ${shortUrl(f.url)}:${f.lineNumber + 1}`;
    byFunction.set(key, (byFunction.get(key) ?? 0) + us);
  }
  const lines = (m: Map<string, number>) =>
    [...m]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([k, us]) => `${((100 * us) / total).toFixed(1).padStart(5)}%  ${k}`)
      .join("\n");
  return `self time by package or file:\n${lines(byPackage)}\n\nself time by function:\n${lines(byFunction)}`;
}

runMain(async () => {
  for (const kind of args.dbs) {
    await withServer(kind, { PIPELINE_WORKER: "off" }, async ({ server, client }) => {
      const deployments: RestDeployment[] = await seedDeployments(client, p.deployments);
      if (which === "nested") await seedRevisions(client, deployments, 5);
      const targets: Record<Which, Target> = {
        get: { name: "get", url: server.url, path: `/v2/deployments/${deployments[0]!.id}` },
        list: { name: "list", url: server.url, path: `/v2/deployments?limit=${p.page}` },
        "graphql-list": { name: "graphql-list", url: server.url, path: "/graphql", method: "POST", body: { query: LIST_QUERY, variables: { first: p.page } } },
        nested: { name: "nested", url: server.url, path: "/graphql", method: "POST", body: { query: NESTED_QUERY, variables: { first: p.page } } },
        // What every GraphQL request costs before any data: HTTP, auth, yoga and envelop.
        typename: { name: "typename", url: server.url, path: "/graphql", method: "POST", body: { query: "{ __typename }" } },
      };
      const target = { ...targets[which], pid: server.pid };
      // Warm (compile, caches), then profile one round.
      await compare([target], { connections: p.connections, durationS: 2, maxRequests: 1_000_000, rounds: 1 });
      await server.profileStart();
      const [result] = await compare([target], { connections: p.connections, durationS: p.duration, maxRequests: 1_000_000, rounds: 1 });
      const profile = await server.profileStop();
      const file = join(tmpdir(), `dcp-${which}-${kind}-${Date.now()}.cpuprofile`);
      writeFileSync(file, profile);
      process.stdout.write(
        `\n== ${which} on ${kind}: ${result!.rps.toFixed(0)} requests/s, server CPU ${result!.cpuPerRequest.toFixed(2)} ms per request; profile: ${file}\n` +
          `${summarise(JSON.parse(profile) as Profile, p.top)}\n`,
      );
    });
  }
});
