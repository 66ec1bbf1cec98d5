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
      serializers: { err: serializeError },
    },
    destination,
  );
}

/**
 * What Prisma writes of a call's arguments, between its "Invalid `prisma.x()` invocation" line and
 * the reason: even in the minimal error format (src/db/client.ts) an invalid call renders every
 * value passed (a sealed token, a key's hash), and a log line is no place for them.
 */
const PRISMA_ARGUMENTS = /(Invalid `[^`\n]+` invocation[^\n]*)\n[\s\S]*?\n\n(?=\S)/g;

/** pino's error serializer (the message and stack of the error and its causes), without Prisma's rendering of arguments. */
export function serializeError(err: Error): ReturnType<typeof pino.stdSerializers.err> {
  const out = pino.stdSerializers.err(err);
  if (typeof out.message === "string") out.message = out.message.replace(PRISMA_ARGUMENTS, "$1\n");
  if (typeof out.stack === "string") out.stack = out.stack.replace(PRISMA_ARGUMENTS, "$1\n");
  return out;
}
