import { createHash } from "node:crypto";
import { jwtVerify } from "jose";
import { z } from "zod";
import type { PrismaClient } from "../db/client.js";
import { type EventBus, topics } from "../events/types.js";
import { CoreError } from "./errors.js";
import { isStorable } from "./validation.js";

/** Who is calling, and the one workspace every core call of theirs is confined to. */
export interface Tenant {
  organizationId: string;
  workspaceId: string;
  /** Who to record as the actor (created_by): the key's id or the token's subject. */
  actor: string;
}

export interface Credentials {
  apiKey?: string | null;
  tenantId?: string | null;
  authorization?: string | null;
}

export const hashApiKey = (key: string) => createHash("sha256").update(key).digest("hex");
/** The characters of a key that `npm run keys -- list` shows (`dcp_` and four of the random part): enough to recognise it, useless to use. */
export const keyPrefix = (key: string) => key.slice(0, 8);

/** Who a key's calls are recorded as (Tenant.actor): also how a face finds what a revoked key has open. */
export const keyActor = (keyId: string) => `api_key:${keyId}`;

/** What a revoked key is told, over HTTP (401), in a graphql-ws close (4401) and at the end of an SSE stream. */
export const REVOKED_KEY_MESSAGE = "This API key has been revoked.";

const unauthenticated = (msg: string) => new CoreError("UNAUTHENTICATED", msg);
const forbidden = (msg: string) => new CoreError("FORBIDDEN", msg);

/**
 * A verified token's claims are still input: `sub` is stored (as the actor) and must be text
 * PostgreSQL takes, of a sane length; `exp` is required (jose checks it has not passed).
 */
const claimsSchema = z.object({
  tenant_id: z.uuid(),
  sub: z.string().min(1).max(255).refine(isStorable).optional(),
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
}

interface KeyRecord {
  id: string;
  organizationId: string;
  workspaceId: string | null;
  revokedAt: Date | null;
}

const KEY_CACHE_MS = 30_000;
/** Unknown keys are cached too (a guessing client must not reach the database each time), so bound it. */
const CACHE_MAX = 10_000;

/** One authentication for both faces: X-Api-Key (+ X-Tenant-Id) or Authorization: Bearer <HS256 JWT>. */
export class Authenticator {
  private readonly secret: Uint8Array | null;
  private readonly keyCache = new Map<string, { record: KeyRecord | null; until: number }>();
  private readonly workspaceCache = new Map<string, { organizationId: string | null; until: number }>();
  private readonly revocationHandlers = new Set<(keyId: string) => void>();

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
      if (event.type !== "api_key.revoked") return;
      this.forgetKey(event.keyId);
      for (const handler of this.revocationHandlers) handler(event.keyId);
    });
  }

  /**
   * Calls `handler` with the id of each key revoked anywhere, once it has left this cache: the faces
   * end what the key still has open (graphql-ws sockets, SSE streams), on every replica.
   */
  onKeyRevoked(handler: (keyId: string) => void): () => void {
    this.revocationHandlers.add(handler);
    return () => this.revocationHandlers.delete(handler);
  }

  /** Drops a key from the cache: its next use reads the database again. */
  forgetKey(keyId: string): void {
    for (const [hash, entry] of this.keyCache) if (entry.record?.id === keyId) this.keyCache.delete(hash);
  }

  async authenticate(credentials: Credentials): Promise<Tenant> {
    if (credentials.apiKey) return this.fromApiKey(credentials.apiKey, credentials.tenantId ?? null);
    const bearer = /^Bearer\s+(\S+)$/i.exec(credentials.authorization ?? "")?.[1];
    if (bearer) return this.fromBearer(bearer, credentials.tenantId ?? null);
    throw unauthenticated("Not authenticated: send an X-Api-Key header or Authorization: Bearer <token>.");
  }

  private async fromApiKey(key: string, tenantId: string | null): Promise<Tenant> {
    const record = await this.keyRecord(hashApiKey(key));
    if (!record) throw unauthenticated("Invalid API key.");
    if (record.revokedAt) throw unauthenticated(REVOKED_KEY_MESSAGE);
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
    // A UUID in capitals names the same workspace: the tenant carries its one (lower-case) spelling.
    const workspaceId = claims.tenant_id.toLowerCase();
    if (tenantId && tenantId.toLowerCase() !== workspaceId) {
      throw forbidden("This token does not have access to the requested workspace.");
    }
    const organizationId = await this.workspaceOrganization(workspaceId);
    if (!organizationId) throw unauthenticated("The token's workspace does not exist.");
    return { organizationId, workspaceId, actor: `user:${claims.sub ?? "unknown"}` };
  }

  /** Key lookups are cached briefly: authentication runs on every request. */
  private async keyRecord(hash: string): Promise<KeyRecord | null> {
    const cached = this.keyCache.get(hash);
    if (cached && cached.until > Date.now()) return cached.record;
    const record = await this.prisma.apiKey.findUnique({
      where: { keyHash: hash },
      select: { id: true, organizationId: true, workspaceId: true, revokedAt: true },
    });
    if (this.keyCache.size >= CACHE_MAX) this.keyCache.clear();
    this.keyCache.set(hash, { record, until: Date.now() + KEY_CACHE_MS });
    return record;
  }

  private async workspaceOrganization(workspaceId: string): Promise<string | null> {
    if (!z.uuid().safeParse(workspaceId).success) return null;
    const id = workspaceId.toLowerCase();
    const cached = this.workspaceCache.get(id);
    if (cached && cached.until > Date.now()) return cached.organizationId;
    const ws = await this.prisma.workspace.findUnique({ where: { id }, select: { organizationId: true } });
    const organizationId = ws?.organizationId ?? null;
    if (this.workspaceCache.size >= CACHE_MAX) this.workspaceCache.clear();
    this.workspaceCache.set(id, { organizationId, until: Date.now() + KEY_CACHE_MS });
    return organizationId;
  }
}
