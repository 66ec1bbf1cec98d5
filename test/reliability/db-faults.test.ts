import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { openDatabase } from "../../src/db/client.js";
import { isDatabaseUnavailable } from "../../src/core/prisma-errors.js";
import { toErrorAnswer } from "../../src/rest/errors.js";
import type { TestResponse } from "../support/app.js";
import { type TestApp, startTestApp } from "../support/app.js";
import { eventually } from "../support/wait.js";

const adminUrl = process.env.TEST_DATABASE_URL;

/** PostgreSQL only: PGlite runs in the process and has no connections to lose. */
describe.skipIf(!adminUrl)("database faults", () => {
  let t: TestApp;
  let ws: NewWorkspace;
  let dbName: string;
  let admin: pg.Client;

  beforeAll(async () => {
    // The load below is one caller far above any rate limit: off, so that only the faults show.
    t = await startTestApp({ RATE_LIMIT_PER_MINUTE: "0" });
    ws = await t.workspace();
    const config = t.app.config.database;
    if (config.kind !== "postgres") throw new Error("expected PostgreSQL");
    dbName = new URL(config.url).pathname.slice(1);
    admin = new pg.Client({ connectionString: adminUrl });
    await admin.connect();
  });
  afterAll(async () => {
    await admin.query(`ALTER DATABASE "${dbName}" ALLOW_CONNECTIONS true`);
    await admin.end();
    await t.close();
  });

  /** Ends every session of the app's database but `except`'s. */
  const terminate = async (except = 0) =>
    (
      await admin.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> $2`, [dbName, except])
    ).rowCount;

  const listener = (computeId: string) => ({ compute_type: "k8s", compute_id: computeId, compute_config: { k8s_namespaces: [] }, version: "1" });

  function expectUnavailable(res: TestResponse) {
    expect(res.status).toBe(503);
    expect(res.body).toEqual({ detail: expect.any(String) });
    expect(res.headers.get("retry-after")).toMatch(/^\d+$/);
  }


  it("answers 503 {detail} with Retry-After when queries in flight lose their connection, and creates nothing half-way", async () => {
    const before = (await t.request("GET", "/v2/listeners?limit=100", { key: ws.apiKey })).body.resources.length;
    // Hold the table so that requests stay in the database until their sessions are terminated.
    const locker = new pg.Client({ connectionString: (t.app.config.database as { url: string }).url });
    await locker.connect();
    const lockerPid = (await locker.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0]!.pid;
    await locker.query("BEGIN; LOCK TABLE listeners IN ACCESS EXCLUSIVE MODE");
    const inFlight = [
      ...Array.from({ length: 4 }, () => t.request("GET", "/v2/listeners", { key: ws.apiKey })),
      ...Array.from({ length: 4 }, (_, i) => t.request("POST", "/v2/listeners", { key: ws.apiKey, body: listener(`lost-${i}`) })),
    ];
    await eventually(async () => {
      const { rows } = await admin.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND wait_event_type = 'Lock'`, [dbName]);
      expect(rows[0].n).toBe(8);
    });
    expect(await terminate(lockerPid)).toBeGreaterThanOrEqual(8);
    await locker.query("ROLLBACK");
    await locker.end();
    for (const res of await Promise.all(inFlight)) expectUnavailable(res);

    // The pool reconnects on its own.
    await eventually(async () => expect((await t.request("GET", "/v2/listeners?limit=100", { key: ws.apiKey })).status).toBe(200));
    const after = (await t.request("GET", "/v2/listeners?limit=100", { key: ws.apiKey })).body.resources;
    expect(after).toHaveLength(before);
  });

  it("keeps answering under load while connections are terminated: only 2xx or 503, then all 2xx", async () => {
    let stop = false;
    const statuses = new Map<number, number>();
    let created = 0;
    const worker = async (n: number) => {
      for (let i = 0; !stop; i++) {
        const res =
          i % 3 === 0
            ? await t.request("POST", "/v2/listeners", { key: ws.apiKey, body: listener(`load-${n}-${i}`) })
            : await t.request("GET", "/v2/listeners", { key: ws.apiKey });
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        if (res.status === 201) created++;
        if (res.status === 503) expectUnavailable(res);
      }
    };
    const before = (await t.app.db.sql.query<{ n: number }>("SELECT count(*)::int AS n FROM listeners"))[0]!.n;
    const workers = Array.from({ length: 8 }, (_, n) => worker(n));
    for (let round = 0; round < 5; round++) {
      await sleep(150);
      await terminate();
    }
    await sleep(300);
    stop = true;
    await Promise.all(workers);
    expect([...statuses.keys()].every((s) => s === 200 || s === 201 || s === 503), JSON.stringify([...statuses])).toBe(true);
    expect(statuses.get(200)).toBeGreaterThan(0);
    // Every 201 is a row, and no row exists whose creator was told it failed.
    await eventually(async () => {
      const now = (await t.app.db.sql.query<{ n: number }>("SELECT count(*)::int AS n FROM listeners"))[0]!.n;
      expect(now - before).toBe(created);
    });
  });

  it("turns /readyz red while the database refuses connections, and green again by itself", async () => {
    expect((await t.request("GET", "/readyz")).status).toBe(200);
    await admin.query(`ALTER DATABASE "${dbName}" ALLOW_CONNECTIONS false`);
    try {
      await terminate();
      const ready = await t.request("GET", "/readyz");
      expect(ready.status).toBe(503);
      expect(ready.body).toEqual({ status: "database unreachable" });
      expectUnavailable(await t.request("GET", "/v2/listeners", { key: ws.apiKey }));
      expectUnavailable(await t.request("POST", "/v2/listeners", { key: ws.apiKey, body: listener("refused") }));
      expectUnavailable(
        await t.request("POST", "/v2/listeners", { key: ws.apiKey, body: listener("refused"), headers: { "idempotency-key": "during-outage" } }),
      );
      // The process itself is fine.
      expect((await t.request("GET", "/healthz")).status).toBe(200);
    } finally {
      await admin.query(`ALTER DATABASE "${dbName}" ALLOW_CONNECTIONS true`);
    }
    await eventually(async () => expect((await t.request("GET", "/readyz")).body).toEqual({ status: "ready" }));
    expect((await t.request("GET", "/v2/listeners", { key: ws.apiKey })).status).toBe(200);
    // A 503 is never kept as the answer of an Idempotency-Key: the retry runs.
    const retried = await t.request("POST", "/v2/listeners", {
      key: ws.apiKey,
      body: listener("refused"),
      headers: { "idempotency-key": "during-outage" },
    });
    expect(retried.status).toBe(201);
    expect(retried.headers.get("idempotent-replayed")).toBeNull();
  });

  it("has the pipeline worker wait longer between claims while the database is gone, saying so once, and once when it is back", async () => {
    const worker = t.app.worker!;
    const said = (what: string) => t.guard.logLines.filter((line) => line.includes(what));
    // An earlier test's outage is over for the worker too (a claim has worked since): else this one's
    // first failed claim would continue that run of failures, and not be told.
    await eventually(() => expect(said("claiming due steps works again").length).toBe(said("claiming due steps failed").length), { timeoutMs: 60_000 });
    const failedBefore = said("claiming due steps failed").length;
    const backBefore = said("claiming due steps works again").length;
    await admin.query(`ALTER DATABASE "${dbName}" ALLOW_CONNECTIONS false`);
    try {
      await terminate();
      // The first failed claim is told. (Steps in flight fail meanwhile too, and count as errors: the
      // line is waited for itself, not for a number of errors that those may reach first.)
      await eventually(() => expect(said("claiming due steps failed").slice(failedBefore)).toHaveLength(1), { timeoutMs: 60_000 });
      // Five more failures after it (claims, less often each time: with no pause between them, the
      // worker polling every 100 ms, that was half a second), and none of them told.
      const errorsAtFirst = worker.stats.errors;
      await eventually(() => expect(worker.stats.errors - errorsAtFirst).toBeGreaterThanOrEqual(5), { timeoutMs: 60_000 });
      const lines = said("claiming due steps failed").slice(failedBefore);
      expect(lines).toHaveLength(1);
      expect(JSON.parse(lines[0]!)).toMatchObject({ level: 40, reason: expect.any(String) });
      expect(lines[0]).not.toMatch(/\\n\s+at /);
    } finally {
      await admin.query(`ALTER DATABASE "${dbName}" ALLOW_CONNECTIONS true`);
    }
    await eventually(() => expect(said("claiming due steps works again").slice(backBefore)).toHaveLength(1), { timeoutMs: 60_000 });
    // Past the deadlines above, so that a failure says what it waited for.
  }, 240_000);
});

describe("errors of an unreachable database", () => {
  it("map to 503 with Retry-After, from Prisma and from raw SQL alike; query errors do not", async () => {
    // Port 1 on loopback: nothing listens, the connection is refused as when the server is down.
    const db = await openDatabase({ kind: "postgres", url: "postgres://postgres@127.0.0.1:1/none" }, { poolSize: 1 });
    try {
      for (const attempt of [() => db.prisma.listener.count(), () => db.prisma.$transaction((tx) => tx.listener.count()), () => db.sql.query("SELECT 1")]) {
        const err = await attempt().then(
          () => null,
          (e: unknown) => e,
        );
        expect(err).not.toBeNull();
        expect(isDatabaseUnavailable(err)).toBe(true);
        expect(toErrorAnswer(err)).toEqual({
          status: 503,
          body: { detail: "The database is unavailable; retry shortly." },
          headers: { "Retry-After": "1" },
        });
      }
    } finally {
      await db.close().catch(() => {});
    }
    expect(isDatabaseUnavailable(new Error("syntax error at or near"))).toBe(false);
    expect(isDatabaseUnavailable({ code: "P2002", meta: { target: ["name"] } })).toBe(false);
    expect(isDatabaseUnavailable({ code: "23505", severity: "ERROR" })).toBe(false);
    expect(toErrorAnswer(new Error("anything else"))).toBeNull();
  });
});
