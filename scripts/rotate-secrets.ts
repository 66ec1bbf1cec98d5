// `npm run secrets:rotate`: re-seals every stored secret value under SECRETS_KEY, opening values
// sealed under any key in SECRETS_KEY_PREVIOUS. Same environment as the service. Safe to run while
// replicas serve on PostgreSQL (rows are swapped only if unchanged) and to run again; with the
// embedded PGlite database, stop the service first (one process owns its data directory).
// Exit status: 0 when every row is under the current key, 1 when some could not be rotated.
import { ConfigError, loadConfig } from "../src/config.js";
import { rotateSecrets } from "../src/core/secret-rotation.js";
import { loadSecretsKey, SecretBox } from "../src/core/secrets.js";
import { openDatabase } from "../src/db/client.js";
import { createLogger } from "../src/logger.js";

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
  const box = new SecretBox(
    loadSecretsKey(config.secretsKey, config.dataDir),
    config.secretsKeyPrevious.map((k) => Buffer.from(k, "base64")),
  );
  const db = await openDatabase(config.database, { poolSize: 2 });
  try {
    const report = await rotateSecrets(db.prisma, box);
    if (report.failed.length > 0) {
      logger.error({ ...report }, "some secrets could not be rotated; their rows are unchanged");
      return 1;
    }
    logger.info({ ...report }, "every stored secret is sealed under the current key");
    return 0;
  } finally {
    await db.close();
  }
}

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`rotation failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
