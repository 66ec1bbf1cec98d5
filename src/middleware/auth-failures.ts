import type { MiddlewareHandler } from "hono";
import { clientAddress, EXEMPT } from "./limits.js";
import { authFailuresMessage, type CallerLimits } from "./caller-limits.js";
import { refuse } from "./refusal.js";

/**
 * Failed authentications per client address (limits.authFailuresPerMinute; 0 turns it off): every
 * answer 401, REST or /graphql, counts one; once an address has spent its minute's worth, its
 * requests answer 429 with Retry-After (on /graphql a RATE_LIMITED error) before anything
 * authenticates them. Made-up keys count against their address's rate too (rateLimitKey), but at
 * that rate (RATE_LIMIT_PER_MINUTE) each would still cost a database lookup.
 */
export function limitFailedAuthentications(limits: CallerLimits): MiddlewareHandler {
  if (limits.authFailuresPerMinute === 0) return (_c, next) => next();
  return async (c, next) => {
    if (EXEMPT.has(c.req.path)) return next();
    const address = clientAddress(c);
    const allowed = limits.mayAuthenticate(address);
    if (!allowed.ok) {
      return refuse(c, {
        status: 429,
        message: authFailuresMessage(limits.authFailuresPerMinute, allowed.retryAfterSeconds),
        code: "RATE_LIMITED",
        retryAfterSeconds: allowed.retryAfterSeconds,
      });
    }
    await next();
    if (c.res.status === 401) limits.authenticationFailed(address);
  };
}
