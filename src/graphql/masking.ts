import { GraphQLError } from "graphql";
import { maskError as yogaMaskError } from "graphql-yoga";
import { CoreError } from "../core/errors.js";
import { unavailableAsCoreError } from "../core/prisma-errors.js";
import { jsonFault } from "../core/validation.js";
import type { Logger } from "../logger.js";
import { toGraphQLError } from "./errors.js";
import { withoutSuggestion } from "./suggestions.js";

/**
 * What an error tells a client of GraphQL, over HTTP and graphql-ws alike, and how it is logged:
 * core's errors in their words, the service's faults hidden behind one message.
 */

/** What an unexpected error says to the client (its details stay in the log). */
export const MASKED_ERROR_MESSAGE = "Unexpected error.";

/**
 * Core's errors keep their message and get their code; GraphQL's own (validation, bad variables) get
 * a code if they lack one; anything else is an unexpected error whose details stay in the log.
 */
export function maskError(error: unknown, message: string, isDev: boolean): Error {
  let original = error instanceof GraphQLError ? error.originalError : error;
  // A lost database is worth retrying, not a bug: the same classification as REST's 503.
  original = unavailableAsCoreError(original);
  if (original instanceof CoreError) {
    const mapped = toGraphQLError(original, error instanceof GraphQLError ? error.path : undefined);
    return error instanceof GraphQLError
      ? new GraphQLError(mapped.message, { nodes: error.nodes, path: error.path, extensions: mapped.extensions })
      : mapped;
  }
  // Production hides suggestions: variables' errors (execution's, subscribe's) are hidden here,
  // validation's by useHiddenSuggestions.
  if (error instanceof GraphQLError && isOwnGraphQLError(error)) return withCode(isDev ? error : withoutSuggestion(error));
  return yogaMaskError(error, message, isDev);
}

/** A GraphQL error of the service's own, with the code it lacks. */
function withCode(error: GraphQLError): GraphQLError {
  // yoga's refusal of a body that is not JSON carries JSON.parse's message, which quotes the body
  // (a secret left unquoted, say): told as REST tells it (jsonFault), without the text. (yoga
  // answers an application/json client 400 rather than 200 by this originalError: it stays.)
  const parseFault = error.extensions.originalError as { name?: unknown } | undefined;
  if (parseFault?.name === "SyntaxError") {
    return new GraphQLError(error.message, { extensions: { ...error.extensions, originalError: { name: "SyntaxError", message: jsonFault(parseFault).error } } });
  }
  if (error.extensions.code) return error;
  return new GraphQLError(error.message, {
    nodes: error.nodes,
    source: error.source,
    positions: error.positions,
    path: error.path,
    // CSRF prevention's refusal (a 403 without a code) is of the request itself, not of its document or variables.
    extensions: { ...error.extensions, code: (error.extensions.http as { status?: number } | undefined)?.status === 403 ? "BAD_REQUEST" : "BAD_USER_INPUT" },
  });
}

/** A GraphQL error raised on purpose (by graphql-js, a scalar, Pothos), not a wrapped crash. */
const isOwnGraphQLError = (error: unknown): boolean =>
  error instanceof GraphQLError && (error.originalError == null || isOwnGraphQLError(error.originalError));

/**
 * Logs an error the service answered with, `shown` being what the client was told: a real fault at
 * error level with its stack; a lost database as a warning; a client's mistake (bad input, an object
 * that does not exist) at info, its code and message only, so that no client can flood the error log.
 */
export function logAnsweredError(logger: Logger, error: Error, shown: Error): void {
  const extensions = shown instanceof GraphQLError ? shown.extensions : {};
  if (extensions.unexpected || !extensions.code || extensions.code === "INTERNAL_SERVER_ERROR") {
    logger.error({ err: error }, "graphql: unexpected error");
  } else if (extensions.code === "SERVICE_UNAVAILABLE") {
    logger.warn({ code: extensions.code, reason: (error instanceof GraphQLError ? error.originalError : error)?.message }, "graphql: database unavailable");
  } else {
    logger.info({ code: extensions.code, message: shown.message }, "graphql: refused");
  }
}

/** yoga logs through this; it logs at error level every error its masking rewrote, which logAnsweredError sorts. */
export function yogaLogger(logger: Logger, production: boolean) {
  const log = (level: "debug" | "info" | "warn" | "error") => (...args: unknown[]) => {
    const [first, ...rest] = args;
    if (first instanceof Error && level === "error") logAnsweredError(logger, first, maskError(first, MASKED_ERROR_MESSAGE, !production));
    else if (first instanceof Error) logger[level]({ err: first }, "graphql: unexpected error");
    else logger[level]({ details: rest.length > 0 ? rest : undefined }, `graphql: ${String(first)}`);
  };
  return { debug: log("debug"), info: log("info"), warn: log("warn"), error: log("error") };
}
