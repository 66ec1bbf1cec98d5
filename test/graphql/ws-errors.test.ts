import { GraphQLError } from "graphql";
import { describe, expect, it } from "vitest";
import { createLogger } from "../../src/logger.js";
import { logAnsweredError, maskError, MASKED_ERROR_MESSAGE } from "../../src/graphql/masking.js";
import { operationErrors } from "../../src/graphql/ws.js";

/**
 * The errors a graphql-ws operation ends with, as sent and logged. graphql-ws reports a result it
 * could not send (the client's socket reset or closed) as the operation's error too: that is the
 * client gone, not a fault, and its ECONNRESET is not a lost database.
 */
function capture() {
  const lines: Record<string, unknown>[] = [];
  const logger = createLogger("info", { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
  // As ws.ts masks: the service's masking, the answered error logged as yoga logs it.
  const mask = (error: GraphQLError) => {
    const shown = maskError(error, MASKED_ERROR_MESSAGE, false) as GraphQLError;
    if (shown !== error) logAnsweredError(logger, error.originalError ?? error, shown);
    return shown;
  };
  return { lines, logger, mask };
}

const failedWith = (original: Error) => new GraphQLError(original.message, { originalError: original });

describe("operationErrors", () => {
  it("takes a write to the client's socket that failed for the client gone: logged at info, not masked", () => {
    const { lines, logger, mask } = capture();
    for (const code of ["ECONNRESET", "EPIPE"]) {
      const write = Object.assign(new Error(`write ${code}`), { code, errno: -104, syscall: "write" });
      const sent = operationErrors([failedWith(write)], mask, logger);
      expect(sent.map((e) => e.message)).toEqual([`write ${code}`]);
    }
    expect(lines.map((l) => [l.level, l.msg])).toEqual([
      [30, "graphql-ws: the client went away while a result was sent"],
      [30, "graphql-ws: the client went away while a result was sent"],
    ]);
  });

  it("still takes a lost database for one: SERVICE_UNAVAILABLE, a warning", () => {
    const { lines, logger, mask } = capture();
    const lost = Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET", syscall: "read" });
    const sent = operationErrors([failedWith(lost)], mask, logger);
    expect(sent[0]!.extensions.code).toBe("SERVICE_UNAVAILABLE");
    expect(lines.map((l) => [l.level, l.msg])).toEqual([[40, "graphql: database unavailable"]]);
  });
});
