import { setTimeout as sleep } from "node:timers/promises";
import pMap from "p-map";
import type { OAuthProvider, OAuthToken, Prisma } from "../generated/prisma/client.js";
import type { Tenant } from "./auth.js";
import type { CoreDeps } from "./context.js";
import { CoreError, notFound } from "./errors.js";
import { uuidsOnly, inOrder } from "./batch-reads.js";
import { type OAuthClient, PROVIDER_TIMEOUT_SECONDS, type TokenSet } from "./oauth-client.js";
import { endpointsOf, type GrantEndpoints, grantEndpointsOf, type OAuthSettings, stillAt } from "./oauth-providers.js";
import { type KeysetArgs, type KeysetPage, keysetPage, newestFirst } from "./pagination.js";
import { isRecordMissing } from "./prisma-errors.js";
import { tokenUpdateSchema } from "./schemas/oauth.js";
import { parseInput } from "./validation.js";

export type { OAuthToken };

/** A token is refreshed when it expires within this (on the read that hands it out). */
export const REFRESH_MARGIN_MS = 60_000;

/**
 * How long a replica's claim to refresh a token holds (freshAccessToken): its request to the provider
 * ends within PROVIDER_TIMEOUT_SECONDS, and storing the answer takes a moment more. A claim standing
 * longer is of a replica that stopped mid-refresh: another may take it over.
 */
export const REFRESH_CLAIM_MS = (PROVIDER_TIMEOUT_SECONDS + 5) * 1000;
/** How long a hand-out waits for another replica's refresh of its token: that claim's time, and some. */
const REFRESH_WAIT_MS = REFRESH_CLAIM_MS + 5_000;

/** Revocations at providers in flight at once, for one deletion. */
export const REVOCATION_CONCURRENCY = 8;
/**
 * How long a deletion starts revocations for: those in flight then go on (each within the client's
 * timeout), the rest are logged. Shorter than one request's timeout, so that a provider that never
 * answers holds a deletion this long, whatever the number of its tokens.
 */
export const REVOCATION_DEADLINE_MS = 5_000;

/** A token to revoke at its provider, forgotten here already: its value is opened only to send it. */
export interface Revocation {
  /** The stored token's id (for the log), or null for tokens that were never stored. */
  tokenId: string | null;
  provider: OAuthProvider;
  /** The endpoints the token began under: revoked only while the provider still has them (stillAt). */
  grant: GrantEndpoints;
  hint: "access_token" | "refresh_token";
  value: () => string;
}

/** What a connection copies of its token, kept in step when the token changes. */
const connectionFields = (t: Pick<OAuthToken, "providerAccountLabel" | "scopes" | "expiresAt">) => ({
  providerAccountLabel: t.providerAccountLabel,
  scopes: t.scopes,
  expiresAt: t.expiresAt,
});

/**
 * The token vault: access and refresh tokens sealed at rest (SecretBox), each token visible only to
 * its owner (the caller who authorized it, Tenant.actor) in its workspace. A token's value leaves
 * only through freshAccessToken (the authenticate and wait answers, to its owner), refreshed first
 * when it is about to expire; deleting revokes it at the provider where the provider can (RFC 7009).
 */
export class TokenVault {
  constructor(
    private readonly deps: CoreDeps,
    private readonly settings: OAuthSettings,
    private readonly client: OAuthClient,
  ) {}

  /** This process's refreshes in progress, by token id: the hand-outs that come meanwhile share one. */
  private readonly refreshing = new Map<string, Promise<string | null>>();

  /** The caller's own tokens. */
  private mine(tenant: Tenant) {
    return { owner: tenant.actor };
  }

  list(tenant: Tenant, providerId?: string): Promise<OAuthToken[]> {
    return this.deps.data(tenant).oAuthToken.findMany({ where: { ...this.mine(tenant), ...(providerId && { providerId }) }, orderBy: newestFirst });
  }

  keyset(tenant: Tenant, providerId: string | null, args: KeysetArgs): Promise<KeysetPage<OAuthToken>> {
    const where = { ...this.mine(tenant), ...(providerId && { providerId }) };
    return keysetPage(args, (q) => this.deps.data(tenant).oAuthToken.findMany({ where: { AND: [where, q.where] }, orderBy: q.orderBy, take: q.take }));
  }

  count(tenant: Tenant, providerId: string | null): Promise<number> {
    return this.deps.data(tenant).oAuthToken.count({ where: { ...this.mine(tenant), ...(providerId && { providerId }) } });
  }

  async byIds(tenant: Tenant, ids: readonly string[]): Promise<(OAuthToken | null)[]> {
    const rows = await this.deps.data(tenant).oAuthToken.findMany({ where: { ...this.mine(tenant), id: { in: uuidsOnly(ids) } } });
    return inOrder(ids, rows);
  }

  async get(tenant: Tenant, tokenId: string): Promise<OAuthToken> {
    const [token] = await this.byIds(tenant, [tokenId]);
    if (!token) throw notFound("OAuth token", tokenId);
    return token;
  }

  /** The caller's token for the provider that holds every scope asked: the default one first, then the newest. */
  async pick(tenant: Tenant, provider: OAuthProvider, scopes: string[]): Promise<OAuthToken | null> {
    const tokens = await this.deps.data(tenant).oAuthToken.findMany({
      where: { ...this.mine(tenant), oauthProviderId: provider.id },
      orderBy: [{ isDefault: "desc" }, ...newestFirst],
    });
    return tokens.find((t) => scopes.every((s) => t.scopes.includes(s))) ?? null;
  }

  /** PATCH …/metadata: the label and whether it is the default token of its provider. */
  async update(tenant: Tenant, tokenId: string, body: unknown): Promise<OAuthToken> {
    const input = parseInput(tokenUpdateSchema, body, "body");
    const token = await this.get(tenant, tokenId);
    try {
      return await this.deps.data(tenant).$transaction(async (tx) => {
        if (input.is_default === true) await this.clearDefault(tx, tenant, token.oauthProviderId);
        const updated = await tx.oAuthToken.update({
          where: { id: token.id },
          data: {
            ...(input.provider_account_label !== undefined && { providerAccountLabel: input.provider_account_label }),
            ...(input.is_default != null && { isDefault: input.is_default }),
          },
        });
        await tx.agentConnection.updateMany({ where: { oauthTokenId: token.id }, data: connectionFields(updated) });
        return updated;
      });
    } catch (err) {
      // Deleted by another request since it was read: gone, as get() would have said; nothing was changed.
      if (isRecordMissing(err)) throw notFound("OAuth token", tokenId);
      throw err;
    }
  }

  /** One token: 404 unless this request is the one that deleted it (two at once: take() gives it to one). */
  async delete(tenant: Tenant, tokenId: string): Promise<void> {
    const token = await this.get(tenant, tokenId);
    if ((await this.revokeAndDelete(tenant, { id: token.id, owner: tenant.actor })) === 0) throw notFound("OAuth token", tokenId);
  }

  /** DELETE /v2/auth/tokens?provider_id=: the caller's tokens of that provider. */
  async deleteForProvider(tenant: Tenant, providerId: string): Promise<number> {
    return this.revokeAndDelete(tenant, { owner: tenant.actor, providerId });
  }

  async exists(tenant: Tenant, providerId: string): Promise<boolean> {
    return (await this.deps.data(tenant).oAuthToken.count({ where: { ...this.mine(tenant), providerId }, take: 1 })) > 0;
  }

  /** The workspace-wide Slack pair: anyone's tokens of a provider of type slack. */
  async slackExists(tenant: Tenant): Promise<boolean> {
    return (await this.deps.data(tenant).oAuthToken.count({ where: slackTokens, take: 1 })) > 0;
  }

  revokeSlack(tenant: Tenant): Promise<number> {
    return this.revokeAndDelete(tenant, slackTokens);
  }

  /**
   * Keeps what a provider's token endpoint answered, for the owner; `isDefault` makes it the one
   * picked first. The token keeps the provider's endpoints of now (store: a flow's).
   */
  save(tenant: Tenant, provider: OAuthProvider, tokens: TokenSet, options: { requestedScopes: string[]; isDefault: boolean }): Promise<OAuthToken> {
    return this.deps.data(tenant).$transaction((tx) => this.store(tx, tenant, provider, tokens, { ...options, grant: grantEndpointsOf(provider) }));
  }

  /** save(), inside the caller's transaction. */
  async store(
    tx: Prisma.TransactionClient,
    tenant: Tenant,
    provider: OAuthProvider,
    tokens: TokenSet,
    options: { requestedScopes: string[]; isDefault: boolean; grant: GrantEndpoints },
  ): Promise<OAuthToken> {
    if (options.isDefault) await this.clearDefault(tx, tenant, provider.id);
    return tx.oAuthToken.create({
      data: {
        workspaceId: tenant.workspaceId,
        oauthProviderId: provider.id,
        providerId: provider.providerId,
        owner: tenant.actor,
        accessToken: this.deps.secrets.seal(tokens.accessToken),
        refreshToken: tokens.refreshToken ? this.deps.secrets.seal(tokens.refreshToken) : null,
        tokenType: tokens.tokenType,
        scopes: tokens.scopes ?? options.requestedScopes,
        expiresAt: tokens.expiresAt,
        providerAccountLabel: tokens.accountLabel,
        isDefault: options.isDefault,
        tokenUrl: options.grant.tokenUrl,
        revocationUrl: options.grant.revocationUrl,
        issuer: options.grant.issuer,
      },
    });
  }

  /**
   * The token's access token in plain, for its owner: refreshed first when it expires within
   * REFRESH_MARGIN_MS and a refresh token is held. Null when it has expired and cannot be refreshed
   * (the provider refused the refresh token, or there is none): the user must authorize again; null
   * too when the token (or its provider, and the token with it) was deleted meanwhile.
   *
   * One refresh per token at a time, across replicas: providers rotate refresh tokens, and take one
   * sent twice for a stolen one (reuse), revoking the whole grant. In this process the hand-outs of a
   * token share its refresh in progress; across replicas only the one that claims the token
   * (refresh_claimed_until) sends its refresh token, and the others hand out what it stored.
   */
  async freshAccessToken(tenant: Tenant, token: OAuthToken): Promise<string | null> {
    if (!token.expiresAt || token.expiresAt.getTime() - Date.now() > REFRESH_MARGIN_MS) return this.deps.secrets.open(token.accessToken);
    if (!token.refreshToken) return expired(token) ? null : this.deps.secrets.open(token.accessToken);
    let refresh = this.refreshing.get(token.id);
    if (!refresh) {
      const started = this.refreshOnce(tenant, token).finally(() => {
        if (this.refreshing.get(token.id) === started) this.refreshing.delete(token.id);
      });
      this.refreshing.set(token.id, started);
      refresh = started;
    }
    return refresh;
  }

  /**
   * freshAccessToken's refresh, once across replicas: claims the token (claimRefresh) and refreshes
   * it; or, while another replica's claim stands, re-reads the token until that refresh is stored
   * (and hands out its result) or the claim is given up or runs out (and claims it then). No
   * transaction is open while the provider is called.
   */
  private async refreshOnce(tenant: Tenant, token: OAuthToken): Promise<string | null> {
    const open = (t: OAuthToken) => this.deps.secrets.open(t.accessToken);
    const provider = await this.deps.data(tenant).oAuthProvider.findUnique({ where: { id: token.oauthProviderId } });
    // Deleted since the token was read, and so the token with it: as if there were no token.
    if (!provider) return null;
    // Its endpoints changed since the token was issued (by anyone of the workspace): its refresh
    // token goes nowhere, and the user authorizes again once the access token expires.
    if (!stillAt(provider, token)) return expired(token) ? null : open(token);
    // Whether the stored access token is another than the one read (sealed anew is the same one).
    const replaced = (now: OAuthToken) => {
      if (now.accessToken === token.accessToken) return false;
      const before = this.opened(token.accessToken);
      return before === null || !this.opensTo(now.accessToken, before);
    };
    const deadline = Date.now() + REFRESH_WAIT_MS;
    let seen = token;
    for (let pause = 20; ; pause = Math.min(pause * 2, 200)) {
      const claim = await this.claimRefresh(tenant, seen);
      if (claim) return this.refreshClaimed(tenant, provider, seen, claim);
      const now = await this.deps.data(tenant).oAuthToken.findUnique({ where: { id: token.id } });
      if (!now) return null;
      // Refreshed by another replica meanwhile: its result is this hand-out's too.
      if (replaced(now) && !expired(now)) return open(now);
      if (!now.refreshToken) return expired(now) ? null : open(now);
      if (Date.now() >= deadline) {
        // The refresh another replica claimed neither ended nor gave up in time.
        if (!expired(now)) return open(now);
        throw new CoreError("UNAVAILABLE", "The OAuth token is being refreshed and the refresh did not end in time; retry shortly.");
      }
      // Sealed anew (`npm run secrets:rotate`), or refreshed and expired already: claim it as it is now.
      if (now.accessToken !== seen.accessToken || now.refreshToken !== seen.refreshToken) {
        seen = now;
        continue;
      }
      // Another replica's claim stands: its refresh is at the provider.
      await sleep(pause);
    }
  }

  /**
   * Claims the right to refresh the token as read (compare-and-set, on the database's clock): only
   * while no other claim stands and the token has not changed since. The claim's end, or null.
   */
  private async claimRefresh(tenant: Tenant, token: OAuthToken): Promise<Date | null> {
    const [claimed] = await this.deps.data(tenant).$queryRaw<{ until: Date }[]>`
      UPDATE oauth_tokens SET refresh_claimed_until = now() + ${`${REFRESH_CLAIM_MS} milliseconds`}::interval
      WHERE id = ${token.id}::uuid AND workspace_id = ${tenant.workspaceId}::uuid
        AND access_token = ${token.accessToken} AND refresh_token = ${token.refreshToken}
        AND (refresh_claimed_until IS NULL OR refresh_claimed_until <= now())
      RETURNING refresh_claimed_until AS until`;
    return claimed?.until ?? null;
  }

  /** The refresh of a token this hand-out has claimed: at the provider, then stored (which ends the claim). */
  private async refreshClaimed(tenant: Tenant, provider: OAuthProvider, token: OAuthToken, claim: Date): Promise<string | null> {
    const open = (t: OAuthToken) => this.deps.secrets.open(t.accessToken);
    const refreshToken = this.deps.secrets.open(token.refreshToken!);
    let refreshed: TokenSet;
    try {
      refreshed = await this.client.refresh(endpointsOf(this.deps.secrets, provider, token), refreshToken);
    } catch (err) {
      // Given up: another hand-out may try. (Should this fail, the claim runs out by itself.)
      await this.deps
        .data(tenant)
        .oAuthToken.updateMany({ where: { id: token.id, refreshClaimedUntil: claim }, data: { refreshClaimedUntil: null } })
        .catch(() => {});
      // Another replica may have refreshed it a moment ago (and, with rotation, spent the old refresh token).
      const now = await this.deps.data(tenant).oAuthToken.findUnique({ where: { id: token.id } });
      if (!now) return null;
      if (now.refreshToken !== token.refreshToken && !expired(now)) return open(now);
      if (!expired(token)) return open(token);
      if (err instanceof CoreError && err.code === "BAD_REQUEST") return null;
      throw err;
    }
    // Compare-and-set on the refresh token read: a concurrent refresh that landed first wins (one
    // that took over this claim after it ran out). Storing ends the claim.
    const data = {
      accessToken: this.deps.secrets.seal(refreshed.accessToken),
      ...(refreshed.refreshToken && { refreshToken: this.deps.secrets.seal(refreshed.refreshToken) }),
      tokenType: refreshed.tokenType,
      expiresAt: refreshed.expiresAt,
      ...(refreshed.scopes && { scopes: refreshed.scopes }),
      refreshClaimedUntil: null,
    };
    const updated = await this.deps.data(tenant).$transaction(async (tx) => {
      let { count } = await tx.oAuthToken.updateMany({ where: { id: token.id, refreshToken: token.refreshToken }, data });
      let row = await tx.oAuthToken.findUnique({ where: { id: token.id } });
      // The same refresh token sealed anew (`npm run secrets:rotate` ran meanwhile) is no concurrent
      // refresh: this one still replaces it, or the provider's new tokens would be lost.
      if (count === 0 && row?.refreshToken && this.opensTo(row.refreshToken, refreshToken)) {
        ({ count } = await tx.oAuthToken.updateMany({ where: { id: token.id, refreshToken: row.refreshToken }, data }));
        row = await tx.oAuthToken.findUnique({ where: { id: token.id } });
      }
      if (count > 0 && row) await tx.agentConnection.updateMany({ where: { oauthTokenId: token.id }, data: connectionFields(row) });
      return row;
    });
    if (updated) return open(updated);
    // The token was deleted while the provider refreshed it: nothing here keeps what it issued.
    await this.revoke([this.issued(provider, token, refreshed)]);
    return null;
  }

  /**
   * Forgets the workspace's tokens that `where` selects, and the agent connections that use them, then
   * revokes them at their providers (revoke()). Forgotten first: a provider that is slow or down
   * delays the answer by at most REVOCATION_DEADLINE_MS and keeps nothing alive here.
   */
  async revokeAndDelete(tenant: Tenant, where: Prisma.OAuthTokenWhereInput): Promise<number> {
    const taken = await this.deps.data(tenant).$transaction((tx) => this.take(tx, where));
    await this.revoke(taken);
    return taken.length;
  }

  /** Deletes the tokens `where` selects and their connections, in the caller's transaction; answers what revoke() needs once it commits. */
  async take(tx: Prisma.TransactionClient, where: Prisma.OAuthTokenWhereInput): Promise<Revocation[]> {
    const found = await tx.oAuthToken.findMany({ where, include: { provider: true } });
    if (found.length === 0) return [];
    const ids = found.map((t) => t.id);
    await tx.agentConnection.deleteMany({ where: { oauthTokenId: { in: ids } } });
    // Only what this transaction deleted: another deletion that read the same tokens and deleted
    // them first is waited for, and what it took is its own to count and revoke.
    const deleted = await tx.$queryRaw<{ id: string }[]>`DELETE FROM oauth_tokens WHERE id = ANY(${ids}::uuid[]) RETURNING id::text AS id`;
    const mine = new Set(deleted.map((row) => row.id));
    return found.filter((token) => mine.has(token.id)).map((token) => {
      const [sealed, hint] = token.refreshToken ? [token.refreshToken, "refresh_token" as const] : [token.accessToken, "access_token" as const];
      return { tokenId: token.id, provider: token.provider, grant: token, hint, value: () => this.deps.secrets.open(sealed) };
    });
  }

  /** What a token endpoint issued that nothing here keeps (its flow ended while the code was exchanged), as revoke() takes it. */
  issued(provider: OAuthProvider, grant: GrantEndpoints, tokens: TokenSet): Revocation {
    const [value, hint] = tokens.refreshToken ? [tokens.refreshToken, "refresh_token" as const] : [tokens.accessToken, "access_token" as const];
    return { tokenId: null, provider, grant, hint, value: () => value };
  }

  /**
   * Revokes tokens at their providers (RFC 7009: the refresh token, which ends the grant, else the
   * access token), REVOCATION_CONCURRENCY at a time, starting none after REVOCATION_DEADLINE_MS. A
   * provider that cannot revoke (no endpoint, down, too slow) is logged, never an error: the tokens
   * are already forgotten here.
   */
  async revoke(revocations: Revocation[]): Promise<void> {
    if (revocations.length === 0) return;
    const deadline = AbortSignal.timeout(REVOCATION_DEADLINE_MS);
    const started = new Set<Revocation>();
    const ended = new Set<Revocation>();
    const revokeOne = async (r: Revocation) => {
      started.add(r);
      await this.revokeOne(r);
      ended.add(r);
    };
    try {
      await pMap(revocations, revokeOne, { concurrency: REVOCATION_CONCURRENCY, signal: deadline });
    } catch (err) {
      if (!deadline.aborted) throw err;
      // Those still waiting for their provider go on (each logs how it ends); the others are not sent.
      const left = revocations.filter((r) => !ended.has(r));
      const unsent = left.filter((r) => !started.has(r)).length;
      this.settings.logger.warn(
        { token_ids: left.map((r) => r.tokenId), provider_ids: [...new Set(left.map((r) => r.provider.providerId))], unsent },
        `oauth: ${left.length} token(s) not revoked at their providers in time (${unsent} not sent, ${left.length - unsent} still waiting for an answer); they are forgotten all the same`,
      );
    }
  }

  private async revokeOne({ tokenId, provider, grant, hint, value }: Revocation): Promise<void> {
    const about = { token_id: tokenId, provider_id: provider.providerId };
    if (!stillAt(provider, grant)) {
      this.settings.logger.warn(about, "oauth: the provider's endpoints changed since the token was issued; the token is only forgotten");
      return;
    }
    try {
      const revoked = await this.client.revoke(endpointsOf(this.deps.secrets, provider, grant), value(), hint);
      if (!revoked) this.settings.logger.info(about, "oauth: the provider has no revocation endpoint; the token is only forgotten");
    } catch (err) {
      this.settings.logger.warn({ ...about, reason: err instanceof Error ? err.message : "unknown" }, "oauth: could not revoke a token at its provider; it is forgotten all the same");
    }
  }

  /** The plain value of `sealed`, or null if no configured key opens it. */
  private opened(sealed: string): string | null {
    try {
      return this.deps.secrets.open(sealed);
    } catch {
      return null;
    }
  }

  /** Whether `sealed` holds `plain` (false if no configured key opens it). */
  private opensTo(sealed: string, plain: string): boolean {
    try {
      return this.deps.secrets.open(sealed) === plain;
    } catch {
      return false;
    }
  }

  private async clearDefault(tx: Prisma.TransactionClient, tenant: Tenant, oauthProviderId: string) {
    await tx.oAuthToken.updateMany({ where: { ...this.mine(tenant), oauthProviderId, isDefault: true }, data: { isDefault: false } });
  }
}

const slackTokens: Prisma.OAuthTokenWhereInput = { provider: { providerType: "slack" } };

/** Whether the token's access token has expired (not only due for its refresh). */
const expired = (t: OAuthToken) => t.expiresAt !== null && t.expiresAt.getTime() <= Date.now();
