import { createHash } from "node:crypto";
import type { IncomingMessage } from "node:http";
import type { Context, MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import { decodeJwt } from "jose";

/**
 * Bodies over `maxBytes` answer 413 before anything parses them: a declared Content-Length is
 * checked up front, a streamed body is counted as it arrives and never buffered past the limit.
 * Installed ahead of every route, so REST and /graphql share it.
 */
export function limitBodySize(maxBytes: number): MiddlewareHandler {
  return bodyLimit({
    maxSize: maxBytes,
    onError: (c) => c.json({ detail: `Request body too large: the limit is ${maxBytes} bytes.` }, 413),
  });
}

interface Bucket {
  tokens: number;
  at: number;
}

export type TakeResult = { ok: true } | { ok: false; retryAfterSeconds: number };

/** Buckets kept before idle (full) ones are swept, so that many callers cannot grow memory without bound. */
const SWEEP_AT = 10_000;

/**
 * A token bucket per caller: `perMinute` tokens refilled evenly over a minute, bursts up to
 * `perMinute`. In process memory: each replica limits on its own, so N replicas behind a load
 * balancer allow up to N times the rate in total.
 */
export class TokenBuckets {
  private readonly buckets = new Map<string, Bucket>();
  private readonly perMs: number;

  constructor(
    private readonly perMinute: number,
    private readonly now: () => number = Date.now,
  ) {
    if (perMinute <= 0) throw new Error("perMinute must be positive");
    this.perMs = perMinute / 60_000;
  }

  take(key: string): TakeResult {
    const now = this.now();
    const bucket = this.buckets.get(key) ?? { tokens: this.perMinute, at: now };
    bucket.tokens = Math.min(this.perMinute, bucket.tokens + (now - bucket.at) * this.perMs);
    bucket.at = now;
    if (!this.buckets.has(key)) {
      if (this.buckets.size >= SWEEP_AT) this.sweep(now);
      this.buckets.set(key, bucket);
    }
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return { ok: true };
    }
    return { ok: false, retryAfterSeconds: Math.max(1, Math.ceil((1 - bucket.tokens) / this.perMs / 1000)) };
  }

  get size() {
    return this.buckets.size;
  }

  /** A bucket that has refilled completely holds nothing worth keeping. */
  private sweep(now: number) {
    for (const [key, b] of this.buckets) {
      if (b.tokens + (now - b.at) * this.perMs >= this.perMinute) this.buckets.delete(key);
    }
  }
}

const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");

/**
 * Who is calling, before authentication (so that /graphql, which authenticates inside, is covered
 * too): the API key's hash, a bearer token's workspace and subject, else the client's address.
 * An unverified token names its own bucket; a forged one is refused by authentication right after,
 * without touching the database.
 */
export function callerKey(c: Context): string {
  const apiKey = c.req.header("x-api-key");
  if (apiKey) return `key:${sha256(apiKey)}`;
  const bearer = /^Bearer\s+(\S+)$/i.exec(c.req.header("authorization") ?? "")?.[1];
  if (bearer) {
    try {
      const claims = decodeJwt(bearer);
      return `sub:${String(claims.tenant_id)}:${String(claims.sub)}`;
    } catch {
      // Not a JWT at all: limited as the address it comes from.
    }
  }
  return `ip:${clientAddress(c)}`;
}

/** The socket's peer address under @hono/node-server; fetch calls without a socket (tests) share one. */
function clientAddress(c: Context): string {
  const env = c.env as { incoming?: IncomingMessage } | undefined;
  return env?.incoming?.socket?.remoteAddress ?? "unknown";
}

/** Probes must not be throttled: an orchestrator would restart a healthy replica. */
const EXEMPT = new Set(["/healthz", "/readyz", "/metrics"]);

/** 429 with Retry-After once a caller exceeds `perMinute`; 0 turns the limit off. */
export function rateLimit(perMinute: number, now?: () => number): MiddlewareHandler {
  if (perMinute === 0) return (_c, next) => next();
  const buckets = new TokenBuckets(perMinute, now);
  return async (c, next) => {
    if (EXEMPT.has(c.req.path)) return next();
    const result = buckets.take(callerKey(c));
    if (!result.ok) {
      return c.json(
        { detail: `Rate limit exceeded: at most ${perMinute} requests per minute. Retry after ${result.retryAfterSeconds} s.` },
        429,
        { "Retry-After": String(result.retryAfterSeconds) },
      );
    }
    return next();
  };
}
