import { execFile, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { LOCK_FILE, lockDataDir, StartupError } from "../../src/db/data-dir-lock.js";
import { TEST_SECRETS_KEY } from "../support/app.js";
import { spawnServer } from "../support/server-process.js";
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

/** The server's entry point from its sources, as a second process would start it; resolves when it exits. */
async function startMain(env: Record<string, string>) {
  const base: NodeJS.ProcessEnv = { ...process.env };
  for (const name of ["DATABASE_URL", "TEST_DATABASE_URL", "DATA_DIR", "PORT"]) delete base[name];
  try {
    const { stdout, stderr } = await run(process.execPath, ["--import", "tsx", "src/main.ts"], {
      cwd: ROOT,
      env: { ...base, HOST: "127.0.0.1", PORT: "0", METRICS_PORT: "off", SECRETS_KEY: TEST_SECRETS_KEY, LOG_LEVEL: "info", ...env },
      timeout: 120_000,
    });
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
});

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
