import { inspect } from "node:util";
import { type App, buildApp } from "./app.js";
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
  let app: App | null = null;
  /** Set once the server listens: a signal before that is taken up when start-up has finished. */
  let started = false;
  let stopAsked: string | null = null;
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping || !app) return;
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
  // Listened for from the start: a signal's default action killed the process wherever it was, and
  // in the middle of the embedded database's first writes that left a DATA_DIR no start could open.
  const onSignal = (signal: string) => {
    if (started) return void stop(signal);
    if (stopAsked) return;
    stopAsked = signal;
    // On PostgreSQL nothing of this process's is half written: it may go at once (an open
    // transaction is rolled back). The embedded database is let finish opening, then stopped.
    if (config.database.kind === "postgres") {
      logger.info({ signal }, "stopped before it had started");
      process.exit(0);
    }
    logger.info({ signal }, "stopping once the embedded database has opened");
  };
  process.on("SIGTERM", () => onSignal("SIGTERM"));
  process.on("SIGINT", () => onSignal("SIGINT"));

  app = await buildApp(config, { logger, workerStart: "listen" });
  if (!stopAsked) {
    const url = await app.start();
    logger.info({ url, database: config.database.kind }, "ready");
  }
  started = true;
  if (stopAsked) await stop(stopAsked);
}

main().catch((err) => {
  // A start-up problem the operator can fix is one line; anything else keeps its stack.
  if (err instanceof StartupError) process.stderr.write(`failed to start: ${err.message}\n`);
  // Not every library throws Errors (PGlite may throw a plain object): shown whole, not as [object Object].
  else process.stderr.write(`failed to start: ${err instanceof Error ? (err.stack ?? err.message) : inspect(err)}\n`);
  process.exit(1);
});
