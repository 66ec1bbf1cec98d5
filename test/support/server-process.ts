import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { inject } from "vitest";
import { readyUrl, reaped, SERVER_NODE_FLAGS } from "../../scripts/lib/processes.js";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));

/** Settings of the test run that must not leak into a server child's own. */
const INHERITED_OUT = ["DATABASE_URL", "DATA_DIR", "TEST_DATABASE_URL", "PIPELINE_STEP_MS", "PIPELINE_WORKER", "PIPELINE_LEASE_MS", "PIPELINE_CRASH_LIMIT", "LOG_LEVEL", "PORT", "HOST", "METRICS_PORT"];

/**
 * How a test starts the service's entry point (src/main.ts) as a process of its own: with node and
 * npm start's flags, from the bundle global-setup made of this run's sources, as `npm start` runs it
 * (test/app/npm-start.test.ts tests that command itself).
 */
export const serverCommand = (): [string, string[]] => [process.execPath, [...SERVER_NODE_FLAGS, inject("serverBundle")]];

/** The log levels at which the server logs its "ready" line. */
const LOGS_READY = new Set(["info", "debug", "trace"]);

/** A server child process (serverCommand). */
export interface ServerProcess {
  readonly url: string;
  readonly pid: number;
  /** Resolves with the exit code (or the signal's name) once the process has ended. */
  readonly exited: Promise<number | string>;
  /** Sends the signal and waits for the process to end. */
  kill(signal: NodeJS.Signals): Promise<number | string>;
  /** The last lines the server wrote, for failure messages. */
  logTail(): string;
}

/**
 * Starts a server with these settings and waits until it has logged that it is ready and /readyz
 * answers 200; `onLine` sees each log line as it comes. The server listens on a port the kernel gives
 * it (PORT=0), read from its "ready" line: a port picked free beforehand could be taken by another
 * test's server first, and this one would then fail to start or, worse, the test would talk to the other.
 */
export async function spawnServer(env: Record<string, string>, readyTimeoutMs = 60_000, onLine?: (line: string) => void): Promise<ServerProcess> {
  if (env.LOG_LEVEL && !LOGS_READY.has(env.LOG_LEVEL)) throw new Error(`spawnServer reads the server's port from its "ready" line, logged at info: LOG_LEVEL ${env.LOG_LEVEL} would hide it`);
  const base: NodeJS.ProcessEnv = { ...process.env };
  for (const name of INHERITED_OUT) delete base[name];
  const child = reaped(
    spawn(...serverCommand(), {
      cwd: ROOT,
      env: { ...base, HOST: "127.0.0.1", PORT: "0", METRICS_PORT: "0", ...env },
      stdio: ["ignore", "pipe", "pipe"],
    }),
  );
  const lines: string[] = [];
  let url: string | null = null;
  // Whole lines of one stream: a chunk may end within a line, whose start then waits for the rest.
  const keeper = () => {
    let partial = "";
    return (chunk: Buffer) => {
      const split = (partial + chunk.toString("utf8")).split("\n");
      partial = split.pop()!;
      const fresh = split.filter(Boolean);
      for (const line of fresh) url ??= readyUrl(line);
      if (onLine) for (const line of fresh) onLine(line);
      lines.push(...fresh);
      if (lines.length > 200) lines.splice(0, lines.length - 200);
    };
  };
  child.stdout!.on("data", keeper());
  child.stderr!.on("data", keeper());
  const exited = new Promise<number | string>((resolve) =>
    child.once("exit", (code, signal) => resolve(code ?? signal ?? "unknown")),
  );
  const logTail = () => lines.slice(-40).join("\n");
  const deadline = Date.now() + readyTimeoutMs;
  let ended = false;
  void exited.then(() => (ended = true));
  for (;;) {
    if (ended) throw new Error(`the server exited before it was ready:\n${logTail()}`);
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`the server was not ready within ${readyTimeoutMs} ms:\n${logTail()}`);
    }
    try {
      if (url && (await fetch(`${url}/readyz`)).status === 200) break;
    } catch {
      // Not answering yet.
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    url: url!,
    pid: child.pid!,
    exited,
    logTail,
    async kill(signal) {
      if (!ended) child.kill(signal);
      return exited;
    },
  };
}
