import { buildApp } from "./app.js";
import { ConfigError, loadConfig } from "./config.js";
import { createLogger } from "./logger.js";
import { StartupError } from "./db/data-dir-lock.js";

/** Process entry: configuration from the environment, start, and a graceful stop on SIGTERM/SIGINT. */
async function main() {
  let config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  const logger = createLogger(config.logLevel);
  const app = await buildApp(config, { logger, workerStart: "listen" });
  const url = await app.start();
  logger.info({ url, database: config.database.kind }, "ready");

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, "draining");
    try {
      await app.stop();
      logger.info("stopped");
      process.exit(0);
    } catch (err) {
      logger.error({ err }, "error while stopping");
      process.exit(1);
    }
  };
  process.on("SIGTERM", () => void stop("SIGTERM"));
  process.on("SIGINT", () => void stop("SIGINT"));
}

main().catch((err) => {
  // A start-up problem the operator can fix is one line; anything else keeps its stack.
  if (err instanceof StartupError) process.stderr.write(`failed to start: ${err.message}\n`);
  else process.stderr.write(`failed to start: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
