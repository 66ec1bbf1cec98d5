import type { Tenant } from "./auth.js";

/** What a bearer token's socket (4401) and SSE streams are told when it reaches its exp. */
export const EXPIRED_TOKEN_MESSAGE = "The bearer token has expired.";

const NOTHING_TO_CANCEL = () => {};
/** The longest delay setTimeout keeps (about 24.8 days); a longer one would fire at once. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Calls `expired` when the tenant's credentials expire (a bearer token at its exp), for what outlives
 * the request that authenticated it (a graphql-ws socket, an SSE stream); returns what cancels it.
 * Credentials already expired: called at once, before this returns. Credentials without an expiry:
 * never called. The timer keeps no process alive.
 */
export function whenExpired(tenant: Tenant, expired: () => void): () => void {
  const { expiresAt } = tenant;
  if (expiresAt === undefined) return NOTHING_TO_CANCEL;
  let timer: NodeJS.Timeout | undefined;
  const arm = () => {
    const left = expiresAt - Date.now();
    if (left <= 0) return expired();
    timer = setTimeout(arm, Math.min(left, MAX_TIMER_MS)).unref();
  };
  arm();
  return () => clearTimeout(timer);
}
