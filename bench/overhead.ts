import { parseBenchArgs, params } from "./lib/args.js";
import { startBareServer } from "./lib/bare.js";
import { compare } from "./lib/load.js";
import { runMain } from "./lib/main.js";
import { fmt, Report, RESULT_HEADERS, resultRow } from "./lib/report.js";
import { seedDeployments } from "./lib/seed.js";
import { withServer } from "./lib/session.js";

/**
 * overhead: GET /v2/deployments/{id} against a bare node:http handler answering the same JSON bytes
 * from memory (bench/bare-server.ts): what routing, auth, validation, the database and serialisation
 * cost, measured side by side in one run. GET /healthz of the same server (the HTTP stack and the
 * abuse middleware, no auth, no database) splits that cost between the stack and the rest.
 */
const args = parseBenchArgs();
const p = params(args, {
  full: { connections: 10, duration: 10, rounds: 3, maxRequests: 2_000_000 },
  small: { connections: 10, duration: 3, rounds: 1, maxRequests: 200_000 },
});

runMain(async () => {
  const report = new Report("overhead", args.scale, p);
  for (const kind of args.dbs) {
    await withServer(kind, { PIPELINE_WORKER: "off" }, async ({ server, client }) => {
      const [deployment] = await seedDeployments(client, 1);
      const path = `/v2/deployments/${deployment!.id}`;
      const json = await client.expect(200, "GET", path);
      const bare = await startBareServer(json);
      try {
        const [rest, stack, limit] = await compare(
          [
            { name: `GET ${"/v2/deployments/{id}"}`, url: server.url, pid: server.pid, path },
            { name: "GET /healthz, same server (no auth, no database)", url: server.url, pid: server.pid, path: "/healthz", anonymous: true },
            { name: "bare node:http, same JSON", url: bare.url, pid: bare.pid, path, anonymous: true },
          ],
          { connections: p.connections, durationS: p.duration, maxRequests: p.maxRequests, rounds: p.rounds },
        );
        const ratio = rest!.rps / limit!.rps;
        report.table(`${kind}: one deployment by id`, RESULT_HEADERS, [resultRow(rest!), resultRow(stack!), resultRow(limit!)]);
        report.note(
          `${kind}: service / bare = ${fmt.ratio(ratio)} in requests/s (target at least 0.50×: ${fmt.verdict(ratio >= 0.5)}); ` +
            `${fmt.ratio(limit!.cpuPerRequest / rest!.cpuPerRequest)} by server CPU per request; ` +
            `the HTTP stack alone (/healthz) / bare = ${fmt.ratio(stack!.rps / limit!.rps)} in requests/s`,
        );
      } finally {
        await bare.stop();
      }
    });
  }
  report.note(
    "autocannon and both servers share this machine's cores; the bare handler sends pre-serialised bytes. " +
      "Server CPU per request is read from /proc: on PostgreSQL it leaves out the database's own processes.",
  );
  report.finish(args.record);
});
