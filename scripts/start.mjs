// `npm start`: runs the bundled server (scripts/build.mjs), rebuilding it first when any file under
// src/ is newer than the bundle, so that an edited checkout never runs stale code. Should bundling
// fail (build/ not writable, say), the TypeScript sources run through tsx as before.
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

let entry = pathToFileURL(BUNDLE).href;
if (bundleMtime() < newestMtime(join(ROOT, "src"))) {
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
