import type { ContentfulStatusCode } from "hono/utils/http-status";
import { CoreError, type ErrorCode } from "../core/errors.js";
import { UNAVAILABLE_RETRY_AFTER_SECONDS, unavailableAsCoreError } from "../core/prisma-errors.js";

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
  return { status, body: { detail: err.message } };
}
