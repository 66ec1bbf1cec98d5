import autocannon from "autocannon";
import { cpuMs } from "./procs.js";
import { API_KEY } from "./server.js";

/** One kind of request (or a fixed sequence of requests, cycled per connection) to drive. */
export interface Target {
  name: string;
  url: string;
  method?: "GET" | "POST";
  path?: string;
  /** JSON body, sent with content-type application/json. */
  body?: unknown;
  /** A sequence of requests each connection cycles through, instead of method/path/body. */
  sequence?: { method: "GET" | "POST"; path: string; body?: unknown }[];
  /** Send no API key (the bare handler). */
  anonymous?: boolean;
  /** The serving process: its CPU time per request is reported (load on the machine barely moves it). */
  pid?: number;
  /** The database's CPU time so far (ms), read around each round: its CPU per request is reported too. */
  databaseCpu?: () => number;
}

export interface LoadOptions {
  connections: number;
  /** Seconds per measured round. */
  durationS: number;
  /** A round stops after this many requests even if its time is not up. */
  maxRequests: number;
  /** Measured rounds per target, alternating targets so that drift hits each alike. */
  rounds: number;
}

export interface LoadResult {
  name: string;
  requests: number;
  seconds: number;
  /** Completed requests per second over all rounds. */
  rps: number;
  /** Lowest and highest round. */
  rpsRange: [number, number];
  /** Latency percentiles (ms): the median over rounds. */
  p50: number;
  p99: number;
  /** Answers other than 2xx, connection errors and timeouts: any of them makes the figure suspect. */
  failures: number;
  /** What the failures were: "404×12, errors×3". */
  failureKinds: string;
  /** The serving process's CPU time per request (ms), NaN without a pid. */
  cpuPerRequest: number;
  /** The database's CPU time per request (ms), NaN without databaseCpu. */
  databaseCpuPerRequest: number;
}

interface Round {
  requests: number;
  seconds: number;
  p50: number;
  p99: number;
  failures: number;
  kinds: Map<string, number>;
  cpuMs: number;
  databaseCpuMs: number;
}

async function round(target: Target, connections: number, durationS: number, maxRequests: number): Promise<Round> {
  const headers: Record<string, string> = target.anonymous ? {} : { "x-api-key": API_KEY };
  const json = (body: unknown) => (body === undefined ? undefined : JSON.stringify(body));
  if (target.body !== undefined || target.sequence?.some((r) => r.body !== undefined)) headers["content-type"] = "application/json";
  const instance = autocannon({
    url: target.sequence ? target.url : `${target.url}${target.path ?? "/"}`,
    connections,
    duration: durationS,
    maxOverallRequests: maxRequests,
    timeout: 30,
    headers,
    ...(target.sequence
      ? { requests: target.sequence.map((r) => ({ method: r.method, path: r.path, body: json(r.body) })) }
      : { method: target.method ?? "GET", body: json(target.body) }),
  } as autocannon.Options) as unknown as Promise<autocannon.Result> & { stop(): void }; // both, at run time
  // autocannon stops itself at the duration; this is the bound if it ever does not.
  const guard = setTimeout(() => instance.stop(), (durationS + 30) * 1000);
  const cpu0 = target.pid ? cpuMs(target.pid) : NaN;
  const database0 = target.databaseCpu?.() ?? NaN;
  const result = await instance;
  const cpu = target.pid ? cpuMs(target.pid) - cpu0 : NaN;
  const databaseCpuMs = (target.databaseCpu?.() ?? NaN) - database0;
  clearTimeout(guard);
  return {
    requests: result.requests.total,
    seconds: result.duration,
    p50: result.latency.p50,
    p99: result.latency.p99,
    failures: result.non2xx + result.errors + result.timeouts,
    kinds: failureKinds(result),
    cpuMs: cpu,
    databaseCpuMs,
  };
}

/**
 * Measures targets side by side: a short warm-up each, then `rounds` rounds alternating A, B, A, B…
 */
export async function compare(targets: Target[], options: LoadOptions): Promise<LoadResult[]> {
  const warmS = Math.max(1, Math.round(options.durationS / 5));
  for (const target of targets) await round(target, options.connections, warmS, options.maxRequests);
  const rounds = targets.map(() => [] as Round[]);
  for (let r = 0; r < options.rounds; r++) {
    for (const [i, target] of targets.entries()) {
      rounds[i]!.push(await round(target, options.connections, options.durationS, options.maxRequests));
    }
  }
  return targets.map((target, i) => summarise(target.name, rounds[i]!));
}

function failureKinds(result: autocannon.Result): Map<string, number> {
  const kinds = new Map<string, number>();
  const stats = (result as { statusCodeStats?: Record<string, { count: number }> }).statusCodeStats ?? {};
  for (const [code, { count }] of Object.entries(stats)) if (!code.startsWith("2")) kinds.set(code, count);
  if (result.errors) kinds.set("errors", result.errors);
  if (result.timeouts) kinds.set("timeouts", result.timeouts);
  return kinds;
}

function summarise(name: string, rounds: Round[]): LoadResult {
  const requests = rounds.reduce((n, r) => n + r.requests, 0);
  const seconds = rounds.reduce((n, r) => n + r.seconds, 0);
  const perRound = rounds.map((r) => r.requests / r.seconds);
  return {
    name,
    requests,
    seconds,
    rps: requests / seconds,
    rpsRange: [Math.min(...perRound), Math.max(...perRound)],
    p50: median(rounds.map((r) => r.p50)),
    p99: median(rounds.map((r) => r.p99)),
    failures: rounds.reduce((n, r) => n + r.failures, 0),
    cpuPerRequest: rounds.reduce((n, r) => n + r.cpuMs, 0) / requests,
    databaseCpuPerRequest: rounds.reduce((n, r) => n + r.databaseCpuMs, 0) / requests,
    failureKinds: [...mergeKinds(rounds)].map(([k, n]) => `${k}×${n}`).join(", "),
  };
}

function mergeKinds(rounds: Round[]): Map<string, number> {
  const all = new Map<string, number>();
  for (const r of rounds) for (const [k, n] of r.kinds) all.set(k, (all.get(k) ?? 0) + n);
  return all;
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length === 0 ? NaN : sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** The p-th percentile (0–100) of values, nearest rank. */
export function percentile(values: number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}
