import { randomUUID } from "node:crypto";
import { type ChildProcessWithoutNullStreams, execFile, spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { isDeepStrictEqual, promisify } from "node:util";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { LOCK_FILE, lockDataDir, StartupError } from "../../src/db/data-dir-lock.js";
import { reaped } from "../../scripts/lib/processes.js";
import { TEST_SECRETS_KEY } from "../support/app.js";
import { serverCommand, spawnServer } from "../support/server-process.js";
import { skipDatabaseIndependent } from "../support/database-independent.js";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const run = promisify(execFile);
const dirs: string[] = [];
const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), "dcp-start-"));
  dirs.push(dir);
  return dir;
};
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** The server's entry point (serverCommand), as a second process would start it; resolves when it exits. */
/** Runs the server to its end with these settings (`unset`: settings left out, SECRETS_KEY among them). */
async function startMain(env: Record<string, string>, unset: string[] = []) {
  const base: NodeJS.ProcessEnv = { ...process.env };
  for (const name of ["DATABASE_URL", "TEST_DATABASE_URL", "DATA_DIR", "PORT"]) delete base[name];
  const settings: NodeJS.ProcessEnv = { ...base, HOST: "127.0.0.1", PORT: "0", METRICS_PORT: "off", SECRETS_KEY: TEST_SECRETS_KEY, LOG_LEVEL: "info", ...env };
  for (const name of unset) delete settings[name];
  try {
    const { stdout, stderr } = await run(...serverCommand(), { cwd: ROOT, env: settings, timeout: 120_000 });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

// Neither the lock nor the start-up below reaches TEST_DATABASE_URL (the servers here run on an embedded
// database of their own, or fail to reach a PostgreSQL that is not there): a PostgreSQL run would repeat
// the PGlite run's tests (support/database-independent.ts).
describe.skipIf(skipDatabaseIndependent)("the DATA_DIR lock", () => {
  it("refuses a second holder, naming the pid that has the folder, and is released", () => {
    const dir = tempDir();
    const lock = lockDataDir(dir, "first");
    expect(JSON.parse(readFileSync(join(dir, LOCK_FILE), "utf8"))).toMatchObject({ pid: process.pid, command: "first" });
    expect(() => lockDataDir(dir, "second")).toThrow(StartupError);
    expect(() => lockDataDir(dir, "second")).toThrow(new RegExp(`in use by process ${process.pid} \\(first\\)`));
    lock.release();
    expect(existsSync(join(dir, LOCK_FILE))).toBe(false);
    lockDataDir(dir, "again").release();
  });

  it("takes over a lock left by a process that is gone", () => {
    const dir = tempDir();
    const gone = spawnSync(process.execPath, ["-e", "process.exit(0)"]).pid!;
    writeFileSync(join(dir, LOCK_FILE), JSON.stringify({ pid: gone, started: "2026-01-01T00:00:00.000Z", command: "crashed" }));
    const lock = lockDataDir(dir, "new");
    expect(lock.tookOverFrom).toBe(gone);
    expect(JSON.parse(readFileSync(join(dir, LOCK_FILE), "utf8")).pid).toBe(process.pid);
    lock.release();
  });

  it("has one holder when processes race for a folder, whether it has a stale lock, none, or a take-over that died", async () => {
    const racers = await Promise.all(Array.from({ length: RACERS }, () => startRacer()));
    const pids = racers.map((r) => r.child.pid!);
    const base = tempDir();
    const crashed = (started: string) => JSON.stringify({ pid: goneProcess(), started, command: "crashed" });
    // A lock left by a process that is gone; none yet (the racers must not read one another's lock
    // before it is written whole, and take it for a broken one); or that, and the take-over guard
    // of a process that died while taking it over.
    const scenarios = [
      { name: "stale lock", files: { [LOCK_FILE]: crashed("2026-01-01T00:00:00.000Z") } },
      { name: "no lock", files: {} },
      { name: "stale lock and take-over", files: { [LOCK_FILE]: crashed("2026-01-01T00:00:00.000Z"), [`${LOCK_FILE}.takeover`]: crashed("2026-01-01T00:00:01.000Z") } },
    ];
    try {
      const wrong: unknown[] = [];
      for (let trial = 0; trial < TRIALS; trial++) {
        const scenario = scenarios[trial % scenarios.length]!;
        const dir = join(base, String(trial));
        mkdirSync(dir);
        for (const [name, content] of Object.entries(scenario.files)) writeFileSync(join(dir, name), content);
        const stale = scenario.files[LOCK_FILE] ? (JSON.parse(scenario.files[LOCK_FILE]) as { pid: number }).pid : null;
        // The start barrier: every racer waits on its stdin, and they are all told in one loop.
        const order = `${JSON.stringify({ dir })}\n`;
        for (const racer of racers) racer.child.stdin.write(order);
        const answers = await Promise.all(racers.map((r) => r.next()));
        const holders = answers.flatMap((a, n) => (a.held ? [{ pid: pids[n], tookOverFrom: a.tookOverFrom }] : []));
        const lockPid = (JSON.parse(readFileSync(join(dir, LOCK_FILE), "utf8")) as { pid: number }).pid;
        for (const racer of racers) racer.child.stdin.write("{}\n");
        await Promise.all(racers.map((r) => r.next()));
        const outcome = {
          holders,
          lockPid,
          // Each of the others is told that a live racer has the folder.
          refused: answers.filter((a) => !a.held).map((a) => (a.name === "StartupError" ? pids.includes(Number(/(?:in use|being taken over) by process (\d+)/.exec(a.message!)?.[1])) : `${a.name}: ${a.message}`)),
          // Released, and nothing else left in the folder (no take-over guard, no temporary file).
          left: readdirSync(dir),
        };
        const expected = { holders: [{ pid: lockPid, tookOverFrom: stale }], lockPid, refused: Array(RACERS - 1).fill(true), left: [] };
        if (!isDeepStrictEqual(outcome, expected)) wrong.push({ trial, scenario: scenario.name, outcome, expected });
        rmSync(dir, { recursive: true });
      }
      // Printed on failure: how many trials went wrong, and how.
      expect(wrong, `${wrong.length} of ${TRIALS} trials`).toEqual([]);
    } finally {
      for (const racer of racers) racer.child.stdin.end();
      await Promise.all(racers.map((r) => r.exited));
    }
    // Each racer starts tsx (a second of CPU on a loaded machine); the trials take milliseconds each.
  }, 120_000);

  it("takes over a take-over left by a process that died in the middle of one", () => {
    const dir = tempDir();
    const gone = goneProcess();
    const stale = JSON.stringify({ pid: gone, started: "2026-01-01T00:00:00.000Z", command: "crashed" });
    writeFileSync(join(dir, LOCK_FILE), stale);
    writeFileSync(join(dir, `${LOCK_FILE}.takeover`), JSON.stringify({ pid: goneProcess(), started: "2026-01-01T00:00:01.000Z", command: "died taking over" }));
    const lock = lockDataDir(dir, "new");
    expect(lock.tookOverFrom).toBe(gone);
    expect(readdirSync(dir)).toEqual([LOCK_FILE]);
    lock.release();
    expect(readdirSync(dir)).toEqual([]);
  });

  it("refuses while a live process is taking over a stale lock, naming that process", () => {
    const dir = tempDir();
    writeFileSync(join(dir, LOCK_FILE), JSON.stringify({ pid: goneProcess(), started: "2026-01-01T00:00:00.000Z", command: "crashed" }));
    // A live process that is not this one: the test runner that started this worker.
    const taker = { pid: process.ppid, started: "2026-01-01T00:00:01.000Z", command: "taking over" };
    writeFileSync(join(dir, `${LOCK_FILE}.takeover`), JSON.stringify(taker));
    expect(() => lockDataDir(dir, "new")).toThrow(StartupError);
    expect(() => lockDataDir(dir, "new")).toThrow(new RegExp(`is being taken over by process ${process.ppid} \\(taking over\\).*Lock file: .*\\.takeover$`));
    // Neither file was touched.
    expect(readdirSync(dir).sort()).toEqual([LOCK_FILE, `${LOCK_FILE}.takeover`]);
  });
});

/**
 * Racers, and trials. Before each step of the lock was made atomic, 4 racers got two holders in 3 to 37
 * of 100 trials on a stale lock (the take-over), and in 0 to 5 of 100 on a folder without one (a lock
 * read before it was written).
 */
const RACERS = 4;
const TRIALS = 600;

/** The pid of a process that has ended (still, unless pids have wrapped around since: checked each time). */
let gone: number | null = null;
function goneProcess(): number {
  const alive = (pid: number) => {
    try {
      return process.kill(pid, 0);
    } catch (err) {
      return (err as NodeJS.ErrnoException).code === "EPERM";
    }
  };
  if (gone === null || alive(gone)) gone = spawnSync(process.execPath, ["-e", ""]).pid!;
  return gone;
}

interface RacerAnswer {
  held?: boolean;
  tookOverFrom?: number | null;
  name?: string;
  message?: string;
}

/** A process that calls lockDataDir(dir) when its stdin says {"dir"}, releases its lock on {}, and answers each on stdout. */
async function startRacer() {
  const module = pathToFileURL(join(ROOT, "src/db/data-dir-lock.ts")).href;
  const script = `
    import { writeSync } from "node:fs";
    import { createInterface } from "node:readline";
    import { lockDataDir } from ${JSON.stringify(module)};
    // At once: process.stdout can be asynchronous on a pipe.
    const say = (answer) => writeSync(1, JSON.stringify(answer) + "\\n");
    let lock = null;
    say({ ready: true });
    for await (const line of createInterface({ input: process.stdin })) {
      const { dir } = JSON.parse(line);
      if (dir) {
        try {
          lock = lockDataDir(dir, "racer");
          say({ held: true, tookOverFrom: lock.tookOverFrom });
        } catch (err) {
          say({ held: false, name: err.name, message: err.message });
        }
      } else {
        lock?.release();
        lock = null;
        say({});
      }
    }`;
  const child = reaped(
    spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], { cwd: ROOT, stdio: ["pipe", "pipe", "inherit"] }),
  ) as ChildProcessWithoutNullStreams;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const next = async (): Promise<RacerAnswer> => {
    const line = await lines.next();
    if (line.done) throw new Error(`racer ${child.pid} ended`);
    return JSON.parse(line.value as string) as RacerAnswer;
  };
  await next();
  return { child, next, exited };
}

describe.skipIf(skipDatabaseIndependent)("start-up", { timeout: 240_000 }, () => {
  it("says what it is doing during the first start, and a second process on the same DATA_DIR says who has it", async () => {
    const dataDir = tempDir();
    const lines: string[] = [];
    const first = await spawnServer({ DATA_DIR: dataDir, SECRETS_KEY: TEST_SECRETS_KEY, LOG_LEVEL: "info" }, 180_000, (line) => lines.push(line));
    try {
      const messages = lines.flatMap((l) => {
        try {
          return [(JSON.parse(l) as { msg: string }).msg];
        } catch {
          return [];
        }
      });
      const order = ["opening the embedded database", "applying migrations…", "applied migrations", "listening on http://127.0.0.1:"].map((m) =>
        messages.findIndex((msg) => msg.startsWith(m)),
      );
      expect(order.every((i) => i >= 0), messages.join("\n")).toBe(true);
      expect([...order].sort((a, b) => a - b)).toEqual(order);

      const second = await startMain({ DATA_DIR: dataDir });
      expect(second.code).toBe(1);
      expect(second.stderr).toContain(`is in use by process ${first.pid}`);
      expect(second.stderr).not.toMatch(/Aborted|RuntimeError|\n\s+at /);
    } finally {
      await first.kill("SIGTERM");
    }
    // Released on a clean stop.
    expect(existsSync(join(dataDir, LOCK_FILE))).toBe(false);
  });

  it("names DATABASE_URL, in one line and without its password, when the database cannot be reached", async () => {
    const result = await startMain({ DATABASE_URL: "postgres://dcp:hunter2-password@127.0.0.1:1/nowhere", DATABASE_START_WAIT_MS: "0", DATA_DIR: tempDir() });
    expect(result.code).toBe(1);
    const failure = result.stderr.split("\n").filter((l) => l.startsWith("failed to start"));
    expect(failure).toHaveLength(1);
    expect(failure[0]).toContain("cannot connect to the database at DATABASE_URL=postgres://dcp:***@127.0.0.1:1/nowhere");
    expect(result.stderr + result.stdout).not.toContain("hunter2");
    expect(result.stderr).not.toMatch(/\n\s+at /);
  });
});

describe.skipIf(skipDatabaseIndependent)("start-up that fails, or is stopped", { timeout: 240_000 }, () => {
  it("stops cleanly on SIGTERM during the embedded database's first start, leaving a DATA_DIR that starts", async () => {
    const dataDir = tempDir();
    const base: NodeJS.ProcessEnv = { ...process.env };
    for (const name of ["DATABASE_URL", "TEST_DATABASE_URL", "PORT"]) delete base[name];
    const child = reaped(
      spawn(...serverCommand(), {
        cwd: ROOT,
        env: { ...base, HOST: "127.0.0.1", PORT: "0", METRICS_PORT: "off", DATA_DIR: dataDir, SECRETS_KEY: TEST_SECRETS_KEY, LOG_LEVEL: "info" },
        stdio: ["ignore", "pipe", "pipe"],
      }),
    );
    let output = "";
    const opening = new Promise<void>((resolve) =>
      child.stdout!.on("data", (chunk: Buffer) => {
        output += chunk.toString("utf8");
        if (output.includes("opening the embedded database")) resolve();
      }),
    );
    child.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString("utf8")));
    const exited = new Promise<number | string>((resolve) => child.once("exit", (code, signal) => resolve(code ?? signal ?? "unknown")));
    await opening;
    // While PGlite writes its first files: killed there, it left a folder no later start could open.
    child.kill("SIGTERM");
    expect(await exited, output).toBe(0);
    expect(output).not.toMatch(/\n\s+at /);
    const again = await spawnServer({ DATA_DIR: dataDir, SECRETS_KEY: TEST_SECRETS_KEY }, 180_000);
    expect(await again.kill("SIGTERM")).toBe(0);
  });

  it("names PORT, in one line, when the port is in use", async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
    const port = (taken.address() as AddressInfo).port;
    try {
      const result = await startMain({ DATABASE_URL: "memory://", PORT: String(port), DATA_DIR: tempDir() });
      expect(result.code).toBe(1);
      const failure = result.stderr.split("\n").filter((l) => l.startsWith("failed to start"));
      expect(failure).toEqual([`failed to start: PORT=${port}: 127.0.0.1:${port} is in use by another process`]);
      expect(result.stderr).not.toMatch(/\n\s+at /);
    } finally {
      taken.close();
    }
  });

  it("names DATA_DIR, in one line, when it cannot be made or written in", async () => {
    const file = join(tempDir(), "a-file");
    writeFileSync(file, "not a folder\n");
    for (const [dataDir, code] of [[file, "EEXIST"], [join(file, "below"), "ENOTDIR"]] as const) {
      const result = await startMain({ DATA_DIR: dataDir }, ["DATABASE_URL"]);
      expect(result.code, dataDir).toBe(1);
      const failure = result.stderr.split("\n").filter((l) => l.startsWith("failed to start"));
      expect(failure, dataDir).toEqual([`failed to start: DATA_DIR=${dataDir}: cannot be made a folder or written in (${code})`]);
      expect(result.stderr).not.toMatch(/\n\s+at /);
    }
  });

  it("names the key file, in one line, when DATA_DIR/secrets.key is not a key", async () => {
    const dataDir = tempDir();
    writeFileSync(join(dataDir, "secrets.key"), "not a key\n");
    const result = await startMain({ DATABASE_URL: "memory://", DATA_DIR: dataDir }, ["SECRETS_KEY"]);
    expect(result.code).toBe(1);
    const failure = result.stderr.split("\n").filter((l) => l.startsWith("failed to start"));
    expect(failure).toEqual([`failed to start: ${join(dataDir, "secrets.key")} does not hold a secrets key (32 bytes, base64): restore the service's key there, or set SECRETS_KEY`]);
    expect(result.stderr).not.toMatch(/\n\s+at /);
  });
});

// A PostgreSQL server that answers, but refuses for good: no wait for it to come (DATABASE_START_WAIT_MS is for one that starts).
describe.skipIf(!process.env.TEST_DATABASE_URL)("a PostgreSQL server that refuses the database for good", () => {
  it("stops at once, in one line, when the database does not exist (not after DATABASE_START_WAIT_MS)", async () => {
    const url = new URL(process.env.TEST_DATABASE_URL!);
    url.pathname = `/dcp_no_such_database_${randomUUID().slice(0, 8)}`;
    const startedAt = Date.now();
    const result = await startMain({ DATABASE_URL: url.href, DATABASE_START_WAIT_MS: "120000", DATA_DIR: tempDir() });
    expect(result.code).toBe(1);
    // Well under the two minutes it would have retried for (the start-up itself takes a few seconds on a loaded machine).
    expect(Date.now() - startedAt).toBeLessThan(60_000);
    const failure = result.stderr.split("\n").filter((l) => l.startsWith("failed to start"));
    expect(failure).toHaveLength(1);
    expect(failure[0]).toContain(`cannot connect to the database at DATABASE_URL=`);
    expect(failure[0]).toMatch(/does not exist/);
    expect(failure[0]).not.toContain("waited");
    expect(result.stderr).not.toContain("retrying");
  }, 90_000);
});
