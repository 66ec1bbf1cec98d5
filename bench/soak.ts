import { appendFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { parseArgs } from "node:util";
import { createDatabase } from "./lib/database.js";
import { median, percentile } from "./lib/load.js";
import { runMain } from "./lib/main.js";
import { commit, fmt, load, machine } from "./lib/report.js";
import { type BenchServer, ROOT, startServer } from "./lib/server.js";
import { Subscriptions, Traffic } from "./lib/soak-traffic.js";

/**
 * `npm run soak`: mixed traffic (REST and GraphQL reads, revision-creating writes, deployments
 * deleted and made anew, graphql-ws subscriptions) against a server child process on 127.0.0.1,
 * at 80% of the maximum this machine first measures for the same mix, for SOAK_SECONDS (default
 * 300). Every answer must be the expected one (errors: zero) and the server's heap after GC must be
 * flat after warm-up (the first and last windows compared). Appends its result to bench/RESULTS.md
 * under "Soak"; fails (exit 1) when either does not hold. Options: --db pglite|postgres (default pglite), --no-record.
 */

const SECONDS = Number(process.env.SOAK_SECONDS ?? 300);
const { values: opts } = parseArgs({ options: { db: { type: "string", default: "pglite" }, "no-record": { type: "boolean", default: false } } });
if (opts.db !== "pglite" && opts.db !== "postgres") throw new Error(`--db ${opts.db}: pglite or postgres`);
if (!(SECONDS >= 30)) throw new Error("SOAK_SECONDS must be at least 30");

const P = {
  /** The maximum is the rate over the second half of this (the pipeline's backlog built up by then). */
  maxSeconds: Math.min(60, Math.max(12, Math.round(SECONDS / 5))),
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


/**
 * Closed loop, `connections` at a time: the mix's maximum rate on this machine, taken over the second
 * half only. Writes leave pipeline work behind them, which takes its share of the server later.
 */
async function measureMax(traffic: Traffic): Promise<number> {
  const started = performance.now();
  const until = started + P.maxSeconds * 1000;
  let half: { at: number; completed: number } | null = null;
  const timer = setTimeout(() => (half = { at: performance.now(), completed: traffic.completed }), (P.maxSeconds * 1000) / 2);
  await Promise.all(Array.from({ length: P.connections }, async () => { while (performance.now() < until) await traffic.op(); }));
  clearTimeout(timer);
  const h = half as { at: number; completed: number } | null;
  if (!h) throw new Error("the maximum's measurement ended before its half");
  return ((traffic.completed - h.completed) / (performance.now() - h.at)) * 1000;
}

interface Sample { atS: number; heapMb: number; rssMb: number }
/** The soak so far, at the end of each window of the timeline. */
interface Mark { atS: number; completed: number; errors: number; latencies: number; load: string }

runMain(async () => {
  const db = await createDatabase(opts.db as "pglite" | "postgres");
  let server: BenchServer | null = null;
  try {
    server = await startServer({ db, env: { PIPELINE_STEP_MS: String(P.stepMs) } });
    const traffic = new Traffic(server.url);
    for (let i = 0; i < P.pinned; i++) await traffic.create(true);
    for (let i = 0; i < P.recycled; i++) await traffic.create(false);
    // The subscribers run while the maximum is measured too: it is the maximum of the whole mix.
    const subscriptions = new Subscriptions(server.url, traffic, P.followers);
    subscriptions.start();
    process.stdout.write(`measuring the maximum for ${P.maxSeconds} s…\n`);
    const max = await measureMax(traffic);
    const rate = 0.8 * max;
    process.stdout.write(`maximum ${max.toFixed(0)} requests/s; soaking at ${rate.toFixed(0)}/s for ${SECONDS} s\n`);
    const subscribed = { messages: subscriptions.messages, streams: subscriptions.streams };
    traffic.latencies.length = 0;
    const samples: Sample[] = [];
    const first = traffic.completed;
    const started = performance.now();
    const elapsed = () => (performance.now() - started) / 1000;
    let launched = 0;
    let inFlight = 0;
    let late = 0;
    let nextSample = 0;
    const marks: Mark[] = [{ atS: 0, completed: first, errors: traffic.errors, latencies: 0, load: load() }];
    const windowS = SECONDS >= 300 ? 30 : Math.max(5, Math.round(SECONDS / 6));
    while (elapsed() < SECONDS) {
      if (elapsed() >= marks.at(-1)!.atS + windowS) {
        marks.push({ atS: elapsed(), completed: traffic.completed, errors: traffic.errors, latencies: traffic.latencies.length, load: load() });
      }
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
    marks.push({ atS: soakSeconds, completed: traffic.completed, errors: traffic.errors, latencies: traffic.latencies.length, load: load() });
    subscriptions.messages -= subscribed.messages;
    subscriptions.streams -= subscribed.streams;
    report({ max, rate, soakSeconds, requests, late, traffic, subscriptions, samples, marks });
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

/** Requests/s, median latency and errors window by window, with the machine's load: a slowdown shows when it began. */
function timeline(marks: Mark[], latencies: number[]): string[] {
  const rows = marks.slice(1).map((m, i) => {
    const prev = marks[i]!;
    const rps = (m.completed - prev.completed) / (m.atS - prev.atS);
    return `| ${prev.atS.toFixed(0)}–${m.atS.toFixed(0)} s | ${fmt.int(rps)} | ${fmt.ms(median(latencies.slice(prev.latencies, m.latencies)))} | ${m.errors - prev.errors} | ${m.load} |`;
  });
  return ["| window | requests/s | p50 | errors | load average at its end |", "|---|---|---|---|---|", ...rows];
}

function report(r: { max: number; rate: number; soakSeconds: number; requests: number; late: number; traffic: Traffic; subscriptions: Subscriptions; samples: Sample[]; marks: Mark[] }) {
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
    row(`measured maximum (closed loop, ${P.connections} connections, second half of ${P.maxSeconds} s)`, `${fmt.int(r.max)} requests/s`),
    row("soak rate (80%) / achieved", `${fmt.int(r.rate)} / ${fmt.int(r.requests / r.soakSeconds)} requests/s`),
    row("requests answered", fmt.int(r.requests)),
    row("latency p50 / p99", `${fmt.ms(percentile(r.traffic.latencies, 50))} / ${fmt.ms(percentile(r.traffic.latencies, 99))}`),
    row("not sent on time (more than 256 in flight)", fmt.int(r.late)),
    row("subscription messages / revision streams followed to the end", `${fmt.int(r.subscriptions.messages)} / ${fmt.int(r.subscriptions.streams)}`),
    row("**errors** (any unexpected status, GraphQL error, failed connection or stream)", `**${r.traffic.errors}**`),
    row(`heap after GC: median of ${f.window.toFixed(0)} s after a ${f.warm.toFixed(0)} s warm-up → median of the last ${f.window.toFixed(0)} s`, `${f.first.toFixed(1)} MB → ${f.last.toFixed(1)} MB (${f.growth >= 0 ? "+" : ""}${f.growth.toFixed(1)} MB)`),
    row("**heap flat** (growth ≤ 5% or 4 MB)", `**${f.flat ? "yes" : "NO"}**`),
    "",
    "",
    ...timeline(r.marks, r.traffic.latencies),
    "",
    `Heap after GC (MB) every ${P.sampleEveryMs / 1000} s: ${r.samples.map((s) => s.heapMb.toFixed(1)).join(", ")}`,
    ...(r.traffic.errorSamples.length > 0 ? ["", "First errors:", "", ...r.traffic.errorSamples.map((e) => `- \`${e}\``)] : []),
    "",
  ].join("\n");
  process.stdout.write(`\n${block}\n`);
  if (opts["no-record"]) return;
  // With the benchmarks' tables in bench/RESULTS.md: bench/README.md says what the soak does.
  appendFileSync(join(ROOT, "bench", "RESULTS.md"), `\n${block}`);
  process.stdout.write("appended to bench/RESULTS.md\n");
}
