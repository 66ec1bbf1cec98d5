import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import type { BenchDatabase } from "./database.js";
import type { ProbeReply, ProbeRequest } from "./probe.js";
// Shared with the tests' server children.
import { freePort, reaped, SERVER_NODE_FLAGS } from "../../scripts/lib/processes.js";

export { freePort };

export const ROOT = fileURLToPath(new URL("../../", import.meta.url));
/** The key every benchmark server provisions at start (BOOTSTRAP_API_KEY) and every client sends. */
export const API_KEY = "bench-api-key-0000000000000000";
const SECRETS_KEY = Buffer.alloc(32, 11).toString("base64");

export interface ServerOptions {
  db: BenchDatabase;
  /** Extra settings (PIPELINE_STEP_MS, PIPELINE_WORKER, BENCH_COUNT_SQL …). */
  env?: Record<string, string>;
  /** How long /readyz may take to answer 200. */
  readyTimeoutMs?: number;
  /** Another bundle of the server to run (bench/ab.ts: a git ref's), instead of the working tree's. */
  bundle?: string;
}

export interface BenchServer {
  readonly url: string;
  readonly pid: number;
  /** Milliseconds from spawn to the first 200 from /readyz. */
  readonly readyMs: number;
  /** The server's memory after a full garbage collection (asked over IPC). */
  memory(): Promise<NodeJS.MemoryUsage>;
  /** CPU time (user + system) the server has used so far, in ms. */
  cpuMs(): Promise<number>;
  /** SQL statements the server has sent so far; needs BENCH_COUNT_SQL=1. */
  statements(): Promise<number>;
  /** The SQL (and Prisma's parameters as JSON) sent since statements() was `since`. */
  recentStatements(since: number): Promise<{ sql: string; params: string }[]>;
  /** Starts V8's CPU profiler in the server; profileStop returns the .cpuprofile JSON. */
  profileStart(): Promise<void>;
  profileStop(): Promise<string>;
  /** SIGTERM, then SIGKILL after 15 s; resolves when the process has exited. */
  stop(): Promise<void>;
  /** The last lines the server wrote, for error reports. */
  logTail(): string;
}

/**
 * The settings a user would give the service, for one benchmark server. The rate limit is off
 * (a benchmark is one caller sending far more than a person would); logs at warn.
 */
export function serverEnv(db: BenchDatabase, port: number, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of ["DATABASE_URL", "DATA_DIR", "TEST_DATABASE_URL", "BENCH_COUNT_SQL", "PIPELINE_STEP_MS", "PIPELINE_WORKER"]) {
    delete env[name];
  }
  return {
    ...env,
    ...db.env,
    HOST: "127.0.0.1",
    PORT: String(port),
    BOOTSTRAP_API_KEY: API_KEY,
    SECRETS_KEY,
    LOG_LEVEL: "warn",
    NODE_ENV: "production",
    RATE_LIMIT_PER_MINUTE: "0",
    // One key opens the fan-out's thousands of subscribers: the benchmarks measure the server, not its limits.
    SUBSCRIPTIONS_PER_CALLER: "0",
    METRICS_PORT: "0",
    ...extra,
  };
}

/** The server bundle `npm start` runs (scripts/build.mjs), rebuilt once per benchmark process from src/. */
const BUNDLE = "build/server/main.mjs";
let bundled = false;

function bundle(): void {
  if (bundled) return;
  const built = spawnSync(process.execPath, ["scripts/build.mjs"], { cwd: ROOT, encoding: "utf8" });
  if (built.status !== 0) throw new Error(`could not bundle the server: ${built.stderr}`);
  bundled = true;
}

/**
 * Starts the server bundle `npm start` runs, under plain node with npm start's flags, with the probe
 * (loaded through tsx, which only it needs), and waits for /readyz.
 */
export async function startServer(options: ServerOptions): Promise<BenchServer> {
  if (!options.bundle) bundle();
  const port = await freePort();
  const started = performance.now();
  const child = reaped(
    spawn(process.execPath, [...SERVER_NODE_FLAGS, "--expose-gc", "--import", "tsx", "--import", "./bench/lib/probe.ts", options.bundle ?? BUNDLE], {
      cwd: ROOT,
      env: serverEnv(options.db, port, options.env),
      stdio: ["ignore", "pipe", "pipe", "ipc"],
    }),
  );
  const tail = captureTail(child);
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));

  const url = `http://127.0.0.1:${port}`;
  try {
    await waitReady(url, exited, options.readyTimeoutMs ?? 120_000);
  } catch (err) {
    child.kill("SIGKILL");
    throw new Error(`${err instanceof Error ? err.message : String(err)}\n--- server log ---\n${tail()}`);
  }
  const readyMs = performance.now() - started;

  let nextId = 1;
  const ask = <K extends ProbeRequest["kind"]>(kind: K, since?: number) =>
    new Promise<Extract<ProbeReply, { kind: K }>>((resolve, reject) => {
      const id = nextId++;
      const timer = setTimeout(() => reject(new Error(`probe ${kind}: no answer in 30 s`)), 30_000);
      const onMessage = (reply: ProbeReply) => {
        if (reply.id !== id) return;
        clearTimeout(timer);
        child.off("message", onMessage);
        if (reply.kind === "error") reject(new Error(`probe ${kind}: ${reply.message}`));
        else resolve(reply as Extract<ProbeReply, { kind: K }>);
      };
      child.on("message", onMessage);
      child.send({ id, kind, since } satisfies ProbeRequest);
    });

  return {
    url,
    pid: child.pid!,
    readyMs,
    memory: async () => (await ask("memory")).memory,
    statements: async () => (await ask("statements")).count,
    recentStatements: async (since) => (await ask("recent", since)).statements,
    profileStart: async () => {
      await ask("profile-start");
    },
    profileStop: async () => (await ask("profile-stop")).profile,
    cpuMs: async () => {
      const { usage } = await ask("cpu");
      return (usage.user + usage.system) / 1000;
    },
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill("SIGTERM");
      const killer = setTimeout(() => child.kill("SIGKILL"), 15_000);
      await exited;
      clearTimeout(killer);
    },
    logTail: tail,
  };
}

/** Polls /readyz until 200; fails when the process exits first or the deadline passes. */
export async function waitReady(url: string, exited: Promise<unknown>, timeoutMs: number): Promise<void> {
  let gone = false;
  void exited.then(() => (gone = true));
  const deadline = performance.now() + timeoutMs;
  while (performance.now() < deadline) {
    if (gone) throw new Error("the server exited before it was ready");
    try {
      const res = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(1000) });
      await res.arrayBuffer();
      if (res.status === 200) return;
    } catch {
      // Not listening yet.
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`/readyz did not answer 200 within ${timeoutMs} ms`);
}

/** Keeps the last 40 lines (each cut at 400 characters) of the child's stdout and stderr (reading them also keeps the pipes flowing). */
export function captureTail(child: ChildProcess): () => string {
  const lines: string[] = [];
  const keep = (chunk: Buffer) => {
    for (const line of chunk.toString("utf8").split("\n")) if (line !== "") lines.push(line.length > 400 ? `${line.slice(0, 400)}…` : line);
    if (lines.length > 40) lines.splice(0, lines.length - 40);
  };
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  return () => lines.join("\n");
}
