import { parseBenchArgs, params } from "./lib/args.js";
import { percentile } from "./lib/load.js";
import { runMain } from "./lib/main.js";
import { type Cell, fmt, Report } from "./lib/report.js";
import { seedDeployments } from "./lib/seed.js";
import { withServer } from "./lib/session.js";
import { closeGroup, collectDelays, type Group, latestRevisionGlobalId, openGroups, split } from "./lib/subscriber-groups.js";
import type { SubscriberConfig } from "./lib/subscribers.js";

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

runMain(async () => {
  const report = new Report("fanout", args.scale, p);
  const rows: Cell[][] = [];
  for (const kind of args.dbs) {
    await withServer(kind, { PIPELINE_WORKER: "off", BENCH_COUNT_SQL: "1" }, async ({ server, client }) => {
      const [deployment] = await seedDeployments(client, 1);
      const revisionId = deployment!.latest_revision_id;
      // The subscription takes the revision's global id.
      const globalId = await latestRevisionGlobalId(client, deployment!.id);
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
        const readies = await openGroups(base, "ws", split(p.ws, p.wsProcesses), groups);
        const heap1 = (await server.memory()).heapUsed;
        readies.push(...(await openGroups(base, "sse", split(p.sse, 1), groups)));
        const heap2 = (await server.memory()).heapUsed;

        // What the server does while nothing changes, with every subscriber listening.
        const idle0 = await server.statements();
        await new Promise((r) => setTimeout(r, p.idleSeconds * 1000));
        const idlePerSecond = ((await server.statements()) - idle0) / p.idleSeconds;

        // The one change: everything after this instant is delivery.
        const change0 = await server.statements();
        const t0 = performance.timeOrigin + performance.now();
        await client.expect(200, "POST", `/v2/deployments/${deployment!.id}/revisions/${revisionId}/interrupt`);
        const delivered = await collectDelays(groups, t0, p.timeoutSeconds);
        for (const k of ["ws", "sse"] as const) {
          const { delays, missing } = delivered[k];
          const expected = k === "ws" ? p.ws : p.sse;
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
