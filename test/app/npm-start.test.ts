import { execFileSync, spawn } from "node:child_process";
import { readFileSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { readyUrl, reaped, SERVER_NODE_FLAGS } from "../../scripts/lib/processes.js";
import { seededDataDir } from "../support/app.js";
import { skipDatabaseIndependent } from "../support/database-independent.js";

/**
 * `npm start` as a container (`CMD npm start`) or a supervisor runs it: npm, the shell npm runs the
 * script with, node running scripts/start.mjs, which imports the bundled server. A signal sent to npm
 * alone (not to its process group) must reach the server, which drains, says "stopped" and exits,
 * leaving no process behind and the port free; and should npm die without passing anything on, the
 * server notices and stops all the same.
 */

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** Every live descendant of `pid` (ps: the whole tree, read once). */
function descendants(pid: number): number[] {
  const table = execFileSync("ps", ["-e", "-o", "pid=,ppid="], { encoding: "utf8" })
    .trim()
    .split("\n")
    .map((line) => line.trim().split(/\s+/).map(Number) as [number, number]);
  const out: number[] = [];
  const walk = (parent: number) => {
    for (const [child, ppid] of table) {
      if (ppid === parent) {
        out.push(child);
        walk(child);
      }
    }
  };
  walk(pid);
  return out;
}

/** Running: it exists and is not a zombie (exited, waiting for whoever adopted it to reap it). */
const alive = (pid: number) => {
  try {
    return ps(pid).trim() !== "" && !ps(pid).includes("Z");
  } catch {
    return false;
  }
};
const ps = (pid: number) => execFileSync("ps", ["-o", "stat=", "-p", String(pid)], { encoding: "utf8" });

/** A process's command line, its arguments as given. */
const commandLine = (pid: number) => readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean);

const portOpen = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = connect(port, "127.0.0.1");
    socket.once("connect", () => (socket.destroy(), resolve(true)));
    socket.once("error", () => resolve(false));
  });

async function npmStart(detached: boolean) {
  // The embedded database, already there and migrated (signals are the subject, not a first start).
  const dataDir = seededDataDir("dcp-npm-start-");
  dirs.push(dataDir);
  const env: NodeJS.ProcessEnv = { ...process.env, PORT: "0", HOST: "127.0.0.1", DATA_DIR: dataDir, LOG_LEVEL: "info", METRICS_PORT: "0" };
  for (const name of ["DATABASE_URL", "TEST_DATABASE_URL", "PIPELINE_STEP_MS", "PIPELINE_WORKER"]) delete env[name];
  const npm = reaped(spawn("npm", ["start", "--silent"], { cwd: ROOT, env, detached, stdio: ["ignore", "pipe", "pipe"] }));
  let output = "";
  npm.stdout!.on("data", (chunk: Buffer) => (output += chunk.toString("utf8")));
  npm.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString("utf8")));
  // 'close': every process holding npm's stdout and stderr (its children too) has let go of them.
  const closed = new Promise<void>((resolve) => npm.once("close", () => resolve()));
  const deadline = Date.now() + 90_000;
  // The port the kernel gave it (PORT=0), from its "ready" line: one picked free beforehand may be taken first.
  let url: string | null = null;
  while (!(url = output.split("\n").map(readyUrl).find((found) => found !== null) ?? null)) {
    if (Date.now() > deadline || npm.exitCode !== null) throw new Error(`npm start was not ready:\n${output}`);
    await sleep(100);
  }
  const port = Number(new URL(url).port);
  return { npm, port, closed, output: () => output, tree: descendants(npm.pid!) };
}

// The server runs on an embedded database of its own whatever the run's database (TEST_DATABASE_URL is
// taken out of its environment): a PostgreSQL run would repeat the PGlite run's test (support/database-independent.ts).
describe.skipIf(skipDatabaseIndependent)("signals to `npm start`", () => {
  const cases: [string, boolean, NodeJS.Signals][] = [
    ["SIGTERM to npm, started as its own process group's leader", true, "SIGTERM"],
    ["SIGTERM to npm, started in the test's process group", false, "SIGTERM"],
    ["SIGINT to npm", true, "SIGINT"],
    ["SIGKILL to npm: nothing is passed on, the server notices its parent gone", true, "SIGKILL"],
  ];
  for (const [what, detached, signal] of cases) {
    it(`${what}: the server drains, logs "stopped", and no process is left holding the port`, async () => {
      const run = await npmStart(detached);
      expect(run.tree.length).toBeGreaterThan(0);
      // The server is node running scripts/start.mjs, with the flags the tests and benchmarks start it with.
      const server = run.tree.map(commandLine).find((argv) => argv.some((arg) => arg.endsWith("scripts/start.mjs")));
      expect(server, JSON.stringify(run.tree.map(commandLine))).toEqual([expect.stringMatching(/node$/), ...SERVER_NODE_FLAGS, "scripts/start.mjs"]);
      expect(await portOpen(run.port)).toBe(true);
      process.kill(run.npm.pid!, signal);
      const outcome = await Promise.race([run.closed.then(() => "closed"), sleep(30_000).then(() => "still running")]);
      // A process that closed its output may take a moment more to be gone.
      for (let i = 0; i < 50 && run.tree.some(alive); i++) await sleep(100);
      const left = run.tree.filter(alive);
      for (const pid of left) process.kill(pid, "SIGKILL");
      expect(outcome, run.output()).toBe("closed");
      expect(left, run.output()).toEqual([]);
      expect(run.output()).toMatch(/"msg":"draining"/);
      expect(run.output()).toMatch(/"msg":"stopped"/);
      expect(await portOpen(run.port)).toBe(false);
    }, 150_000);
  }
});
