// `npm run secrets:rotate`: re-seals every stored secret value under SECRETS_KEY, opening values
// sealed under any key in SECRETS_KEY_PREVIOUS: deployment and revision secrets, OAuth client secrets,
// access and refresh tokens, and PKCE verifiers (src/core/secret-rotation.ts lists the columns). Same
// environment as the service. Safe to run while replicas serve on PostgreSQL (rows are swapped only if
// unchanged) and to run again; the embedded PGlite database belongs to one process: with the service
// running on the same DATA_DIR it refuses, naming the process (stop the service first).
// Exit status: 0 when every sealed value is under the current key; 1 when some could not be rotated,
// some were sealed under another key meanwhile (a replica not yet on the new SECRETS_KEY), or the
// DATA_DIR is in use; 2 for a configuration error, an argument (it takes none: --help tells so), or
// no current key (SECRETS_KEY unset and no DATA_DIR/secrets.key: it never makes a key of its own).
import { join } from "node:path";
import { parseArgs } from "node:util";
import { ConfigError, loadConfig } from "../src/config.js";
import { rotateSecrets } from "../src/core/secret-rotation.js";
import { existingSecretsKey, SecretBox } from "../src/core/secrets.js";
import { StartupError } from "../src/db/data-dir-lock.js";
import { createLogger } from "../src/logger.js";
import { openScriptDatabase } from "./lib/database.js";

const USAGE = `usage: npm run secrets:rotate
  Re-seals every stored secret under SECRETS_KEY (or DATA_DIR's secrets.key), opening those sealed
  under a key of SECRETS_KEY_PREVIOUS. It takes no arguments: the same environment as the service.`;

async function main(argv: string[]): Promise<number> {
  const args = parseArgs({ args: argv, allowPositionals: true, strict: false, options: { help: { type: "boolean", short: "h" } } });
  if (args.values.help || argv.length > 0) {
    process.stderr.write(`${USAGE}\n`);
    return args.values.help && argv.length === 1 ? 0 : 2;
  }
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
  // Never a key of its own: every secret sealed under a key no replica has would be lost to them all.
  const current = existingSecretsKey(config.secretsKey, config.dataDir);
  if (!current) {
    process.stderr.write(
      `SECRETS_KEY is not set and ${join(config.dataDir, "secrets.key")} does not exist: set SECRETS_KEY to the key the service runs with (the rotation never makes one).\n`,
    );
    return 2;
  }
  const logger = createLogger(config.logLevel);
  const { db, close } = await openScriptDatabase(config, "npm run secrets:rotate");
  try {
    const box = new SecretBox(
      current,
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

main(process.argv.slice(2)).then(
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
