import pino from "pino";

export type Logger = pino.Logger;

/** Structured JSON lines on stdout. Secret values never reach a log line: nothing logs request bodies. */
export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: "control-plane" },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: { paths: ["*.secrets[*].value", "*.apiKey", "*.headers['x-api-key']", "*.headers.authorization"], censor: "[redacted]" },
    },
    destination,
  );
}
