import { createHash } from "node:crypto";
import { decodeJwt } from "jose";
import { bearerToken, type Credentials } from "../core/auth.js";

interface Bucket {
  tokens: number;
  at: number;
}

export type TakeResult = { ok: true } | { ok: false; retryAfterSeconds: number };

/** Buckets kept before idle (full) ones are swept, so that many callers cannot grow memory without bound. */
const SWEEP_AT = 10_000;

/**
 * A token bucket per key: `perMinute` tokens refilled evenly over a minute, bursts up to
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

  /** Takes a token, or says when the next one comes. */
  take(key: string): TakeResult {
    const result = this.peek(key);
    if (!result.ok) return result;
    const bucket = this.buckets.get(key) ?? this.add(key);
    bucket.tokens -= 1;
    return result;
  }

  /** Whether a token is there to take, taking none. */
  peek(key: string): TakeResult {
    const now = this.now();
    const bucket = this.buckets.get(key);
    if (bucket) {
      bucket.tokens = Math.min(this.perMinute, bucket.tokens + (now - bucket.at) * this.perMs);
      bucket.at = now;
    }
    const tokens = bucket?.tokens ?? this.perMinute;
    if (tokens >= 1) return { ok: true };
    return { ok: false, retryAfterSeconds: Math.max(1, Math.ceil((1 - tokens) / this.perMs / 1000)) };
  }

  get size() {
    return this.buckets.size;
  }

  private add(key: string): Bucket {
    const now = this.now();
    if (this.buckets.size >= SWEEP_AT) this.sweep(now);
    const bucket = { tokens: this.perMinute, at: now };
    this.buckets.set(key, bucket);
    return bucket;
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
 * Who the credentials say is calling: the API key's hash, a bearer token's workspace and subject, else
 * the client's address. Only as true as the credentials: anyone can send a new made-up key, or a
 * token with made-up claims (someone else's workspace and subject too), on each request. So it is a
 * rate-limit bucket only for credentials this replica has verified: rateLimitKey.
 */
export function callerKey(credentials: Credentials, address: string): string {
  if (credentials.apiKey) return `key:${sha256(credentials.apiKey)}`;
  const bearer = bearerToken(credentials.authorization);
  if (bearer) {
    try {
      const claims = decodeJwt(bearer);
      // Hashed: claims are the client's to make as long as it likes.
      return `sub:${sha256(JSON.stringify([claims.tenant_id ?? null, claims.sub ?? null]))}`;
    } catch {
      // Not a JWT at all: limited as the address it comes from.
    }
  }
  return addressKey(address);
}

const addressKey = (address: string) => `ip:${address}`;

/** What knows, synchronously, whether this replica has verified credentials: the Authenticator. */
export interface VerifiedCredentials {
  verified(credentials: Credentials): boolean;
}

/**
 * The rate-limit bucket of a request (or a graphql-ws socket's operations), decided before
 * authentication, so that /graphql and graphql-ws, which authenticate further in, are covered too: the
 * caller's own (callerKey) once this replica has verified its credentials, else the client's address's,
 * as for a request without credentials. Credentials not verified yet (their first request here, or
 * made up) count against their address: made-up ones sent to what does not answer 401 (a body that
 * does not parse, a route without authentication) would otherwise never be throttled, and a forged
 * token naming someone else's workspace and subject would spend their requests. A verified caller's
 * requests do not take from its address's.
 */
export function rateLimitKey(credentials: Credentials, address: string, check: VerifiedCredentials): string {
  return check.verified(credentials) ? callerKey(credentials, address) : addressKey(address);
}

/**
 * The limits every face applies to its callers, shared by HTTP and graphql-ws so that neither is a
 * way around the other: requests (and graphql-ws operations) per caller, and failed authentications
 * per client address. `0` turns either off.
 */
export class CallerLimits {
  private readonly requests: TokenBuckets | null;
  private readonly failures: TokenBuckets | null;

  constructor(
    readonly ratePerMinute: number,
    readonly authFailuresPerMinute: number,
    now?: () => number,
  ) {
    this.requests = ratePerMinute > 0 ? new TokenBuckets(ratePerMinute, now) : null;
    this.failures = authFailuresPerMinute > 0 ? new TokenBuckets(authFailuresPerMinute, now) : null;
  }

  /** One request of this caller: an HTTP request, or an operation over graphql-ws. */
  request(caller: string): TakeResult {
    return this.requests?.take(caller) ?? { ok: true };
  }

  /** Whether this address may try to authenticate: not while its failures of the last minute are spent. */
  mayAuthenticate(address: string): TakeResult {
    return this.failures?.peek(address) ?? { ok: true };
  }

  /** Counts a failed authentication of this address. */
  authenticationFailed(address: string): void {
    this.failures?.take(address);
  }
}

/** What a 429 for spent failed authentications says. */
export const authFailuresMessage = (perMinute: number, retryAfterSeconds: number) =>
  `Too many failed authentications from this address: ${perMinute} at once, then ${perMinute} a minute. Retry after ${retryAfterSeconds} s.`;
