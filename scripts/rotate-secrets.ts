// `npm run secrets:rotate`: re-seals every stored secret value under SECRETS_KEY, opening values
// sealed under any key in SECRETS_KEY_PREVIOUS: deployment and revision secrets, OAuth client secrets,
// access and refresh tokens, and PKCE verifiers (src/core/secret-rotation.ts lists the columns). Same
// environment as the service. Safe to run while replicas serve on PostgreSQL (rows are swapped only if
// unchanged) and to run again; the embedded PGlite database belongs to one process: with the service
// running on the same DATA_DIR it refuses, naming the process (stop the service first).
// Exit status: 0 when every sealed value is under the current key; 1 when some could not be rotated,
// some were sealed under another key meanwhile (a replica not yet on the new SECRETS_KEY), or the
// DATA_DIR is in use; 2 for a configuration error.
import { ConfigError, loadConfig } from "../src/config.js";
import { rotateSecrets } from "../src/core/secret-rotation.js";
import { loadSecretsKey, SecretBox } from "../src/core/secrets.js";
import { StartupError } from "../src/db/data-dir-lock.js";
import { createLogger } from "../src/logger.js";
import { openScriptDatabase } from "./lib/database.js";

async function main(): Promise<number> {
  let config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      return 2;
    }
    throw err;
  }
  const logger = createLogger(config.logLevel);
  const { db, close } = await openScriptDatabase(config, "npm run secrets:rotate");
  try {
    // Inside the lock: without SECRETS_KEY, the key is DATA_DIR's own (generated there on first use).
    const box = new SecretBox(
      loadSecretsKey(config.secretsKey, config.dataDir),
      config.secretsKeyPrevious.map((k) => Buffer.from(k, "base64")),
    );
    const report = await rotateSecrets(db.prisma, box);
    if (report.failed.length > 0) {
      logger.error({ ...report }, "some secrets could not be rotated; their rows are unchanged");
      return 1;
    }
    if (Object.values(report.remaining).some((n) => n > 0)) {
      logger.error(
        { ...report },
        "some secrets were sealed under another key while the rotation ran (a replica still on an older SECRETS_KEY?): restart every replica with the new SECRETS_KEY, then run the rotation again",
      );
      return 1;
    }
    logger.info({ ...report }, "every stored secret is sealed under the current key");
    return 0;
  } finally {
    await close();
  }
}

main().then(
  (code) => process.exit(code),
  (err) => {
    if (err instanceof StartupError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(1);
    }
    process.stderr.write(`rotation failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
