// `npm start`: runs the bundled server (scripts/build.mjs), rebuilding it first when any file under
// src/ is newer than the bundle, so that an edited checkout never runs stale code. Should bundling
// fail (build/ not writable, say), the TypeScript sources run through tsx as before.
//
// Signals: npm passes SIGTERM and SIGINT on to the process it runs the script with. The script
// `exec`s node, so that process is this one (not a shell, which would die of the signal and leave
// the server running, re-parented, with npm gone). And should npm itself be killed, which passes
// nothing on, the server notices it lost the parent that started it and stops as on SIGTERM.
import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const ROOT = fileURLToPath(new URL("../", import.meta.url));
const BUNDLE = join(ROOT, "build/server/main.mjs");

function newestMtime(dir) {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(path) : statSync(path).mtimeMs);
  }
  return newest;
}

function bundleMtime() {
  try {
    return statSync(BUNDLE).mtimeMs;
  } catch {
    return -1;
  }
}

/** Under npm (or any package manager running a script), a parent that goes away stops the server. */
function stopWithParent() {
  if (!process.env.npm_lifecycle_event) return;
  const parent = process.ppid;
  const watch = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(watch);
    process.stderr.write(`the process that started the server (${parent}) is gone; stopping\n`);
    process.kill(process.pid, "SIGTERM");
  }, 500);
  watch.unref();
}

stopWithParent();
let entry = pathToFileURL(BUNDLE).href;
if (bundleMtime() < newestMtime(join(ROOT, "src"))) {
  process.stderr.write("bundling the server (src/ changed since the last build)…\n");
  try {
    await (await import("./build.mjs")).buildServer();
  } catch (err) {
    process.stderr.write(`could not bundle the server (${err instanceof Error ? err.message : String(err)}); running the sources with tsx\n`);
    const { register } = await import("tsx/esm/api");
    register();
    entry = pathToFileURL(join(ROOT, "src/main.ts")).href;
  }
}
await import(entry);
