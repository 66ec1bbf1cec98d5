import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, describe, expect, it } from "vitest";
import type { Database } from "../../src/db/client.js";
import { IN_FLIGHT_STATUSES, isTerminal, type RevisionStatus } from "../../src/core/revision-machine.js";
import { onThisRunsBackend, THIS_RUNS_BACKEND } from "../support/app.js";
import { type ServerProcess, spawnServer } from "../support/server-process.js";
import { listenerBody } from "../support/fixtures.js";

/**
 * Crash safety: a real server process on a persistent database is killed with SIGKILL while its
 * revisions are in each pipeline status (restarted after each kill), killed again mid-recovery, and
 * restarted. Then
 * every revision is terminal, each one's event log is a chain from CREATING with no gap and no
 * repeat, never were two revisions of a deployment in flight at once, and every deployment and
 * revision whose creation was answered is there.
 *
 * Nothing is left to luck on a loaded machine: the statuses a kill caught are read from the database
 * while the server is dead (not guessed from a poll before it), and the test kills and restarts
 * until every status has been caught, within a generous deadline rather than a number of tries.
 */

const API_KEY = "crash-test-api-key-0000000000000";
const SETTINGS = {
  BOOTSTRAP_API_KEY: API_KEY,
  SECRETS_KEY: Buffer.alloc(32, 5).toString("base64"),
  // Long enough that, created a few at a time, many revisions are under way at once, and that a
  // status seen is still there when the kill that follows lands.
  PIPELINE_STEP_MS: "400",
  // A dead process's steps are taken up again this soon after a restart.
  PIPELINE_LEASE_MS: "400",
  // Killed again and again on purpose, revisions in flight at two kills would run one at a time, and be
  // given up at two more (the give-up is test/pipeline/crash-loops.test.ts's): here every one must finish.
  PIPELINE_CRASH_LIMIT: "0",
  RATE_LIMIT_PER_MINUTE: "0",
  // At least info: spawnServer reads the port from the "ready" line.
  LOG_LEVEL: "info",
};
/** The statuses a revision can be killed in: the queue and every step. */
const KILLABLE: RevisionStatus[] = ["CREATING", "QUEUED", "AWAITING_BUILD", "BUILDING", "AWAITING_DEPLOY", "DEPLOYING"];
/** How long phase 1 may take to have killed revisions in every status (it usually takes one or two kills). */
const CATCH_ALL_WITHIN_MS = 150_000;
/** How long a round waits for every missing status to show at once before it kills for any new one. */
const GATHER_MS = 10_000;

const servers = new Set<ServerProcess>();
afterAll(async () => {
  for (const server of servers) await server.kill("SIGKILL");
});

async function start(env: Record<string, string>): Promise<ServerProcess> {
  const server = await spawnServer({ ...SETTINGS, ...env });
  servers.add(server);
  void server.exited.then(() => servers.delete(server));
  return server;
}

async function call(server: ServerProcess, method: string, path: string, body?: unknown) {
  const res = await fetch(`${server.url}${path}`, {
    method,
    headers: { "x-api-key": API_KEY, "content-type": "application/json", accept: "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${text}\n${server.logTail()}`);
  return JSON.parse(text) as Record<string, any>;
}

const STATUSES = /* GraphQL */ `query($after: String) { deployments(first: 100, after: $after) {
  edges { node { revisions(first: 40) { totalCount edges { node { uuid status } } } } }
  pageInfo { hasNextPage endCursor }
} }`;

/** Every revision's status, through GraphQL, a page of 100 deployments at a time (phase 2 may pass 100). */
async function statuses(server: ServerProcess): Promise<Map<string, RevisionStatus>> {
  const out = new Map<string, RevisionStatus>();
  for (let after: string | null = null; ; ) {
    const data = await call(server, "POST", "/graphql", { query: STATUSES, variables: { after } });
    for (const d of data.data.deployments.edges) {
      // One page of a deployment's revisions must hold them all, or a revision would look lost.
      expect(d.node.revisions.totalCount).toBeLessThanOrEqual(40);
      for (const r of d.node.revisions.edges) out.set(r.node.uuid, r.node.status);
    }
    const { hasNextPage, endCursor } = data.data.deployments.pageInfo;
    if (!hasNextPage) return out;
    after = endCursor;
  }
}

/** The statuses of unfinished revisions as the database holds them (the server being dead). */
async function statusesAtRest(open: () => Promise<Database>): Promise<RevisionStatus[]> {
  const db = await open();
  try {
    const rows = await db.sql.query<{ status: RevisionStatus }>(`SELECT DISTINCT status FROM revisions`);
    return rows.map((r) => r.status).filter((s) => !isTerminal(s));
  } finally {
    await db.close();
  }
}

interface Known {
  deployments: Set<string>;
  revisions: Set<string>;
}

/** One round: two new deployments (managed or self-hosted) and a new revision of an earlier one. */
async function round(server: ServerProcess, known: Known, listenerId: string, i: number): Promise<void> {
  const create = async (n: number) => {
    const selfHosted = n % 3 === 2;
    const created = await call(server, "POST", "/v2/deployments", {
      name: `crash-${n}`,
      source: selfHosted ? "external_container" : "internal_container",
      source_config: selfHosted ? { listener_id: listenerId } : { deployment_type: "dev" },
      source_revision_config: { image_uri: `r.example/crash:${n}` },
    });
    known.deployments.add(created.id);
    known.revisions.add(created.latest_revision_id);
  };
  await Promise.all([create(2 * i), create(2 * i + 1)]);
  const ids = [...known.deployments];
  if (i % 2 === 1 && ids.length > 2) {
    // A new revision of an earlier deployment: it supersedes one not started, or queues behind one in flight.
    const target = ids[(i * 7) % (ids.length - 1)]!;
    const patched = await call(server, "PATCH", `/v2/deployments/${target}`, { source_revision_config: { image_uri: `r.example/crash:${i}b` } });
    known.revisions.add(patched.latest_revision_id);
  }
}

/** A new revision of one of the known deployments, in turn (each gets a few at most: see statuses()). */
async function revise(server: ServerProcess, known: Known, i: number): Promise<void> {
  const ids = [...known.deployments];
  const target = ids[i % ids.length]!;
  const patched = await call(server, "PATCH", `/v2/deployments/${target}`, { source_revision_config: { image_uri: `r.example/crash:${i}r` } });
  known.revisions.add(patched.latest_revision_id);
}

async function scenario(env: Record<string, string>, open: () => Promise<Database>) {
  const known: Known = { deployments: new Set(), revisions: new Set() };
  let server = await start(env);
  const listenerId = (await call(server, "POST", "/v2/listeners", listenerBody({ compute_id: "crash-cluster" }))).id as string;

  // 1. Load, and kill whenever revisions stand in a status no earlier kill caught, until every
  // status has had revisions killed in it (usually all at once, in one kill; on a loaded machine
  // the pipeline may be slower than the load, and it takes a few). What a kill caught is read from
  // the database while the server is dead.
  let i = 0;
  const killedIn = new Set<RevisionStatus>();
  const missing = () => KILLABLE.filter((s) => !killedIn.has(s));
  const phase1 = Date.now() + CATCH_ALL_WITHIN_MS;
  for (let kills = 0; missing().length > 0; kills++) {
    if (Date.now() > phase1) throw new Error(`after ${kills} kills in ${CATCH_ALL_WITHIN_MS} ms, never killed in ${missing().join(", ")}`);
    const gather = Date.now() + GATHER_MS;
    let seen = new Set<RevisionStatus>();
    const fresh = () => missing().filter((s) => seen.has(s));
    // Wait for everything still missing at once, or for anything new once the gathering time is up.
    while (fresh().length < missing().length && (Date.now() < gather || fresh().length === 0) && Date.now() < phase1) {
      // Past 80 deployments, new work comes as new revisions of the existing ones, a few a second: without
      // new work, a status not yet caught (CREATING, say) would never show again.
      if (known.deployments.size < 80) await round(server, known, listenerId, i++);
      else await Promise.all([revise(server, known, i++), sleep(200)]);
      seen = new Set((await statuses(server)).values());
    }
    if (fresh().length === 0) continue;
    expect(await server.kill("SIGKILL")).toBe("SIGKILL");
    for (const s of await statusesAtRest(open)) killedIn.add(s);
    server = await start(env);
  }

  // 2. On the last restart, add work while the dead process's leases run out and the pipeline
  // resumes, and kill again.
  const resumed = Date.now();
  while (Date.now() - resumed < 700) await round(server, known, listenerId, i++);
  const midway = [...(await statuses(server)).values()].filter((s) => !isTerminal(s));
  expect(midway.length).toBeGreaterThan(0);
  await server.kill("SIGKILL");

  // 3. Restart and let the pipeline finish everything.
  server = await start(env);
  const finished = Date.now() + 150_000;
  for (;;) {
    const now = await statuses(server);
    if ([...known.revisions].every((id) => now.has(id)) && [...now.values()].every((s) => isTerminal(s))) break;
    if (Date.now() > finished) {
      const missing = [...known.revisions].filter((id) => !now.has(id));
      throw new Error(`not finished: ${JSON.stringify([...now].filter(([, s]) => !isTerminal(s)))}; ${known.deployments.size} deployments, ${known.revisions.size} revisions known, ${now.size} seen, missing ${missing.join(",")}\n${server.logTail()}`);
    }
    await sleep(100);
  }
  expect(await server.kill("SIGTERM")).toBe(0);

  const db = await open();
  try {
    await verify(db, known);
  } finally {
    await db.close();
  }
}

async function verify(db: Database, known: Known) {
  const deployments = await db.sql.query<{ id: string; latest_revision_id: string; active_revision_id: string | null; status: string }>(
    `SELECT id::text, latest_revision_id::text, active_revision_id::text, status FROM deployments`,
  );
  const revisions = await db.sql.query<{ id: string; deployment_id: string; status: RevisionStatus }>(
    `SELECT r.id::text, r.deployment_id::text, r.status FROM revisions r ORDER BY r.created_at DESC, r.id DESC`,
  );
  const events = await db.sql.query<{ id: string; revision_id: string; from_status: string | null; to_status: string }>(
    `SELECT e.id::text, e.revision_id::text, e.from_status, e.to_status FROM revision_events e ORDER BY e.id`,
  );
  // Nothing answered as created is lost.
  const deploymentIds = new Set(deployments.map((d) => d.id));
  for (const id of known.deployments) expect(deploymentIds.has(id), `deployment ${id}`).toBe(true);
  const revisionIds = new Set(revisions.map((r) => r.id));
  for (const id of known.revisions) expect(revisionIds.has(id), `revision ${id}`).toBe(true);

  for (const r of revisions) {
    expect(isTerminal(r.status), `${r.id} is ${r.status}`).toBe(true);
    const log = events.filter((e) => e.revision_id === r.id);
    expect(log[0], r.id).toMatchObject({ from_status: null, to_status: "CREATING" });
    for (let k = 1; k < log.length; k++) expect(log[k]!.from_status, `${r.id}: ${JSON.stringify(log)}`).toBe(log[k - 1]!.to_status);
    const steps = log.map((e) => `${e.from_status}>${e.to_status}`);
    expect(new Set(steps).size, `${r.id} repeats a transition: ${steps.join(" ")}`).toBe(steps.length);
    expect(log.at(-1)!.to_status, r.id).toBe(r.status);
  }

  for (const d of deployments) {
    const own = revisions.filter((r) => r.deployment_id === d.id);
    // Newest first: the latest is the newest, and it finished as DEPLOYED (nothing was failing).
    expect(d.latest_revision_id, d.id).toBe(own[0]!.id);
    expect(own[0]!.status, d.id).toBe("DEPLOYED");
    expect(d.active_revision_id, d.id).toBe(own[0]!.id);
    expect(d.status).toBe("READY");
    // Replayed in commit order, the deployment never had two revisions in flight.
    const inFlight = new Set<string>();
    for (const e of events.filter((ev) => own.some((r) => r.id === ev.revision_id))) {
      if ((IN_FLIGHT_STATUSES as readonly string[]).includes(e.to_status)) inFlight.add(e.revision_id);
      else inFlight.delete(e.revision_id);
      expect(inFlight.size, d.id).toBeLessThanOrEqual(1);
    }
  }
}

describe("SIGKILL in every pipeline status, then restart", () => {
  it(`on ${THIS_RUNS_BACKEND}`, () => onThisRunsBackend("dcp-crash-", scenario), 420_000);
});
