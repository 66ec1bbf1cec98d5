import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { CoreError, type ErrorCode, invalid, type ValidationIssue } from "../core/errors.js";
import { UNAVAILABLE_RETRY_AFTER_SECONDS, unavailableAsCoreError } from "../core/prisma-errors.js";
import { parseInput } from "../core/validation.js";
import { routeDocOf } from "./docs.js";
import { queryParams, readJson } from "./http.js";

const STATUS: Record<ErrorCode, ContentfulStatusCode> = {
  VALIDATION: 422,
  BAD_REQUEST: 400,
  NOT_FOUND: 404,
  CONFLICT: 409,
  UNAUTHENTICATED: 401,
  FORBIDDEN: 403,
  PARTIAL: 207,
  UNAVAILABLE: 503,
  TOO_LARGE: 413,
  UNSUPPORTED_TYPE: 415,
  UPSTREAM: 502,
  // Raised by live feeds only, which REST does not serve; Gone, as a Kubernetes watch that fell behind.
  SLOW_CONSUMER: 410,
  TOO_MANY_SUBSCRIPTIONS: 429,
};

export interface ErrorAnswer {
  status: ContentfulStatusCode;
  body: { detail: unknown };
  headers?: Record<string, string>;
}

/** SPEC.md's error shapes: `{detail: [issues]}` for 422, `{detail: "message"}` otherwise. */
export function toErrorAnswer(err: unknown): ErrorAnswer | null {
  err = unavailableAsCoreError(err);
  if (!(err instanceof CoreError)) return null;
  const status = STATUS[err.code];
  if (err.code === "VALIDATION") return { status, body: { detail: err.issues } };
  if (err.code === "UNAVAILABLE") return { status, body: { detail: err.message }, headers: { "Retry-After": String(UNAVAILABLE_RETRY_AFTER_SECONDS) } };
  return { status, body: { detail: err.message }, ...(err.retryAfterSeconds !== null && { headers: { "Retry-After": String(err.retryAfterSeconds) } }) };
}

/**
 * A path that is not valid, told with whatever else of the request is not: its query and its JSON
 * body are checked against the route's schemas too, so that every problem is reported at once, as
 * FastAPI reports them (COMPAT.md). Handlers read their path first, and core validates a body inside
 * its calls, after the path: without this, a bad path id hid the body's problems.
 */
export async function withOtherProblems(c: Context, err: CoreError): Promise<CoreError> {
  if (err.code !== "VALIDATION" || err.issues.length === 0 || !err.issues.every((issue) => issue.loc[0] === "path")) return err;
  const doc = routeDocOf(c);
  if (!doc) return err;
  const more: ValidationIssue[] = [];
  const check = async (read: () => unknown) => {
    try {
      await read();
    } catch (problem) {
      // Only validation problems join the path's; anything else (a body too large) is left to the handler's path.
      if (problem instanceof CoreError && problem.code === "VALIDATION") more.push(...problem.issues);
    }
  };
  if (doc.query) await check(() => queryParams(c, doc.query!));
  if (doc.body && !doc.bodyMedia) await check(async () => parseInput(doc.body!, await readJson(c), "body"));
  return more.length > 0 ? invalid([...err.issues, ...more]) : err;
}
