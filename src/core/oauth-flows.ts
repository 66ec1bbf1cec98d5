import { randomBytes } from "node:crypto";
import { calculatePKCECodeChallenge, randomPKCECodeVerifier } from "openid-client";
import type { OAuthFlow, OAuthProvider, OAuthToken } from "../generated/prisma/client.js";
import type { Authenticator, Tenant } from "./auth.js";
import type { CoreDeps } from "./context.js";
import { badRequest, CoreError, notFound } from "./errors.js";
import type { OAuthClient } from "./oauth-client.js";
import { EXCHANGE_GRACE_MS, ended, FlowStore, flowStatus, sha256 } from "./oauth-flow-store.js";
import { FlowWaits, type WaitResult } from "./oauth-flow-waits.js";
import type { SubscriptionQuota } from "./subscription-quota.js";
import { endpointsOf, grantEndpointsOf, type OAuthSettings, type ProviderService, redirectUri, stillAt } from "./oauth-providers.js";
import type { TokenVault } from "./oauth-tokens.js";
import { authenticateSchema, type CallbackQuery, callbackQuerySchema, finalizeSchema } from "./schemas/oauth.js";
import { violatedForeignKey } from "./prisma-errors.js";
import { parseInput } from "./validation.js";

export { type FlowStatus, flowStatus, type OAuthFlow } from "./oauth-flow-store.js";
export type { WaitResult } from "./oauth-flow-waits.js";

export interface AuthenticateResult {
  status: "completed" | "pending" | "token_expired";
  /** Where the user authorizes (pending, token_expired). */
  url: string | null;
  flow: OAuthFlow | null;
  /** The token handed out (completed) and its value in plain, for REST's answer to its owner. */
  token: OAuthToken | null;
  accessToken: string | null;
  userId: string;
}

export interface CallbackResult {
  flow: OAuthFlow;
  token: OAuthToken;
}

/** Flows are deleted a day after they expire. */
const KEEP_EXPIRED_MS = 24 * 3600_000;

/** The final write of an exchange found the flow no longer its own: the transaction that stored its token is undone. */
class ClaimLost extends Error {}
/** The provider was deleted while its code was exchanged (its flows went with it). */
class ProviderGone extends Error {}

/**
 * Authorization-code flows with PKCE. `authenticate` hands out the caller's token, refreshed if due,
 * or starts a flow: a random `state` (only its SHA-256 is stored; it is single use and expires with
 * the flow) and a PKCE verifier (sealed). The provider's callback, checked against the state, has
 * the code exchanged at the token endpoint and the tokens stored; waiters on any replica learn of it
 * through the event bus (FlowWaits). Flows are stored and ended by compare-and-set in FlowStore.
 */
export class FlowService {
  private readonly store: FlowStore;
  private readonly waits: FlowWaits;

  constructor(
    private readonly deps: CoreDeps,
    private readonly settings: OAuthSettings,
    private readonly client: OAuthClient,
    private readonly providers: ProviderService,
    private readonly vault: TokenVault,
    subscriptions: SubscriptionQuota,
    auth: Authenticator,
  ) {
    this.store = new FlowStore(deps);
    this.waits = new FlowWaits(deps, this.store, vault, subscriptions, auth);
  }

  async authenticate(tenant: Tenant, body: unknown, origin: string | null): Promise<AuthenticateResult> {
    const input = parseInput(authenticateSchema, body, "body");
    const userId = checkUser(tenant, input.user_id ?? input.ls_user_id ?? null);
    const provider = await this.providers.find(tenant, input.provider);
    if (!provider) throw notFound("Provider", input.provider, ["body", "provider"]);
    const scopes = [...new Set(input.scopes)];
    const existing = input.token_id
      ? await this.namedToken(tenant, provider, input.token_id)
      : input.force_new
        ? null
        : await this.vault.pick(tenant, provider, scopes);
    let expired = false;
    if (existing) {
      const accessToken = await this.vault.freshAccessToken(tenant, existing);
      if (accessToken !== null) return { status: "completed", url: null, flow: null, token: existing, accessToken, userId };
      // None to hand out: expired past refreshing, or deleted meanwhile, and then the caller has no
      // token to be told expired of (pending, as if it never had one).
      expired = (await this.vault.byIds(tenant, [existing.id]))[0] !== null;
    }
    const { flow, url } = await this.start(tenant, provider, scopes, input.is_default, origin);
    return { status: expired ? "token_expired" : "pending", url, flow, token: null, accessToken: null, userId };
  }

  /** The caller's token that `token_id` names, which must be one of the provider's. */
  private async namedToken(tenant: Tenant, provider: OAuthProvider, tokenId: string): Promise<OAuthToken> {
    const [token] = await this.vault.byIds(tenant, [tokenId]);
    if (!token || token.oauthProviderId !== provider.id) throw notFound("OAuth token", token?.id ?? tokenId, ["body", "token_id"]);
    return token;
  }

  /** GET /v2/auth/callback/{provider_id} (and …/setup/…): the browser's return; the state is its credential. */
  callback(providerId: string, query: unknown): Promise<CallbackResult> {
    return this.complete(providerId, parseInput(callbackQuerySchema, query, "query"), null);
  }

  /** POST /v2/auth/callback/{provider_id}: a client finalizes its own flow with the code and state it received. */
  finalize(tenant: Tenant, providerId: string, body: unknown): Promise<CallbackResult> {
    return this.complete(providerId, parseInput(finalizeSchema, body, "body"), tenant);
  }

  /** The caller's own flow, or null. */
  get(tenant: Tenant, flowId: string): Promise<OAuthFlow | null> {
    return this.store.get(tenant, flowId);
  }

  byIds(tenant: Tenant, ids: readonly string[]): Promise<(OAuthFlow | null)[]> {
    return this.store.byIds(tenant, ids);
  }

  /** GET /v2/auth/wait/{auth_id}?timeout=: see FlowWaits.wait. */
  wait(tenant: Tenant, authId: string, query: unknown, signal?: AbortSignal): Promise<WaitResult> {
    return this.waits.wait(tenant, authId, query, signal);
  }

  /** The flow as it is now, then each change, ending once it completed, failed or expired (subscriptions). */
  watch(tenant: Tenant, flowId: string): Promise<AsyncIterableIterator<OAuthFlow>> {
    return this.waits.watch(tenant, flowId);
  }

  /** Ends every wait in progress (the process is stopping); each answers with the flow as it is. */
  close(): void {
    this.waits.close();
  }

  private async start(tenant: Tenant, provider: OAuthProvider, scopes: string[], isDefault: boolean, origin: string | null) {
    const state = randomBytes(32).toString("base64url");
    const verifier = provider.usesPkce ? randomPKCECodeVerifier() : null;
    const redirect = redirectUri(this.settings, origin, provider.providerId);
    // Flows that ended long ago, of any workspace, are of no use to anyone: each new flow sweeps them.
    await this.deps.prisma.oAuthFlow.deleteMany({ where: { expiresAt: { lt: new Date(Date.now() - KEEP_EXPIRED_MS) } } });
    const flow = await this.deps
      .data(tenant)
      .oAuthFlow.create({
        data: {
          workspaceId: tenant.workspaceId,
          oauthProviderId: provider.id,
          owner: tenant.actor,
          stateHash: sha256(state),
          codeVerifier: verifier ? this.deps.secrets.seal(verifier) : null,
          redirectUri: redirect,
          scopes,
          isDefault,
          ...grantEndpointsOf(provider),
          status: "pending",
          expiresAt: new Date(Date.now() + this.settings.flowTtlSeconds * 1000),
        },
      })
      .catch((err: unknown) => {
        // The provider was deleted since authenticate read it (with its tokens, the one handed out too).
        if (violatedForeignKey(err) === "oauth_flows_oauth_provider_id_fkey") throw notFound("Provider", provider.providerId, ["body", "provider"]);
        throw err;
      });
    const method = provider.codeChallengeMethod === "plain" ? "plain" : "S256";
    const url = this.client.authorizationUrl(endpointsOf(this.deps.secrets, provider), {
      redirect_uri: redirect,
      state,
      ...(scopes.length > 0 && { scope: scopes.join(" ") }),
      ...(verifier && { code_challenge: method === "plain" ? verifier : await calculatePKCECodeChallenge(verifier), code_challenge_method: method }),
    });
    return { flow, url };
  }

  private async complete(providerId: string, query: Partial<CallbackQuery>, caller: Tenant | null): Promise<CallbackResult> {
    const found = query.state ? await this.store.byState(providerId, query.state, caller) : null;
    const now = Date.now();
    if (query.error) {
      const refusal = `the provider refused the authorization (${query.error}${query.error_description ? `: ${query.error_description}` : ""})`;
      // The refusal fails a flow still waiting for its callback. Once a callback has claimed it (its
      // code is being exchanged) or it has completed or failed, the state is used and that outcome
      // stands; a flow whose time ran out is left to say so.
      if (found && flowStatus(found.flow, now) !== "expired") {
        const failed = found.flow.status === "pending" && (await this.store.end(found.flow, "failed", refusal));
        if (!failed) throw alreadyUsed(found.flow);
      }
      throw badRequest(`Authorization failed: ${refusal}.`);
    }
    if (!query.code || !query.state) throw badRequest("The callback needs the code and state the provider sent back.");
    if (!found) throw badRequest("Unknown or already used state: this callback belongs to no authorization in progress. Start a new one with POST /v2/auth/authenticate.");
    const { flow, provider } = found;
    const status = flowStatus(flow, now);
    if (status === "expired") {
      await this.store.expire(flow);
      throw ended(flow, "expired");
    }
    // Single use: only the first callback with this state moves the flow on, and only in time.
    const claimed = await this.deps.prisma.oAuthFlow.updateMany({
      where: { id: flow.id, status: "pending", expiresAt: { gt: new Date(now) } },
      data: { status: "exchanging" },
    });
    if (status !== "pending" || claimed.count === 0) throw alreadyUsed(flow);
    const exchanging: OAuthFlow = { ...flow, status: "exchanging" };
    const tenant: Tenant = { organizationId: provider.organizationId, workspaceId: flow.workspaceId, actor: flow.owner };
    const callbackUrl = new URL(flow.redirectUri);
    for (const [k, v] of Object.entries({ code: query.code, state: query.state, iss: query.iss })) if (v) callbackUrl.searchParams.set(k, v);
    let tokens;
    try {
      // Its endpoints changed since the flow began (by anyone of the workspace): its code goes nowhere.
      if (!stillAt(provider, flow)) {
        throw badRequest("The provider's token or revocation endpoint changed since this authorization began: start a new one with POST /v2/auth/authenticate.");
      }
      tokens = await this.client.exchange(endpointsOf(this.deps.secrets, provider, flow), callbackUrl, {
        state: query.state,
        codeVerifier: flow.codeVerifier ? this.deps.secrets.open(flow.codeVerifier) : null,
        redirectUri: flow.redirectUri,
      });
    } catch (err) {
      await this.store.end(exchanging, "failed", err instanceof CoreError ? err.message : "the code exchange failed");
      throw err;
    }
    let result: CallbackResult;
    try {
      result = await this.deps.prisma.$transaction(async (tx) => {
        // The provider stays until this commits; deleted meanwhile, it took the flow with it.
        const live = await tx.$queryRaw<unknown[]>`SELECT id FROM oauth_providers WHERE id = ${provider.id}::uuid FOR KEY SHARE`;
        if (live.length === 0) throw new ProviderGone();
        const token = await this.vault.store(tx, tenant, provider, tokens, { requestedScopes: flow.scopes, isDefault: flow.isDefault, grant: flow });
        // Compare-and-set: the flow is completed only while this callback's claim stands and its time
        // (with the grace) has not run out; otherwise the token is not kept either.
        const [done] = await tx.oAuthFlow.updateManyAndReturn({
          where: { id: flow.id, status: "exchanging", expiresAt: { gt: new Date(Date.now() - EXCHANGE_GRACE_MS) } },
          data: { status: "completed", tokenId: token.id, message: "" },
        });
        if (!done) throw new ClaimLost();
        return { flow: done, token };
      });
    } catch (err) {
      // Nothing here keeps what the provider issued: it is revoked there.
      await this.vault.revoke([this.vault.issued(provider, flow, tokens)]);
      if (err instanceof ProviderGone) {
        throw badRequest(
          `The OAuth provider '${provider.providerId}' was deleted while the authorization code was exchanged: nothing was kept, and what it issued was revoked there.`,
        );
      }
      if (!(err instanceof ClaimLost)) throw err;
      // Only its time running out takes a flow from the callback exchanging its code.
      await this.store.expire(exchanging);
      throw ended(flow, "expired");
    }
    await this.store.publish(result.flow);
    return result;
  }
}

/** A callback for a flow another callback has already claimed, or that has ended. */
const alreadyUsed = (flow: OAuthFlow) =>
  badRequest(`Authorization ${flow.id} has already been used (state is single use): start a new one with POST /v2/auth/authenticate.`);

/**
 * Tokens are the caller's own: `user_id` (or `ls_user_id`) may name the caller, never someone else.
 * Answers the owner's id: a bearer token's subject, or the caller's actor.
 */
function checkUser(tenant: Tenant, userId: string | null): string {
  const own = tenant.actor.startsWith("user:") ? tenant.actor.slice("user:".length) : tenant.actor;
  if (userId !== null && userId !== own && userId !== tenant.actor) {
    throw new CoreError("FORBIDDEN", "user_id names another user: a token belongs to the caller who authorized it, and only that caller can use it.");
  }
  return own;
}
