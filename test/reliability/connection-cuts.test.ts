import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase } from "../support/app.js";
import { type ServerProcess, spawnServer } from "../support/server-process.js";
import { eventually } from "../support/wait.js";
import { listenerBody } from "../support/fixtures.js";

/**
 * PostgreSQL cutting the service's connections again and again (pg_terminate_backend, as a
 * failover, a restart or an idle reaper does) while two replicas, real processes, serve load: both
 * survive, answer 2xx or 503 with Retry-After meanwhile, and recover by themselves. A replica
 * started while its connections are being cut waits, retrying with backoff (and saying so), and is
 * ready once they stop.
 */

const adminUrl = process.env.TEST_DATABASE_URL;
const API_KEY = "connection-cuts-api-key-000000000";
const SETTINGS = {
  BOOTSTRAP_API_KEY: API_KEY,
  SECRETS_KEY: Buffer.alloc(32, 9).toString("base64"),
  PIPELINE_STEP_MS: "50",
  RATE_LIMIT_PER_MINUTE: "0",
  // At least info: spawnServer reads the port from the "ready" line.
  LOG_LEVEL: "info",
};
const CUTTING_MS = 18_000;

describe.skipIf(!adminUrl)("connections cut repeatedly under load, on two replicas", () => {
  let admin: pg.Client;
  let url: string;
  let dbName: string;
  const servers: ServerProcess[] = [];

  beforeAll(async () => {
    const database = await createTestDatabase();
    if (!("url" in database)) throw new Error("expected PostgreSQL");
    url = database.url;
    dbName = new URL(url).pathname.slice(1);
    admin = new pg.Client({ connectionString: adminUrl });
    await admin.connect();
  });
  afterAll(async () => {
    await admin.query(`ALTER DATABASE "${dbName}" ALLOW_CONNECTIONS true`).catch(() => {});
    await admin.end();
    for (const server of servers) await server.kill("SIGKILL");
  });

  /** Ends every session of the service's database; how many. */
  const cut = async () =>
    (await admin.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, [dbName])).rowCount ?? 0;

  /** Cuts every 100-300 ms until stopped; resolves with how many sessions it ended. */
  function cutRepeatedly() {
    let stop = false;
    const done = (async () => {
      let ended = 0;
      while (!stop) {
        ended += await cut();
        await sleep(100 + Math.floor(Math.random() * 200));
      }
      return ended;
    })();
    return { stop: () => ((stop = true), done) };
  }

  async function call(server: ServerProcess, method: string, path: string, body?: unknown) {
    const res = await fetch(`${server.url}${path}`, {
      method,
      headers: { "x-api-key": API_KEY, "content-type": "application/json", accept: "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, retryAfter: res.headers.get("retry-after"), text: await res.text() };
  }


  it("both replicas survive, answer 2xx or 503 + Retry-After, and recover by themselves; a replica started meanwhile is ready once the cuts stop", async () => {
    servers.push(await spawnServer({ ...SETTINGS, DATABASE_URL: url }), await spawnServer({ ...SETTINGS, DATABASE_URL: url }));
    const exits: string[] = [];
    for (const [i, server] of servers.entries()) void server.exited.then((code) => exits.push(`replica ${i} exited (${code}):\n${server.logTail()}`));

    const listener = await call(servers[0]!, "POST", "/v2/listeners", listenerBody({ compute_id: "cuts" }));
    expect(listener.status).toBe(201);

    // Load on both replicas: REST reads and writes, GraphQL, and pipeline work (deployments).
    let loading = true;
    const seen = new Map<string, number>();
    const wrong: string[] = [];
    const load = async (server: ServerProcess, n: number) => {
      for (let i = 0; loading; i++) {
        const kind = i % 4;
        let res: { status: number; retryAfter: string | null; text: string };
        try {
          res =
            kind === 0
              ? await call(server, "POST", "/v2/deployments", { name: `cuts-${n}-${i}`, source: "internal_container", source_config: { deployment_type: "dev" } })
              : kind === 1
                ? await call(server, "POST", "/graphql", { query: "{ deployments(first: 5) { totalCount edges { node { id status } } } }" })
                : kind === 2
                  ? await call(server, "GET", "/v2/deployments?limit=5")
                  : await call(server, "POST", "/v2/listeners", listenerBody({ compute_id: `cuts-${n}-${i}` }));
        } catch (err) {
          wrong.push(`request failed: ${String(err)}`);
          await sleep(100);
          continue;
        }
        seen.set(String(res.status), (seen.get(String(res.status)) ?? 0) + 1);
        const fine = res.status < 300 || (res.status === 503 && res.retryAfter !== null && /^\d+$/.test(res.retryAfter));
        if (!fine) wrong.push(`${res.status} ${res.retryAfter} ${res.text.slice(0, 200)}`);
      }
    };
    const loads = servers.flatMap((server, s) => [0, 1, 2].map((k) => load(server, s * 10 + k)));

    // 1. Cut, again and again, while the load runs.
    const cutting = cutRepeatedly();
    await sleep(CUTTING_MS - 6_000);
    expect(exits).toEqual([]);

    // 2. Meanwhile a third replica starts: refused connections at first, so that it must retry.
    await admin.query(`ALTER DATABASE "${dbName}" ALLOW_CONNECTIONS false`);
    await cut();
    const retries: string[] = [];
    const third = spawnServer({ ...SETTINGS, DATABASE_URL: url, PIPELINE_WORKER: "off" }, 120_000, (line) => {
      if (/retry/i.test(line)) retries.push(line);
    });
    let failedToStart = "";
    void third.catch((err: unknown) => (failedToStart = String(err)));
    await eventually(async () => {
      expect(failedToStart).toBe("");
      expect(retries.length).toBeGreaterThan(0);
    }, { timeoutMs: 60_000 });
    await admin.query(`ALTER DATABASE "${dbName}" ALLOW_CONNECTIONS true`);
    await sleep(6_000);
    const ended = await cutting.stop();
    expect(ended).toBeGreaterThan(30);

    // 3. The cuts have stopped: everything recovers by itself.
    servers.push(await third);
    loading = false;
    await Promise.all(loads);
    expect(exits).toEqual([]);
    expect(wrong.slice(0, 10)).toEqual([]);
    expect(seen.get("503") ?? 0, JSON.stringify([...seen])).toBeGreaterThan(0);
    for (const server of servers) {
      await eventually(async () => expect((await call(server, "GET", "/readyz")).status).toBe(200));
      await eventually(async () => expect((await call(server, "GET", "/v2/listeners")).status).toBe(200));
      const graphql = await call(server, "POST", "/graphql", { query: "{ viewer { id } }" });
      expect(graphql.status, graphql.text).toBe(200);
    }
    expect(JSON.parse(retries[0]!)).toMatchObject({ level: 40, msg: expect.stringMatching(/retry/i) });
  }, 240_000);
});
