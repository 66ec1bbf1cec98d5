import { spawn } from "node:child_process";
import { parseBenchArgs, params } from "./lib/args.js";
import { createDatabase, type BenchDatabase } from "./lib/database.js";
import { median } from "./lib/load.js";
import { commandLine, descendants, rss } from "./lib/procs.js";
import { fmt, Report } from "./lib/report.js";
import { captureTail, freePort, ROOT, serverEnv, waitReady } from "./lib/server.js";
import { runMain } from "./lib/main.js";

/**
 * start: `npm start` to the first 200 from /readyz, on a new database (first start: creates the
 * embedded database or migrates the empty PostgreSQL one) and again on the same one (warm start);
 * then the resident memory of the idle server, read twice: soon after the start (`idleSeconds`),
 * while the heap still holds what starting grew it to, and once idle for longer (`settleSeconds`).
 * V8 gives memory back only when its memory reducer sees an idle heap, some 8–16 s after the last
 * full collection (`--trace-gc` shows a "Mark-Compact (reduce)" then); the target is read on the
 * second figure, what a server at rest holds.
 */
const args = parseBenchArgs();
const p = params(args, {
  full: { warmStarts: 5, idleSeconds: 10, settleSeconds: 30 },
  small: { warmStarts: 2, idleSeconds: 3, settleSeconds: 20 },
});

interface Start {
  readyMs: number;
  /** RSS of the process serving (the innermost node process) after idleSeconds, then after settleSeconds; and of the whole npm → node tree, settled. */
  serverRss: number;
  settledRss: number;
  treeRss: number;
}

async function npmStart(db: BenchDatabase, measureIdle: boolean): Promise<Start> {
  const port = await freePort();
  const started = performance.now();
  // Its own process group, so that SIGTERM reaches npm and the server as Ctrl-C would.
  const child = spawn("npm", ["start"], {
    cwd: ROOT,
    env: serverEnv(db, port),
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
  });
  const tail = captureTail(child);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const group = child.pid!;
  const stop = async () => {
    const tree = [group, ...descendants(group)];
    try {
      process.kill(-group, "SIGTERM");
    } catch {
      // Already gone.
    }
    const killer = setTimeout(() => tree.forEach((pid) => signal(pid, "SIGKILL")), 15_000);
    await exited;
    clearTimeout(killer);
  };
  try {
    await waitReady(`http://127.0.0.1:${port}`, exited, 120_000);
    const readyMs = performance.now() - started;
    if (!measureIdle) return { readyMs, serverRss: NaN, settledRss: NaN, treeRss: NaN };
    const idle = (seconds: number) => new Promise((r) => setTimeout(r, Math.max(0, started + readyMs + seconds * 1000 - performance.now())));
    await idle(p.idleSeconds);
    const tree = descendants(group);
    // `node scripts/start.mjs` under npm start (or `tsx src/main.ts` where run by hand).
    const server = tree.filter((pid) => /scripts\/start\.mjs|src\/main\.ts/.test(commandLine(pid))).at(-1);
    if (server === undefined) throw new Error(`no server process under npm start: ${tree.map(commandLine).join("; ")}`);
    const serverRss = rss(server);
    await idle(p.settleSeconds);
    return { readyMs, serverRss, settledRss: rss(server), treeRss: [group, ...tree].reduce((n, pid) => n + rss(pid), 0) };
  } catch (err) {
    throw new Error(`${err instanceof Error ? err.message : String(err)}\n--- npm start log ---\n${tail()}`);
  } finally {
    await stop();
  }
}

function signal(pid: number, name: NodeJS.Signals) {
  try {
    process.kill(pid, name);
  } catch {
    // Already gone.
  }
}

runMain(async () => {
  const report = new Report("start", args.scale, p);
  const rows: (string | number)[][] = [];
  for (const kind of args.dbs) {
    const db = await createDatabase(kind);
    try {
      const first = await npmStart(db, false);
      const warm: Start[] = [];
      for (let i = 0; i < p.warmStarts; i++) warm.push(await npmStart(db, true));
      const warmMs = median(warm.map((s) => s.readyMs));
      const settledRss = median(warm.map((s) => s.settledRss));
      rows.push([
        kind,
        fmt.ms(first.readyMs),
        `${fmt.ms(warmMs)} (max ${fmt.ms(Math.max(...warm.map((s) => s.readyMs)))})`,
        fmt.mb(median(warm.map((s) => s.serverRss))),
        fmt.mb(settledRss),
        fmt.mb(median(warm.map((s) => s.treeRss))),
        `warm < 2 s: ${fmt.verdict(warmMs < 2000)}; idle RSS < 150 MB: ${fmt.verdict(settledRss < 150 * 2 ** 20)}`,
      ]);
    } finally {
      await db.drop();
    }
  }
  report.table(
    "npm start to /readyz 200, and idle memory",
    [
      "database",
      "first start",
      `warm start (median of ${p.warmStarts})`,
      `RSS, server process, ${p.idleSeconds} s after ready`,
      `idle RSS, server process (${p.settleSeconds} s after ready)`,
      "idle RSS, npm + server",
      "targets",
    ],
    rows,
  );
  report.note(
    "First start: a new empty database (PGlite creates its data directory; PostgreSQL gets the migrations). " +
      "`npm start` runs `node scripts/start.mjs`, which imports the server bundled by esbuild at install (rebuilt first if src/ changed): npm's process sits above the server process; the target is read on the server process, " +
      `idle for ${p.settleSeconds} s (V8 returns what starting grew its heap to once its memory reducer sees the heap idle: the figure ${p.idleSeconds} s after ready still holds it).`,
  );
  report.finish(args.record);
});
