import { spawnSync } from "node:child_process";
import { ROOT } from "./lib/server.js";

/**
 * `npm run bench`: every benchmark in turn, each in a process of its own, with the same options
 * (see bench/lib/args.ts). One that fails does not stop the others; the exit code says whether all ran.
 */
const BENCHMARKS = ["list", "nested", "overhead", "fanout", "pipeline", "logs", "start", "explain"];

const failed: string[] = [];
for (const name of BENCHMARKS) {
  process.stdout.write(`\n== ${name}\n`);
  const run = spawnSync(process.execPath, ["--import", "tsx", `bench/${name}.ts`, ...process.argv.slice(2)], {
    cwd: ROOT,
    stdio: "inherit",
    // Each benchmark bounds its own loops; this bounds a benchmark that hangs anyway.
    timeout: 2 * 60 * 60 * 1000,
  });
  if (run.status !== 0) failed.push(name);
}
if (failed.length > 0) {
  process.stderr.write(`\nbenchmarks that failed: ${failed.join(", ")}\n`);
  process.exit(1);
}
