import { GraphQLError } from "graphql";
import { CoreError, type ErrorCode } from "../core/errors.js";
import { UNAVAILABLE_RETRY_AFTER_SECONDS } from "../core/prisma-errors.js";
import { builder } from "./builder.js";
import { fieldPath } from "./input-names.js";

/** extensions.code of a CoreError that ends a field (queries) rather than a mutation's userErrors. */
const EXTENSION_CODE: Record<ErrorCode, string> = {
  VALIDATION: "BAD_USER_INPUT",
  BAD_REQUEST: "BAD_REQUEST",
  NOT_FOUND: "NOT_FOUND",
  CONFLICT: "CONFLICT",
  UNAUTHENTICATED: "UNAUTHENTICATED",
  FORBIDDEN: "FORBIDDEN",
  PARTIAL: "PARTIAL",
  UNAVAILABLE: "SERVICE_UNAVAILABLE",
  TOO_LARGE: "BAD_REQUEST",
  UNSUPPORTED_TYPE: "BAD_REQUEST",
  UPSTREAM: "BAD_GATEWAY",
  SLOW_CONSUMER: "SLOW_CONSUMER",
  TOO_MANY_SUBSCRIPTIONS: "TOO_MANY_SUBSCRIPTIONS",
};

const HTTP_STATUS: Partial<Record<ErrorCode, number>> = { UNAUTHENTICATED: 401, FORBIDDEN: 403, UNAVAILABLE: 503, TOO_MANY_SUBSCRIPTIONS: 429 };

/**
 * A CoreError as a GraphQL error whose extensions say what went wrong, in words a client can switch
 * on. A lost database says when to retry, as REST's 503 does: `retryAfter` (seconds) in the
 * extensions, for every transport, and a Retry-After header over HTTP.
 */
export function toGraphQLError(err: CoreError, path?: readonly (string | number)[]): GraphQLError {
  const message =
    err.code === "VALIDATION" ? err.issues.map((i) => `${fieldPath(i.loc).join(".")}: ${i.msg}`).join("; ") : err.message;
  const retry = err.code === "UNAVAILABLE" ? UNAVAILABLE_RETRY_AFTER_SECONDS : null;
  return new GraphQLError(message, { path, extensions: refusalExtensions(EXTENSION_CODE[err.code], HTTP_STATUS[err.code], retry) });
}

/**
 * A request refused as a whole before yoga reads it (a limit: the caller's rate, the body size), as
 * the one error of its GraphQL answer: in the words REST's `{detail}` uses, with the status and
 * Retry-After of REST's answer in extensions.http, where yoga's result processors take them from.
 */
export function requestRefusal(message: string, code: string, status: number, retryAfterSeconds: number | null): GraphQLError {
  return new GraphQLError(message, { extensions: refusalExtensions(code, status, retryAfterSeconds) });
}

/**
 * What an error that refuses says besides its message: its code; when to retry (`retryAfter`,
 * seconds), for every transport; and over HTTP (extensions.http, which yoga turns into the answer's
 * status and headers and leaves out of its body) the status, with Retry-After.
 */
function refusalExtensions(code: string, status: number | undefined, retryAfter: number | null) {
  return {
    code,
    ...(retryAfter !== null && { retryAfter }),
    ...(status && { http: { status, ...(retryAfter !== null && { headers: { "Retry-After": String(retryAfter) } }) } }),
  };
}

export type UserErrorCode = "INVALID" | "NOT_FOUND" | "CONFLICT" | "NOT_ALLOWED" | "UPSTREAM";

export interface UserError {
  field: string[] | null;
  message: string;
  code: UserErrorCode;
}

export const UserErrorCodeEnum = builder.enumType("UserErrorCode", {
  description: "Why a mutation refused its input.",
  values: {
    INVALID: { description: "A field's value breaks a rule; `field` names it." },
    NOT_FOUND: { description: "The object does not exist, or is not visible to the caller." },
    CONFLICT: { description: "The change clashes with an existing object (a name or id already taken)." },
    NOT_ALLOWED: { description: "The object's state or a business rule does not allow the change." },
    UPSTREAM: {
      description:
        "A server the change depends on (an OAuth provider, an MCP server or its authorization server) did not answer or answered what cannot be used; `message` says which and what. Retry later, or correct its URL.",
    },
  } as const,
});

export const UserErrorType = builder.objectRef<UserError>("UserError").implement({
  description: "Why a mutation was refused: its input, the object's state, or a server it depends on (UPSTREAM). Its change was not made.",
  fields: (t) => ({
    field: t.exposeStringList("field", {
      nullable: true,
      description: "Path to the input field at fault, e.g. [\"input\", \"sourceConfig\", \"repoUrl\"]; null when no single field is.",
    }),
    message: t.exposeString("message"),
    code: t.field({ type: UserErrorCodeEnum, resolve: (e) => e.code }),
  }),
});

export interface PathNames {
  /** The name of the mutation's input argument ("input"). */
  input?: string;
  /** REST path parameter name → the mutation's argument name (deployment_id → "deploymentId"). */
  path?: Record<string, string>;
  /**
   * The argument a NOT_FOUND refers to (the object id: "id", "deploymentId") when core does not name
   * the input field itself; unset, such a NOT_FOUND names no field (null), never an argument the
   * mutation does not have.
   */
  notFound?: string;
}

/** Core's refusal as userErrors; anything else (a bug, the database gone) stays an error. */
export function userErrorsFrom(err: unknown, names: PathNames = {}): UserError[] {
  if (!(err instanceof CoreError)) throw err;
  switch (err.code) {
    case "VALIDATION":
      return err.issues.map((issue) => ({ field: fieldPath(issue.loc, names), message: issue.msg, code: "INVALID" }));
    case "NOT_FOUND": {
      // Core names the input field that referred to a missing object (input.oauthTokenId); else it is the mutation's object.
      const at = err.issues[0]?.loc;
      const field = at ? fieldPath(at, names) : names.notFound ? [names.notFound] : null;
      return [{ field, message: err.message, code: "NOT_FOUND" }];
    }
    case "CONFLICT": {
      const at = err.issues[0]?.loc;
      return [{ field: at ? fieldPath(at, names) : null, message: err.message, code: "CONFLICT" }];
    }
    case "UPSTREAM":
      // Refused by a server elsewhere, not by this service: the mutation's outcome, as REST's 502 is.
      // An error instead would null the whole payload, and with it the mutations before it in the document.
      return [{ field: null, message: err.message, code: "UPSTREAM" }];
    case "BAD_REQUEST":
      // A business rule about particular fields (fixed after creation, an unknown reference) names them.
      return err.issues.length > 0
        ? err.issues.map((issue) => ({ field: fieldPath(issue.loc, names), message: issue.msg, code: "NOT_ALLOWED" }))
        : [{ field: null, message: err.message, code: "NOT_ALLOWED" }];
    default:
      throw err;
  }
}

/**
 * Runs one core call for a mutation: its result merged into the payload with no userErrors, or,
 * when core refuses, the payload's object fields null and the userErrors.
 *
 * The request's loaders are emptied before it runs and after: it must act on what is there now, not
 * on what an earlier mutation of the document read (a provider deleted and its provider_id taken by
 * another since), and its payload must show what it left, not what it read before writing (a
 * revision's deployment showing it QUEUED after an interrupt). Mutations run one after another,
 * each payload resolved before the next starts, so each sees the ones before it.
 */
export async function mutate<T extends object>(
  ctx: { loaders: { clearAll(): void } },
  run: () => Promise<T>,
  names: PathNames = {},
): Promise<Partial<T> & { userErrors: UserError[] }> {
  ctx.loaders.clearAll();
  try {
    return { ...(await run()), userErrors: [] };
  } catch (err) {
    return { userErrors: userErrorsFrom(err, names) } as Partial<T> & { userErrors: UserError[] };
  } finally {
    ctx.loaders.clearAll();
  }
}
