import type { Context } from "hono";
import { requestRefusal } from "../graphql/errors.js";
import { refusalAnswer } from "../graphql/refusal.js";
import { GRAPHQL_PATH } from "../graphql/http.js";

/** A request refused by a limit ahead of every route. */
export interface Refusal {
  status: 413 | 429;
  /** What is said: REST's `detail`, GraphQL's error message. */
  message: string;
  /** GraphQL's extensions.code. */
  code: "RATE_LIMITED" | "REQUEST_ENTITY_TOO_LARGE";
  /** Sent as Retry-After (and GraphQL's extensions.retryAfter). */
  retryAfterSeconds?: number;
}

/**
 * A limit's answer, in the shape of the face asked: on /graphql a GraphQL response (errors with
 * extensions.code, in the media type yoga would choose), which GraphQL clients read; on every other
 * path REST's `{detail}`. The status and Retry-After are the same on both.
 */
export function refuse(c: Context, refusal: Refusal): Response | Promise<Response> {
  const retryAfter = refusal.retryAfterSeconds ?? null;
  if (c.req.path === GRAPHQL_PATH) return refusalAnswer(c.req.raw, requestRefusal(refusal.message, refusal.code, refusal.status, retryAfter));
  return c.json({ detail: refusal.message }, refusal.status, retryAfter === null ? undefined : { "Retry-After": String(retryAfter) });
}
