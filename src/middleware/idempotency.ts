import type { MiddlewareHandler } from "hono";
import type { Authenticator, Tenant } from "../core/auth.js";
import { CoreError } from "../core/errors.js";
import type { IdempotencyService } from "../core/idempotency.js";
import type { Logger } from "../logger.js";
import { bodyText } from "../rest/http.js";
import { type ObservedEnv, recordTenant } from "./access-log.js";
import { credentialsFrom } from "./credentials.js";
import type { RequestRecord } from "./metrics.js";

/** The POSTs that only read: the log reads of the command-line tool (also as OpenAPI path templates). */
export const isPostRead = (path: string) => /^\/v1\/projects\/[^/]+\/(revisions\/[^/]+\/)?(build|deploy)_logs$/.test(path);

/**
 * `Idempotency-Key` on POSTs. The first request with a key runs and its answer (status and body) is
 * stored; a retry gets that answer back with `Idempotent-Replayed: true` and runs nothing. Answers
 * of 5xx are not kept: the server failed, so a retry runs again.
 *
 * Runs before the REST routes, so it authenticates on its own (the same cached lookup the routes
 * make); a caller that fails authentication is passed on, and the route refuses it as usual.
 * POSTs that only read (isPostRead: the log reads) change nothing: a retry reads again.
 */
export function idempotency(service: IdempotencyService, auth: Authenticator, logger: Logger): MiddlewareHandler<ObservedEnv> {
  return async (c, next) => {
    const startedAt = Date.now();
    const key = c.req.header("idempotency-key");
    if (c.req.method !== "POST" || key === undefined || isPostRead(c.req.path)) return next();

    let tenant: Tenant;
    try {
      tenant = await auth.authenticate(credentialsFrom(c.req.raw.headers));
    } catch (err) {
      if (err instanceof CoreError) return next();
      throw err;
    }
    // Its access-log line names the caller, also when this answers it (a replay, a refusal).
    const record = c.get("record") as RequestRecord | undefined;
    if (record) recordTenant(record, tenant);

    // Cached by Hono: the handler reads the same bytes again. Not UTF-8: refused here, claiming nothing.
    const body = await bodyText(c);
    const url = new URL(c.req.url);
    const claim = await service.claim(tenant, key, { method: c.req.method, path: url.pathname + url.search, body });
    if (claim.kind === "replay") {
      const headers: Record<string, string> = { "Idempotent-Replayed": "true" };
      if (claim.contentType) headers["Content-Type"] = claim.contentType;
      return new Response(claim.status === 204 ? null : claim.body, { status: claim.status, headers });
    }

    try {
      await service.run(tenant, claim, next);
    } catch (err) {
      await service.release(tenant, claim).catch(() => {});
      throw err;
    }
    const res = c.res;
    try {
      // A failed server runs again on retry; an answer that carries a credential (no-store) is not kept.
      if (res.status >= 500 || /\bno-store\b/i.test(res.headers.get("cache-control") ?? "")) {
        await service.release(tenant, claim);
        return;
      }
      const answer = { status: res.status, contentType: res.headers.get("content-type"), body: await res.clone().text() };
      await service.complete(tenant, claim, answer).catch((err: unknown) => {
        // The change is made: its answer must be kept, or a retry after the claim went stale would
        // make it again. Stored once the database answers (retries wait for it meanwhile).
        logger.warn({ err, path: url.pathname }, "could not store the answer of an idempotent request; trying again");
        storeLater(() => service.complete(tenant, claim, answer), startedAt, err, logger, url.pathname);
      });
    } catch (err) {
      // The request itself succeeded: answer it. The key stays claimed until it goes stale.
      logger.warn({ err, path: url.pathname }, "could not release the key of an idempotent request");
    }
  };
}

/**
 * How long after its request began an answer is tried again: within its claim's staleness (60 s from
 * the claim, made as the request began), past which a retry takes the key over and runs again (or,
 * where the change was recorded with the key, is told the answer was lost). And the pauses between tries.
 */
const STORE_WITHIN_MS = 50_000;
const FIRST_PAUSE_MS = 250;
const MAX_PAUSE_MS = 4_000;

/** Tries `store` again at growing intervals, in the background, until it succeeds or its time is up. */
function storeLater(store: () => Promise<void>, startedAt: number, firstError: unknown, logger: Logger, path: string): void {
  const giveUpAt = startedAt + STORE_WITHIN_MS;
  const attempt = (pauseMs: number, lastError: unknown) => {
    if (Date.now() + pauseMs > giveUpAt) {
      logger.error({ err: lastError, path }, "gave up storing the answer of an idempotent request: a retry after 60 s is told its answer was lost where its change was recorded with the key (deployments, revisions), and runs it again elsewhere");
      return;
    }
    setTimeout(() => {
      store().catch((err: unknown) => attempt(Math.min(pauseMs * 2, MAX_PAUSE_MS), err));
    }, pauseMs).unref();
  };
  attempt(FIRST_PAUSE_MS, firstError);
}
