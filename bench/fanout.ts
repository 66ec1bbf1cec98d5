import { type ChildProcess, spawn } from "node:child_process";
import { parseBenchArgs, params } from "./lib/args.js";
import { percentile } from "./lib/load.js";
import { runMain } from "./lib/main.js";
import { type Cell, fmt, Report } from "./lib/report.js";
import { seedDeployments } from "./lib/seed.js";
import { ROOT } from "./lib/server.js";
import { withServer } from "./lib/session.js";
import type { ParentMessage, SubscriberConfig, SubscriberMessage } from "./lib/subscribers.js";

/**
 * fan-out: W graphql-ws subscribers and S SSE subscribers (in their own processes) all watch one
 * revision's status on one server; one change (an interrupt through REST) must reach every one.
 * Delivery time is from just before the REST call to each subscriber's receipt; heap per subscriber
 * is the server's heap growth (after full collections) divided by the subscribers added.
 */
const args = parseBenchArgs();
const p = params(args, {
  full: { ws: 10_000, sse: 1_000, wsProcesses: 2, batch: 100, timeoutSeconds: 60, idleSeconds: 20 },
  small: { ws: 500, sse: 100, wsProcesses: 1, batch: 50, timeoutSeconds: 60, idleSeconds: 12 },
});

const SUBSCRIPTION = `subscription Watch($id: ID!) { revisionStatusChanged(revisionId: $id) { status } }`;
const FIELD = "revisionStatusChanged";

interface Group {
  kind: "ws" | "sse";
  child: ChildProcess;
  messages: SubscriberMessage[];
  next(type: SubscriberMessage["type"], timeoutMs: number): Promise<SubscriberMessage>;
  send(m: ParentMessage): void;
}

function startGroup(config: SubscriberConfig): Group {
  const child = spawn(process.execPath, ["--import", "tsx", "bench/lib/subscribers.ts"], {
    cwd: ROOT,
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const messages: SubscriberMessage[] = [];
  const waiters: (() => void)[] = [];
  child.on("message", (m: SubscriberMessage) => {
    messages.push(m);
    waiters.splice(0).forEach((w) => w());
  });
  child.send(config);
  return {
    kind: config.kind,
    child,
    messages,
    send: (m) => child.connected && child.send(m),
    next: (type, timeoutMs) =>
      new Promise((resolve, reject) => {
        const deadline = setTimeout(() => reject(new Error(`${config.kind} subscribers: no "${type}" within ${timeoutMs} ms`)), timeoutMs);
        const check = () => {
          const found = messages.find((m) => m.type === type);
          if (found) {
            clearTimeout(deadline);
            resolve(found);
          } else if (child.exitCode !== null) {
            clearTimeout(deadline);
            reject(new Error(`${config.kind} subscribers exited with ${child.exitCode}`));
          } else waiters.push(check);
        };
        child.once("exit", check);
        check();
      }),
  };
}

async function closeGroup(g: Group): Promise<void> {
  if (g.child.exitCode !== null || g.child.signalCode !== null) return;
  const exited = new Promise((r) => g.child.once("exit", r));
  g.send({ type: "close" });
  const killer = setTimeout(() => g.child.kill("SIGKILL"), 10_000);
  await exited;
  clearTimeout(killer);
}

const split = (total: number, parts: number) =>
  Array.from({ length: parts }, (_, i) => Math.floor(total / parts) + (i < total % parts ? 1 : 0)).filter((n) => n > 0);

runMain(async () => {
  const report = new Report("fanout", args.scale, p);
  const rows: Cell[][] = [];
  for (const kind of args.dbs) {
    await withServer(kind, { PIPELINE_WORKER: "off", BENCH_COUNT_SQL: "1" }, async ({ server, client }) => {
      const [deployment] = await seedDeployments(client, 1);
      const revisionId = deployment!.latest_revision_id;
      // The subscription takes the revision's global id.
      const found = await client.graphql<{ deployments: { edges: { node: { latestRevision: { id: string } } }[] } }>(
        `query ($ids: [ID!]) { deployments(first: 1, filter: { deploymentIds: $ids }) { edges { node { latestRevision { id } } } } }`,
        { ids: [deployment!.id] },
      );
      const globalId = found.deployments.edges[0]?.node.latestRevision.id;
      if (!globalId) throw new Error("the seeded deployment is not in the GraphQL listing");
      const base: Omit<SubscriberConfig, "kind" | "count"> = {
        url: server.url,
        query: SUBSCRIPTION,
        variables: { id: globalId },
        field: FIELD,
        status: "INTERRUPTED",
        batch: p.batch,
      };
      const groups: Group[] = [];
      try {
        const heap0 = (await server.memory()).heapUsed;
        const readies: Extract<SubscriberMessage, { type: "ready" }>[] = [];
        const open = async (kind: "ws" | "sse", counts: number[]) => {
          const started = counts.map((count) => startGroup({ ...base, kind, count }));
          groups.push(...started);
          for (const g of started) readies.push((await g.next("ready", 600_000)) as (typeof readies)[number]);
        };
        await open("ws", split(p.ws, p.wsProcesses));
        const heap1 = (await server.memory()).heapUsed;
        await open("sse", split(p.sse, 1));
        const heap2 = (await server.memory()).heapUsed;
        const failed = readies.reduce((n, r) => n + r.failed, 0);
        if (failed > 0) throw new Error(`${failed} subscriptions failed: ${readies.find((r) => r.firstError)?.firstError}`);

        // What the server does while nothing changes, with every subscriber listening.
        const idle0 = await server.statements();
        await new Promise((r) => setTimeout(r, p.idleSeconds * 1000));
        const idlePerSecond = ((await server.statements()) - idle0) / p.idleSeconds;

        // The one change: everything after this instant is delivery.
        const change0 = await server.statements();
        const t0 = performance.timeOrigin + performance.now();
        await client.expect(200, "POST", `/v2/deployments/${deployment!.id}/revisions/${revisionId}/interrupt`);
        const results = await Promise.all(
          groups.map(async (g) => {
            const timer = setTimeout(() => g.send({ type: "collect" }), p.timeoutSeconds * 1000);
            const m = (await g.next("arrivals", p.timeoutSeconds * 1000 + 30_000)) as Extract<SubscriberMessage, { type: "arrivals" }>;
            clearTimeout(timer);
            return { kind: g.kind, ...m };
          }),
        );
        for (const k of ["ws", "sse"] as const) {
          const mine = results.filter((r) => r.kind === k);
          const delays = mine.flatMap((r) => r.arrivals.map((a) => a - t0));
          const expected = k === "ws" ? p.ws : p.sse;
          const missing = mine.reduce((n, r) => n + r.missing, 0);
          const heapPer = k === "ws" ? (heap1 - heap0) / p.ws : (heap2 - heap1) / p.sse;
          const p99 = percentile(delays, 99);
          rows.push([
            kind,
            k === "ws" ? "graphql-ws" : "SSE",
            fmt.int(expected),
            `${fmt.int(delays.length)}${missing ? ` (${missing} missing)` : ""}`,
            fmt.ms(percentile(delays, 50)),
            fmt.ms(p99),
            fmt.ms(Math.max(...delays)),
            fmt.kb(heapPer),
            `p99 < 200 ms: ${fmt.verdict(p99 < 200 && missing === 0)}; heap < 10 KB: ${fmt.verdict(heapPer < 10 * 1024)}`,
          ]);
        }
        const changeStatements = (await server.statements()) - change0;
        report.note(
          `${kind}: SQL statements while idle with ${p.ws + p.sse} subscribers: ${idlePerSecond.toFixed(1)}/s; ` +
            `for the one change and its delivery to all: ${fmt.int(changeStatements)}`,
        );
        const connectS = readies.map((r) => `${r.connected} in ${r.seconds.toFixed(1)} s`).join(", ");
        report.note(`${kind}: subscribed ${connectS}; server heap ${fmt.mb(heap0)} → ${fmt.mb(heap1)} (ws) → ${fmt.mb(heap2)} (sse)`);
      } finally {
        await Promise.all(groups.map(closeGroup));
      }
    });
  }
  report.table(
    "one revision status change to every subscriber",
    ["database", "transport", "subscribers", "received", "p50", "p99", "max", "server heap per subscriber", "targets"],
    rows,
  );
  report.note(
    `Subscribers run in ${p.wsProcesses} graphql-ws process(es) and 1 SSE process beside the server; times include their receiving. ` +
      "Heap per subscriber: the server's heapUsed after full GCs, before and after subscribing, divided by the subscribers added.",
  );
  report.finish(args.record);
});
