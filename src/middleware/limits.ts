import type { IncomingMessage } from "node:http";
import type { Context, MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import { type CallerLimits, rateLimitKey, type VerifiedCredentials } from "./caller-limits.js";
import { credentialsFrom } from "./credentials.js";
import { refuse } from "./refusal.js";

/**
 * Bodies over `maxBytes` answer 413 before anything parses them: a declared Content-Length is
 * checked up front, a streamed body is counted as it arrives and never buffered past the limit.
 * Installed ahead of every route, so REST and /graphql share it (yoga's own limit is off: see
 * graphql/server.ts), each answered in its own shape (refusal.ts). GET and HEAD are passed straight on.
 */
export function limitBodySize(maxBytes: number): MiddlewareHandler {
  const tooLarge = (c: Context) => refuse(c, { status: 413, message: `Request body too large: the limit is ${maxBytes} bytes.`, code: "REQUEST_ENTITY_TOO_LARGE" });
  const streamed = bodyLimit({ maxSize: maxBytes, onError: tooLarge });
  return (c, next) => {
    // GET and HEAD carry no body to limit.
    if (c.req.method === "GET" || c.req.method === "HEAD") return next();
    // A declared length (Transfer-Encoding would override it) is all Node's HTTP parser reads of a
    // body, so the header alone decides. hono's bodyLimit asks for the body first (c.req.raw.body),
    // which makes @hono/node-server build a whole Request with a web stream for every POST, where
    // the routes read the body straight from the socket.
    const declared = c.req.header("content-length");
    if (declared !== undefined && DECIMAL.test(declared) && c.req.header("transfer-encoding") === undefined) {
      return Number(declared) > maxBytes ? Promise.resolve(tooLarge(c)) : next();
    }
    return streamed(c, next);
  };
}

const DECIMAL = /^\d+$/;

/** The socket's peer address under @hono/node-server; fetch calls without a socket (tests) share one. */
export function clientAddress(c: Context): string {
  const env = c.env as { incoming?: IncomingMessage } | undefined;
  return env?.incoming?.socket?.remoteAddress ?? "unknown";
}

/** Probes must not be throttled: an orchestrator would restart a healthy replica. */
export const EXEMPT = new Set(["/healthz", "/readyz", "/metrics"]);

/**
 * 429 with Retry-After once a caller exceeds its rate (limits.ratePerMinute; 0 turns it off); on
 * /graphql a RATE_LIMITED error with retryAfter, as graphql-ws answers an operation past the rate.
 * The caller: its credentials once `auth` has verified them, else its address (rateLimitKey).
 */
export function rateLimit(limits: CallerLimits, auth: VerifiedCredentials): MiddlewareHandler {
  if (limits.ratePerMinute === 0) return (_c, next) => next();
  return async (c, next) => {
    if (EXEMPT.has(c.req.path)) return next();
    const result = limits.request(rateLimitKey(credentialsFrom(c.req.raw.headers), clientAddress(c), auth));
    if (!result.ok) {
      return refuse(c, {
        status: 429,
        message: `Rate limit exceeded: ${limits.ratePerMinute} requests at once, then ${limits.ratePerMinute} a minute. Retry after ${result.retryAfterSeconds} s.`,
        code: "RATE_LIMITED",
        retryAfterSeconds: result.retryAfterSeconds,
      });
    }
    return next();
  };
}
