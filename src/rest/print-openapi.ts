import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildApp } from "../app.js";
import { loadConfig } from "../config.js";
import { createLogger } from "../logger.js";

/**
 * `npm run openapi:print`: the OpenAPI document exactly as GET /openapi.json serves it, from an app
 * built on a throwaway embedded database. `npm run openapi:print > openapi.json` updates the
 * committed copy, which test/rest/openapi.test.ts compares with the served one.
 */
const dataDir = mkdtempSync(join(tmpdir(), "dcp-openapi-"));
const app = await buildApp(loadConfig({ DATABASE_URL: "memory://", DATA_DIR: dataDir, PIPELINE_WORKER: "off", SECRETS_KEY: Buffer.alloc(32, 1).toString("base64") }), {
  logger: createLogger("silent"),
});
try {
  const res = await app.fetch(new Request("http://localhost/openapi.json"));
  process.stdout.write(await res.text());
} finally {
  await app.stop();
  rmSync(dataDir, { recursive: true, force: true });
}
