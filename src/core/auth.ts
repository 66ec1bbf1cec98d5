import { createHash } from "node:crypto";
import { jwtVerify } from "jose";
import { LRUCache } from "lru-cache";
import { z } from "zod";
import type { PrismaClient } from "../db/client.js";
import { type EventBus, topics } from "../events/types.js";
import type { Logger } from "../logger.js";
import { PeriodicTask } from "../periodic.js";
import { CoreError } from "./errors.js";
import { isDatabaseUnavailable } from "./prisma-errors.js";
import { isStorable } from "./validation.js";

/** Who is calling, and the one workspace every core call of theirs is confined to. */
export interface Tenant {
  organizationId: string;
  workspaceId: string;
  /** Who to record as the actor (created_by): the key's id or the token's subject. */
  actor: string;
  /** When the credentials stop being valid, in ms since the epoch: a bearer token's exp (keys: until revoked). */
  expiresAt?: number;
}

export interface Credentials {
  apiKey?: string | null;
  tenantId?: string | null;
  authorization?: string | null;
}

export const hashApiKey = (key: string) => createHash("sha256").update(key).digest("hex");
/** The token of an `Authorization: Bearer <token>` header; undefined for anything else. */
export const bearerToken = (authorization: string | null | undefined) => /^Bearer\s+(\S+)$/i.exec(authorization ?? "")?.[1];
/** The characters of a key that `npm run keys -- list` shows (`dcp_` and four of the random part): enough to recognise it, useless to use. */
export const keyPrefix = (key: string) => key.slice(0, 8);

const KEY_ACTOR = "api_key:";
/** Who a key's calls are recorded as (Tenant.actor): also how a face finds what a revoked key has open. */
export const keyActor = (keyId: string) => `${KEY_ACTOR}${keyId}`;

/** What a revoked key is told, over HTTP (401), in a graphql-ws close (4401) and at the end of an SSE stream. */
export const REVOKED_KEY_MESSAGE = "This API key has been revoked.";

/** How `verified` knows credentials: a key by its hash, a bearer token by SHA-256 of it (neither is kept). */
const keyCredential = (key: string) => `key:${hashApiKey(key)}`;
const tokenCredential = (token: string) => `token:${createHash("sha256").update(token).digest("base64")}`;

const unauthenticated = (msg: string) => new CoreError("UNAUTHENTICATED", msg);
const forbidden = (msg: string) => new CoreError("FORBIDDEN", msg);

/**
 * A verified token's claims are still input: `sub` is stored (as the actor) and must be text
 * PostgreSQL takes, of a sane length; `exp` is required (jose checks it has not passed).
 */
const claimsSchema = z.object({
  tenant_id: z.uuid(),
  // Required: the subject is the caller (its OAuth tokens, idempotency keys, rate and subscriptions),
  // and tokens without one would all be a single caller.
  sub: z.string().min(1).max(255).refine(isStorable),
  exp: z.number(),
  iat: z.number().optional(),
});

/** The longest a bearer token may live (exp - iat, and exp - now), unless configured otherwise. */
export const DEFAULT_TOKEN_LIFETIME_SECONDS = 24 * 60 * 60;

export interface AuthenticatorOptions {
  /** HS256 secret of bearer tokens; none: bearer tokens are refused. */
  jwtSecret?: string;
  /** Tokens meant to live longer than this are refused. */
  maxTokenLifetimeSeconds?: number;
  /** Told of a re-check of keys that failed (after the event bus resynced). */
  logger?: Logger;
}

interface KeyRecord {
  id: string;
  organizationId: string;
  workspaceId: string | null;
  revokedAt: Date | null;
}

export const KEY_CACHE_MS = 30_000;
/** Unknown keys are cached too (a guessing client must not reach the database each time), so bound it. */
const CACHE_MAX = 10_000;
/** Keys re-checked per statement after a resync of the bus. */
const RECHECK_BATCH = 1_000;
/** Attempts at that re-check (the database may still be coming back), waiting 1, 2, 4… s between them. */
const RECHECK_ATTEMPTS = 5;

/** One authentication for both faces: X-Api-Key (+ X-Tenant-Id) or Authorization: Bearer <HS256 JWT>. */
export class Authenticator {
  private readonly secret: Uint8Array | null;
  /** Key lookups (unknown keys too) and workspaces' organisations, each for KEY_CACHE_MS, the least used out first. */
  private readonly keyCache = new LRUCache<string, { record: KeyRecord | null }>({ max: CACHE_MAX, ttl: KEY_CACHE_MS });
  private readonly workspaceCache = new LRUCache<string, { organizationId: string | null }>({ max: CACHE_MAX, ttl: KEY_CACHE_MS });
  private readonly revocationHandlers = new Set<(keyId: string) => void>();
  /**
   * The credentials verified here, what `verified` answers from: API keys (by their hash, with their
   * id, until revoked or deleted) and bearer tokens (by SHA-256 of the token, until their exp). Apart
   * from the key cache, which a resync empties and unknown keys crowd: a key verified here stays
   * so. At most CACHE_MAX, in the order they were last verified: the one verified longest ago makes
   * room. Only genuine credentials get in, so a guessing client cannot fill it.
   */
  private readonly verifiedCredentials = new Map<string, { keyId: string | null; expiresAt: number }>();
  /**
   * The ids of the keys this authenticator has let through and has not seen revoked: whatever is open
   * here (sockets, streams) was opened by one of them. Re-checked when the bus may have lost a
   * revocation; as many as there are keys in use, whatever the traffic.
   */
  private readonly admitted = new Set<string>();
  /** Counts what makes a lookup in flight stale (a revocation told, a resync): such a lookup reads again. */
  private generation = 0;
  private rechecking: Promise<void> | null = null;
  private recheckAgain = false;

  private readonly maxLifetimeSeconds: number;

  constructor(
    private readonly prisma: PrismaClient,
    options: AuthenticatorOptions = {},
    /** Revocations made anywhere (npm run keys, another replica) drop the key from this cache at once. */
    events?: EventBus,
  ) {
    this.secret = options.jwtSecret ? new TextEncoder().encode(options.jwtSecret) : null;
    this.maxLifetimeSeconds = options.maxTokenLifetimeSeconds ?? DEFAULT_TOKEN_LIFETIME_SECONDS;
    events?.subscribe(topics.apiKeys(), (event) => {
      if (event.type === "api_key.revoked") this.revoked(event.keyId);
    });
    // Revocations published while the bus was reconnecting never come: read what they would have told.
    events?.onResync(() => {
      this.resync().catch((err: unknown) => options.logger?.error({ err }, "auth: could not re-check the keys in use after the event bus reconnected"));
    });
  }

  /**
   * Calls `handler` with the id of each key revoked anywhere, once it has left this cache: the faces
   * end what the key still has open (graphql-ws sockets, SSE streams), on every replica. A revocation
   * whose notification was lost (the bus was reconnecting) is found when the bus resyncs, and told then.
   */
  onKeyRevoked(handler: (keyId: string) => void): () => void {
    this.revocationHandlers.add(handler);
    return () => this.revocationHandlers.delete(handler);
  }

  /**
   * Whether the caller an actor (Tenant.actor) names may still act here: false once its key's
   * revocation has been handled (told, or read after a resync). For what opens after authenticating
   * (an SSE stream), which a revocation handled in between would not reach. Bearer tokens: true.
   */
  stillAdmitted(actor: string): boolean {
    return !actor.startsWith(KEY_ACTOR) || this.admitted.has(actor.slice(KEY_ACTOR.length));
  }

  /**
   * Whether this replica has verified these credentials, synchronously and without a lookup (for the
   * rate limit, which runs before authentication: see rateLimitKey). An API key: it authenticated here
   * and has not been revoked or deleted since (a revocation told here, or read after a resync, drops
   * it at once). A bearer token: it was verified here (signature, claims, lifetime) and has not reached
   * its exp. Says nothing about what they may do: authentication still decides that, request by request.
   */
  verified(credentials: Credentials): boolean {
    const bearer = credentials.apiKey ? null : bearerToken(credentials.authorization);
    const id = credentials.apiKey ? keyCredential(credentials.apiKey) : bearer ? tokenCredential(bearer) : null;
    const entry = id ? this.verifiedCredentials.get(id) : undefined;
    if (!entry) return false;
    if (entry.expiresAt > Date.now()) return true;
    this.verifiedCredentials.delete(id!);
    return false;
  }

  /** Credentials verified here: moved to the end of the map, the oldest out if it is full. */
  private rememberVerified(id: string, keyId: string | null, expiresAt: number): void {
    if (!this.verifiedCredentials.delete(id) && this.verifiedCredentials.size >= CACHE_MAX) {
      this.verifiedCredentials.delete(this.verifiedCredentials.keys().next().value!);
    }
    this.verifiedCredentials.set(id, { keyId, expiresAt });
  }

  /** A key revoked or deleted: no longer verified here. */
  private forgetVerifiedKey(keyId: string): void {
    for (const [id, entry] of this.verifiedCredentials) if (entry.keyId === keyId) this.verifiedCredentials.delete(id);
  }

  /** Drops a key from the cache: its next use reads the database again. */
  forgetKey(keyId: string): void {
    this.generation++;
    for (const [hash, entry] of this.keyCache.entries()) if (entry.record?.id === keyId) this.keyCache.delete(hash);
  }

  /**
   * The bus has listened again after losing its connection: a revocation told meanwhile may never
   * come. Drops every cached key and workspace (their next use reads the database), then reads which
   * of the keys let through here are revoked now, and handles each as if its revocation had been told
   * (the faces end what it has open). Resolves once done; a failed read is tried again a few times.
   */
  resync(): Promise<void> {
    this.generation++;
    this.keyCache.clear();
    this.workspaceCache.clear();
    return this.recheck();
  }

  /**
   * Reads which of the keys let through here are revoked now, and handles each as if its revocation
   * had been told. After a resync, and every KEY_CACHE_MS (KeyRecheck): a revocation whose event was
   * never published (the process that revoked died, or lost the database, between its commit and
   * its publish) would otherwise leave the key's sockets and streams open for ever.
   */
  recheck(attempts = RECHECK_ATTEMPTS): Promise<void> {
    if (this.rechecking) {
      this.recheckAgain = true;
      return this.rechecking;
    }
    this.rechecking = (async () => {
      try {
        do {
          this.recheckAgain = false;
          await this.recheckAdmitted(attempts);
        } while (this.recheckAgain);
      } finally {
        this.rechecking = null;
      }
    })();
    return this.rechecking;
  }

  private async recheckAdmitted(attempts: number): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        const ids = [...this.admitted];
        for (let i = 0; i < ids.length; i += RECHECK_BATCH) {
          const batch = ids.slice(i, i + RECHECK_BATCH);
          const rows = await this.prisma.apiKey.findMany({ where: { id: { in: batch } }, select: { id: true, revokedAt: true } });
          const found = new Set(rows.map((r) => r.id));
          // Deleted since: as good as revoked (its next use is refused as unknown), and what it has open ends.
          for (const id of batch) if (!found.has(id) && this.admitted.has(id)) this.revoked(id);
          // Unless its revocation was told meanwhile (and handled).
          for (const row of rows) if (row.revokedAt && this.admitted.has(row.id)) this.revoked(row.id);
        }
        return;
      } catch (err) {
        if (attempt >= attempts) throw err;
        await new Promise((resolve) => setTimeout(resolve, 1000 * 2 ** (attempt - 1)).unref());
      }
    }
  }

  /** A key revoked (told by the bus, or read after a resync): out of the cache, and its holders told. */
  private revoked(keyId: string): void {
    this.admitted.delete(keyId);
    this.forgetVerifiedKey(keyId);
    this.forgetKey(keyId);
    for (const handler of this.revocationHandlers) handler(keyId);
  }

  async authenticate(credentials: Credentials): Promise<Tenant> {
    if (credentials.apiKey) return this.fromApiKey(credentials.apiKey, credentials.tenantId ?? null);
    const bearer = bearerToken(credentials.authorization);
    if (bearer) return this.fromBearer(bearer, credentials.tenantId ?? null);
    throw unauthenticated("Not authenticated: send an X-Api-Key header or Authorization: Bearer <token>.");
  }

  private async fromApiKey(key: string, tenantId: string | null): Promise<Tenant> {
    const record = await this.keyRecord(hashApiKey(key));
    if (!record) throw unauthenticated("Invalid API key.");
    if (record.revokedAt) {
      // Found revoked by a lookup before any event said so: what it has open here ends now.
      if (this.admitted.has(record.id)) this.revoked(record.id);
      throw unauthenticated(REVOKED_KEY_MESSAGE);
    }
    this.admitted.add(record.id);
    this.rememberVerified(keyCredential(key), record.id, Infinity);
    const actor = keyActor(record.id);
    if (record.workspaceId) {
      if (tenantId && tenantId.toLowerCase() !== record.workspaceId) {
        throw forbidden("This API key does not have access to the requested workspace.");
      }
      return { organizationId: record.organizationId, workspaceId: record.workspaceId, actor };
    }
    if (!tenantId) throw forbidden("This organization-wide API key requires workspace specification: set X-Tenant-Id.");
    const organizationId = await this.workspaceOrganization(tenantId);
    if (organizationId !== record.organizationId) {
      throw forbidden("This API key does not have access to the requested workspace.");
    }
    // Revoked (and handled) while the workspace was read: refused, as a request after it is.
    if (!this.stillAdmitted(actor)) throw unauthenticated(REVOKED_KEY_MESSAGE);
    return { organizationId, workspaceId: tenantId.toLowerCase(), actor };
  }

  private async fromBearer(token: string, tenantId: string | null): Promise<Tenant> {
    if (!this.secret) throw unauthenticated("Bearer tokens are not accepted: the server has no JWT_SECRET.");
    let claims: z.infer<typeof claimsSchema>;
    try {
      const { payload } = await jwtVerify(token, this.secret, { algorithms: ["HS256"], requiredClaims: ["exp"] });
      claims = claimsSchema.parse(payload);
    } catch {
      throw unauthenticated("Invalid or expired bearer token: it must be signed HS256, unexpired, with exp, tenant_id and a plain sub.");
    }
    const now = Date.now() / 1000;
    if (claims.exp - Math.min(now, claims.iat ?? now) > this.maxLifetimeSeconds) {
      throw unauthenticated(`Bearer tokens may live at most ${this.maxLifetimeSeconds} s (exp - iat): ask for a shorter-lived one.`);
    }
    // Genuine (ours, and its claims sane): its workspace and subject may have a rate-limit bucket of their own.
    this.rememberVerified(tokenCredential(token), null, claims.exp * 1000);
    // A UUID in capitals names the same workspace: the tenant carries its one (lower-case) spelling.
    const workspaceId = claims.tenant_id.toLowerCase();
    if (tenantId && tenantId.toLowerCase() !== workspaceId) {
      throw forbidden("This token does not have access to the requested workspace.");
    }
    const organizationId = await this.workspaceOrganization(workspaceId);
    if (!organizationId) throw unauthenticated("The token's workspace does not exist.");
    return { organizationId, workspaceId, actor: `user:${claims.sub}`, expiresAt: claims.exp * 1000 };
  }

  /**
   * Key lookups are cached briefly: authentication runs on every request. A lookup during which a
   * revocation was told (or the bus resynced) may have read the key before it was revoked: it reads
   * again, so that nothing let through, or cached, predates a revocation handled here.
   */
  private async keyRecord(hash: string): Promise<KeyRecord | null> {
    const cached = this.keyCache.get(hash);
    if (cached) return cached.record;
    for (let attempt = 1; ; attempt++) {
      const generation = this.generation;
      const record = await this.prisma.apiKey.findUnique({
        where: { keyHash: hash },
        select: { id: true, organizationId: true, workspaceId: true, revokedAt: true },
      });
      if (generation !== this.generation && attempt < 3) continue;
      if (generation === this.generation) this.keyCache.set(hash, { record });
      return record;
    }
  }

  private async workspaceOrganization(workspaceId: string): Promise<string | null> {
    if (!z.uuid().safeParse(workspaceId).success) return null;
    const id = workspaceId.toLowerCase();
    const cached = this.workspaceCache.get(id);
    if (cached) return cached.organizationId;
    const generation = this.generation;
    const ws = await this.prisma.workspace.findUnique({ where: { id }, select: { organizationId: true } });
    const organizationId = ws?.organizationId ?? null;
    // Not cached past a resync that came during the read.
    if (generation !== this.generation) return organizationId;
    this.workspaceCache.set(id, { organizationId });
    return organizationId;
  }
}

/**
 * Re-reads the keys in use here every so often (Authenticator.recheck), for revocations whose event
 * never came. One attempt a run: the next run is the retry.
 */
export class KeyRecheck extends PeriodicTask<void> {
  constructor(
    private readonly auth: Authenticator,
    logger: Logger,
  ) {
    super("auth: re-check of the keys in use", logger);
  }

  protected async perform(): Promise<void> {
    try {
      await this.auth.recheck(1);
    } catch (err) {
      const reason = isDatabaseUnavailable(err) ? "the database is unavailable" : err instanceof Error ? err.message.trim() : String(err);
      this.logger.warn({ reason }, "auth: could not re-check the keys in use for revocations; the next run tries again");
    }
  }
}
