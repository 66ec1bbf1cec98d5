import { appendFileSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { parseArgs } from "node:util";
import { type Client, createClient } from "graphql-ws";
import WebSocket from "ws";
import { createDatabase } from "./lib/database.js";
import { median, percentile } from "./lib/load.js";
import { runMain } from "./lib/main.js";
import { commit, fmt, load, machine } from "./lib/report.js";
import { API_KEY, type BenchServer, ROOT, startServer } from "./lib/server.js";

/**
 * `npm run soak`: mixed traffic (REST and GraphQL reads, revision-creating writes, deployments
 * deleted and made anew, graphql-ws subscriptions) against a server child process on 127.0.0.1,
 * at 80% of the maximum this machine first measures for the same mix, for SOAK_SECONDS (default
 * 300). Every answer must be the expected one (errors: zero) and the server's heap after GC must be
 * flat after warm-up (the first and last windows compared). Appends its result to bench/README.md
 * under "Soak"; fails (exit 1) when either does not hold. Options: --db pglite|postgres (default pglite), --no-record.
 */

const SECONDS = Number(process.env.SOAK_SECONDS ?? 300);
const { values: opts } = parseArgs({ options: { db: { type: "string", default: "pglite" }, "no-record": { type: "boolean", default: false } } });
if (opts.db !== "pglite" && opts.db !== "postgres") throw new Error(`--db ${opts.db}: pglite or postgres`);
if (!(SECONDS >= 30)) throw new Error("SOAK_SECONDS must be at least 30");

const P = {
  maxSeconds: Math.min(20, Math.max(8, Math.round(SECONDS / 15))),
  connections: 32,
  /** Deployments deleted and made anew as the soak goes (the data stays bounded). */
  recycled: 24,
  /** Deployments kept for the whole soak: long-lived subscriptions watch them. */
  pinned: 4,
  /** graphql-ws clients following one revision to its end, then the next. */
  followers: 12,
  maxInFlight: 256,
  sampleEveryMs: 5_000,
  stepMs: 100,
};

const HEADERS = { "x-api-key": API_KEY, "content-type": "application/json", accept: "application/json" };

class Traffic {
  readonly recycled: string[] = [];
  readonly pinned: string[] = [];
  readonly latest = new Map<string, string>();
  readonly latencies: number[] = [];
  readonly errorSamples: string[] = [];
  errors = 0;
  completed = 0;
  private n = 0;

  constructor(private readonly url: string) {}

  error(what: string) {
    this.errors++;
    if (this.errorSamples.length < 20) this.errorSamples.push(what);
  }

  async call(method: string, path: string, body: unknown, expected: number): Promise<Record<string, any> | null> {
    const started = performance.now();
    try {
      const res = await fetch(`${this.url}${path}`, { method, headers: HEADERS, body: body === undefined ? undefined : JSON.stringify(body), signal: AbortSignal.timeout(30_000) });
      const text = await res.text();
      this.latencies.push(performance.now() - started);
      this.completed++;
      const parsed = text ? (JSON.parse(text) as Record<string, any>) : {};
      if (res.status !== expected || parsed.errors) {
        this.error(`${method} ${path}: ${res.status} ${text.slice(0, 200)}`);
        return null;
      }
      return parsed;
    } catch (err) {
      this.error(`${method} ${path}: ${err instanceof Error ? err.message : String(err)}`);
      return null;
    }
  }

  async create(pinned: boolean) {
    const name = `soak-${process.pid}-${this.n++}`;
    const d = await this.call("POST", "/v2/deployments", { name, source: "internal_container", source_config: { deployment_type: "dev" }, source_revision_config: { image_uri: `r.example/${name}:1` } }, 201);
    if (!d) return;
    this.latest.set(d.id, d.latest_revision_id);
    (pinned ? this.pinned : this.recycled).push(d.id);
  }

  private any = () => { const all = [...this.recycled, ...this.pinned]; return all[Math.floor(Math.random() * all.length)]!; };

  /** Requests under way per deployment: a retired deployment is deleted once it has none. */
  private readonly inUse = new Map<string, number>();
  private readonly retired = new Set<string>();

  /** One request (a recycle is two) of the mix: two thirds reads, the rest writes. */
  async op(): Promise<void> {
    const id = this.any();
    this.inUse.set(id, (this.inUse.get(id) ?? 0) + 1);
    try {
      await this.request(id);
    } finally {
      const left = this.inUse.get(id)! - 1;
      if (left > 0) this.inUse.set(id, left);
      else {
        this.inUse.delete(id);
        if (this.retired.has(id)) void this.remove(id);
      }
    }
  }

  private async request(id: string): Promise<void> {
    const r = Math.random();
    if (r < 0.25) await this.call("GET", `/v2/deployments/${id}`, undefined, 200);
    else if (r < 0.37) await this.call("GET", "/v2/deployments?limit=20", undefined, 200);
    else if (r < 0.52) await this.call("GET", `/v2/deployments/${id}/revisions/${this.latest.get(id)}`, undefined, 200);
    else if (r < 0.6) await this.call("GET", `/v2/deployments/${id}/revisions?limit=5`, undefined, 200);
    else if (r < 0.7) {
      await this.call("POST", "/graphql", { query: "{ deployments(first: 20) { totalCount edges { node { name status latestRevision { status } activeRevision { id } } } } }" }, 200);
    } else if (r < 0.85) {
      const d = await this.call("PATCH", `/v2/deployments/${id}`, { source_revision_config: { image_uri: `r.example/soak:${this.n++}` } }, 200);
      if (d) this.latest.set(id, d.latest_revision_id);
    } else if (r < 0.95) {
      const rev = await this.call("POST", `/v2/deployments/${id}/revisions`, {}, 201);
      if (rev) this.latest.set(id, rev.id);
    } else await this.recycle();
  }

  /**
   * The oldest recycled deployment leaves the mix and is deleted once no request to it is under way
   * (at a rate near the maximum one may take seconds); a new one joins.
   */
  private async recycle() {
    const old = this.recycled.shift();
    if (old) {
      this.retired.add(old);
      if (!this.inUse.has(old)) void this.remove(old);
    }
    await this.create(false);
  }

  private async remove(id: string) {
    this.retired.delete(id);
    this.latest.delete(id);
    await this.call("DELETE", `/v2/deployments/${id}`, undefined, 204);
  }
}

const wsClient = (url: string) =>
  createClient({ url: `${url.replace(/^http/, "ws")}/graphql`, webSocketImpl: WebSocket, connectionParams: { "X-Api-Key": API_KEY }, retryAttempts: 0, lazy: true });

/** Subscription traffic: long-lived watches of the pinned deployments, and followers of revisions to their end. */
class Subscriptions {
  messages = 0;
  streams = 0;
  private stopped = false;
  private readonly clients: Client[] = [];
  private readonly running: Promise<void>[] = [];

  constructor(private readonly url: string, private readonly traffic: Traffic) {}

  start() {
    for (const id of this.traffic.pinned) {
      const client = this.client();
      client.subscribe(
        { query: `subscription($id: ID!) { deploymentRevisionsChanged(deploymentId: $id) { kind revision { status } } }`, variables: { id: Buffer.from(`Deployment:${id}`).toString("base64") } },
        {
          next: (m) => (m.errors ? this.traffic.error(`deploymentRevisionsChanged: ${JSON.stringify(m.errors)}`) : this.messages++),
          error: (e) => this.stopped || this.traffic.error(`deploymentRevisionsChanged ended: ${JSON.stringify(e)}`),
          complete: () => this.stopped || this.traffic.error("deploymentRevisionsChanged completed"),
        },
      );
    }
    for (let i = 0; i < P.followers; i++) this.running.push(this.follow(this.client()));
  }

  private client() {
    const client = wsClient(this.url);
    this.clients.push(client);
    return client;
  }

  /** Follows the latest revision of a pinned deployment to its terminal status, then another. */
  private async follow(client: Client) {
    while (!this.stopped) {
      const deployment = this.traffic.pinned[Math.floor(Math.random() * this.traffic.pinned.length)]!;
      const revision = this.traffic.latest.get(deployment)!;
      const statuses: string[] = [];
      await new Promise<void>((resolve) => {
        client.subscribe(
          { query: `subscription($id: ID!) { revisionStatusChanged(revisionId: $id) { status } }`, variables: { id: Buffer.from(`Revision:${revision}`).toString("base64") } },
          {
            next: (m) => {
              this.messages++;
              if (m.errors) this.traffic.error(`revisionStatusChanged: ${JSON.stringify(m.errors)}`);
              else statuses.push((m.data as { revisionStatusChanged: { status: string } }).revisionStatusChanged.status);
            },
            error: (e) => {
              if (!this.stopped) this.traffic.error(`revisionStatusChanged ended: ${JSON.stringify(e)}`);
              resolve();
            },
            complete: () => {
              // Disposing the clients at the end completes the streams still open.
              if (this.stopped) return resolve();
              this.streams++;
              if (!/^(DEPLOYED|SKIPPED|INTERRUPTED|\w+_FAILED)$/.test(statuses.at(-1) ?? "")) this.traffic.error(`revision stream ended at ${statuses.join(">")}`);
              resolve();
            },
          },
        );
      });
    }
  }

  async stop() {
    this.stopped = true;
    await Promise.all(this.clients.map((c) => c.dispose()));
    await Promise.race([Promise.all(this.running), sleep(10_000)]);
  }
}

/** Closed loop, `connections` at a time, for `seconds`: the mix's maximum rate on this machine. */
async function measureMax(traffic: Traffic): Promise<number> {
  const before = traffic.completed;
  const started = performance.now();
  const until = started + P.maxSeconds * 1000;
  await Promise.all(Array.from({ length: P.connections }, async () => { while (performance.now() < until) await traffic.op(); }));
  return ((traffic.completed - before) / (performance.now() - started)) * 1000;
}

interface Sample { atS: number; heapMb: number; rssMb: number }

runMain(async () => {
  const db = await createDatabase(opts.db as "pglite" | "postgres");
  let server: BenchServer | null = null;
  try {
    server = await startServer({ db, env: { PIPELINE_STEP_MS: String(P.stepMs) } });
    const traffic = new Traffic(server.url);
    for (let i = 0; i < P.pinned; i++) await traffic.create(true);
    for (let i = 0; i < P.recycled; i++) await traffic.create(false);
    process.stdout.write(`measuring the maximum for ${P.maxSeconds} s…\n`);
    const max = await measureMax(traffic);
    const rate = 0.8 * max;
    process.stdout.write(`maximum ${max.toFixed(0)} requests/s; soaking at ${rate.toFixed(0)}/s for ${SECONDS} s\n`);

    const subscriptions = new Subscriptions(server.url, traffic);
    subscriptions.start();
    traffic.latencies.length = 0;
    const samples: Sample[] = [];
    const first = traffic.completed;
    const started = performance.now();
    const elapsed = () => (performance.now() - started) / 1000;
    let launched = 0;
    let inFlight = 0;
    let late = 0;
    let nextSample = 0;
    while (elapsed() < SECONDS) {
      const due = Math.floor(rate * elapsed());
      for (; launched < due; launched++) {
        // Bounded: a server falling behind is counted, not buried under a growing queue.
        if (inFlight >= P.maxInFlight) { late += due - launched; launched = due; break; }
        inFlight++;
        void traffic.op().finally(() => inFlight--);
      }
      if (performance.now() >= nextSample) {
        nextSample = performance.now() + P.sampleEveryMs;
        const m = await server.memory();
        samples.push({ atS: elapsed(), heapMb: m.heapUsed / 2 ** 20, rssMb: m.rss / 2 ** 20 });
      }
      await sleep(5);
    }
    const soakSeconds = elapsed();
    const deadline = performance.now() + 30_000;
    while (inFlight > 0 && performance.now() < deadline) await sleep(20);
    await subscriptions.stop();
    const requests = traffic.completed - first;
    report({ max, rate, soakSeconds, requests, late, traffic, subscriptions, samples });
    if (traffic.errors > 0 || !flatness(samples).flat) throw new Error(`soak failed: ${traffic.errors} errors, heap flat: ${flatness(samples).flat}`);
  } finally {
    await server?.stop();
    await db.drop();
  }
});

/** Warm-up excluded, the median heap of the first window against that of the last. */
function flatness(samples: Sample[]) {
  const warm = Math.max(10, SECONDS * 0.2);
  const window = Math.min(60, (SECONDS - warm) / 3);
  const firstW = samples.filter((s) => s.atS >= warm && s.atS < warm + window).map((s) => s.heapMb);
  const lastW = samples.filter((s) => s.atS >= SECONDS - window).map((s) => s.heapMb);
  const a = median(firstW);
  const b = median(lastW);
  // Flat: grown by no more than 5% or 4 MB, whichever is larger.
  return { warm, window, first: a, last: b, growth: b - a, flat: b - a <= Math.max(0.05 * a, 4) };
}

function report(r: { max: number; rate: number; soakSeconds: number; requests: number; late: number; traffic: Traffic; subscriptions: Subscriptions; samples: Sample[] }) {
  const f = flatness(r.samples);
  const short = SECONDS < 300 ? ` — a short run (SOAK_SECONDS=${SECONDS}), not the 5-minute soak` : "";
  const row = (k: string, v: string | number) => `| ${k} | ${v} |`;
  const block = [
    `### soak: ${new Date().toISOString().replace(/\.\d+Z$/, "Z")}, ${opts.db}, ${SECONDS} s${short}`,
    "",
    `- machine: ${machine()}`,
    `- commit: ${commit()}`,
    `- load average (1, 5, 15 min) at end: ${load()}`,
    `- mix: 25% GET deployment, 12% list, 15% poll revision, 8% list revisions, 10% GraphQL page, 15% PATCH (new revision), 10% POST revision, 5% delete + create; ${P.pinned} graphql-ws watches of deployments and ${P.followers} followers of revisions to their end; pipeline step ${P.stepMs} ms`,
    "",
    "| measure | value |",
    "|---|---|",
    row(`measured maximum (closed loop, ${P.connections} connections, ${P.maxSeconds} s)`, `${fmt.int(r.max)} requests/s`),
    row("soak rate (80%) / achieved", `${fmt.int(r.rate)} / ${fmt.int(r.requests / r.soakSeconds)} requests/s`),
    row("requests answered", fmt.int(r.requests)),
    row("latency p50 / p99", `${fmt.ms(percentile(r.traffic.latencies, 50))} / ${fmt.ms(percentile(r.traffic.latencies, 99))}`),
    row("not sent on time (more than 256 in flight)", fmt.int(r.late)),
    row("subscription messages / revision streams followed to the end", `${fmt.int(r.subscriptions.messages)} / ${fmt.int(r.subscriptions.streams)}`),
    row("**errors** (any unexpected status, GraphQL error, failed connection or stream)", `**${r.traffic.errors}**`),
    row(`heap after GC: median of ${f.window.toFixed(0)} s after a ${f.warm.toFixed(0)} s warm-up → median of the last ${f.window.toFixed(0)} s`, `${f.first.toFixed(1)} MB → ${f.last.toFixed(1)} MB (${f.growth >= 0 ? "+" : ""}${f.growth.toFixed(1)} MB)`),
    row("**heap flat** (growth ≤ 5% or 4 MB)", `**${f.flat ? "yes" : "NO"}**`),
    "",
    `Heap after GC (MB) every ${P.sampleEveryMs / 1000} s: ${r.samples.map((s) => s.heapMb.toFixed(1)).join(", ")}`,
    ...(r.traffic.errorSamples.length > 0 ? ["", "First errors:", "", ...r.traffic.errorSamples.map((e) => `- \`${e}\``)] : []),
    "",
  ].join("\n");
  process.stdout.write(`\n${block}\n`);
  if (opts["no-record"]) return;
  const path = join(ROOT, "bench", "README.md");
  const headings = [...readFileSync(path, "utf8").matchAll(/^## (.*)$/gm)].map((m) => m[1]);
  // This section is the file's last: a run is appended under it, or the section is started at the end.
  const intro = `\n## Soak\n\n\`npm run soak\` (not in CI; SOAK_SECONDS shortens it, \`--db postgres\` runs it on PostgreSQL): ${P.pinned + P.recycled} deployments under mixed REST and GraphQL traffic with graphql-ws subscriptions, at 80% of the maximum measured first for the same mix, against a server child process on 127.0.0.1. It passes when there are no errors and the server's heap after GC is flat after warm-up.\n`;
  appendFileSync(path, `${headings.at(-1) === "Soak" ? "" : intro}\n${block}`);
  process.stdout.write("appended to bench/README.md\n");
}
