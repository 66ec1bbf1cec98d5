import { createHash, randomBytes } from "node:crypto";
import { calculatePKCECodeChallenge, randomPKCECodeVerifier } from "openid-client";
import { topics } from "../events/types.js";
import type { OAuthFlow, OAuthProvider, OAuthToken } from "../generated/prisma/client.js";
import type { Tenant } from "./auth.js";
import type { CoreDeps } from "./context.js";
import { badRequest, CoreError, notFound } from "./errors.js";
import { Channel, Wakeup, wakeOn } from "./feeds.js";
import { inOrder, uuidsOnly } from "./batch-reads.js";
import { type OAuthClient, PROVIDER_TIMEOUT_SECONDS } from "./oauth-client.js";
import { endpointsOf, type OAuthSettings, type ProviderService, redirectUri } from "./oauth-providers.js";
import type { TokenVault } from "./oauth-tokens.js";
import { authenticateSchema, type CallbackQuery, callbackQuerySchema, finalizeSchema, waitQuerySchema } from "./schemas/oauth.js";
import { parseInput } from "./validation.js";

export type { OAuthFlow };

/** A flow as its owner sees it: `expired` once its time ran out before the provider called back. */
export type FlowStatus = "pending" | "completed" | "failed" | "expired";

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

export interface WaitResult {
  status: "completed" | "pending" | "timeout" | "not_found";
  accessToken: string | null;
}

const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");
/** How often a waiter re-reads its flow with no event (a NOTIFY that failed; the bus's resync covers a reconnect). */
const RECHECK_MS = 5_000;
/** Flows are deleted a day after they expire. */
const KEEP_EXPIRED_MS = 24 * 3600_000;
/**
 * How long past its expiry a flow whose code is at the token endpoint (stored `exchanging`) still
 * counts as pending: its callback came in time, so the exchange decides. That exchange is one request
 * of at most PROVIDER_TIMEOUT_SECONDS, and storing its answer takes a moment more. A flow still
 * exchanging after that (its process died mid-exchange) has expired, and an exchange that ends later
 * stores nothing.
 */
const EXCHANGE_GRACE_MS = (PROVIDER_TIMEOUT_SECONDS + 5) * 1000;

/** When a flow that has not ended expires: its expiry, or, while its code is exchanged, that plus the grace. */
const expiryOf = (flow: OAuthFlow) => flow.expiresAt.getTime() + (flow.status === "exchanging" ? EXCHANGE_GRACE_MS : 0);

export function flowStatus(flow: OAuthFlow, now = Date.now()): FlowStatus {
  if (flow.status === "completed" || flow.status === "failed" || flow.status === "expired") return flow.status;
  return expiryOf(flow) <= now ? "expired" : "pending";
}

/** The final write of an exchange found the flow no longer its own: the transaction that stored its token is undone. */
class ClaimLost extends Error {}

const isDone = (flow: OAuthFlow) => flowStatus(flow) !== "pending";

/**
 * Authorization-code flows with PKCE. `authenticate` hands out the caller's token, refreshed if due,
 * or starts a flow: a random `state` (only its SHA-256 is stored; it is single use and expires with
 * the flow) and a PKCE verifier (sealed). The provider's callback, checked against the state, has
 * the code exchanged at the token endpoint and the tokens stored; waiters on any replica learn of it
 * through the event bus.
 */
export class FlowService {
  /** Aborted when the service stops: long-polls answer at once instead of holding the shutdown. */
  private readonly stopping = new AbortController();

  constructor(
    private readonly deps: CoreDeps,
    private readonly settings: OAuthSettings,
    private readonly client: OAuthClient,
    private readonly providers: ProviderService,
    private readonly vault: TokenVault,
  ) {}

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
    if (existing) {
      const accessToken = await this.vault.freshAccessToken(tenant, existing);
      if (accessToken !== null) return { status: "completed", url: null, flow: null, token: existing, accessToken, userId };
    }
    const { flow, url } = await this.start(tenant, provider, scopes, input.is_default, origin);
    return { status: existing ? "token_expired" : "pending", url, flow, token: null, accessToken: null, userId };
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
  async get(tenant: Tenant, flowId: string): Promise<OAuthFlow | null> {
    return (await this.byIds(tenant, [flowId]))[0] ?? null;
  }

  async byIds(tenant: Tenant, ids: readonly string[]): Promise<(OAuthFlow | null)[]> {
    const rows = await this.deps.data(tenant).oAuthFlow.findMany({ where: { owner: tenant.actor, id: { in: uuidsOnly(ids) } } });
    return inOrder(ids, rows);
  }

  /**
   * GET /v2/auth/wait/{auth_id}?timeout=: answers as soon as the caller's flow completes (with its
   * token), or after `timeout` seconds (at most MAX_WAIT_SECONDS) with `timeout`. A flow that failed
   * or expired is a 400 saying why; another caller's flow, or none, is `not_found`.
   */
  async wait(tenant: Tenant, authId: string, query: unknown, signal?: AbortSignal): Promise<WaitResult> {
    const { timeout } = parseInput(waitQuerySchema, query, "query");
    const deadline = Date.now() + timeout * 1000;
    const wakeup = new Wakeup(RECHECK_MS);
    // Each wake-up reads the flow: a notification lost while the bus reconnected is covered by its resync.
    const unsubscribe = wakeOn(this.deps.events, topics.oauthFlow(authId.toLowerCase()), tenant.workspaceId, wakeup);
    const signals = [this.stopping.signal, ...(signal ? [signal] : [])];
    const aborted = new Promise<void>((resolve) => {
      for (const s of signals) s.addEventListener("abort", () => resolve(), { once: true });
    });
    try {
      for (;;) {
        const flow = await this.get(tenant, authId);
        if (!flow) return { status: "not_found", accessToken: null };
        const status = flowStatus(flow);
        if (status === "completed") return { status, accessToken: await this.tokenOf(tenant, flow) };
        // Stored as expired before the waiter is told so: an exchange still running cannot complete it after.
        if (status === "expired" && !(await this.expire(flow))) continue;
        if (status !== "pending") throw ended(flow, status);
        const left = Math.min(deadline, expiryOf(flow)) - Date.now();
        if (left <= 0) return { status: timeout === 0 ? "pending" : "timeout", accessToken: null };
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([wakeup.wait(), aborted, new Promise<void>((resolve) => (timer = setTimeout(resolve, left)))]);
        clearTimeout(timer);
        // Stopping (or the client left): answer now, without another read of a database that may be closing.
        if (signals.some((s) => s.aborted)) return { status: timeout === 0 ? "pending" : "timeout", accessToken: null };
      }
    } finally {
      unsubscribe();
    }
  }

  /** Ends every wait in progress (the process is stopping); each answers with the flow as it is. */
  close(): void {
    this.stopping.abort();
  }

  /** The flow as it is now, then each change, ending once it completed, failed or expired (subscriptions). */
  async watch(tenant: Tenant, flowId: string): Promise<AsyncIterableIterator<OAuthFlow>> {
    const id = flowId.toLowerCase();
    const wakeup = new Wakeup(RECHECK_MS);
    const unsubscribe = wakeOn(this.deps.events, topics.oauthFlow(id), tenant.workspaceId, wakeup);
    const first = await this.settled(tenant, id).catch((err: unknown) => {
      unsubscribe();
      throw err;
    });
    if (!first) {
      unsubscribe();
      throw notFound("Authorization", flowId);
    }
    const channel = new Channel<OAuthFlow>(unsubscribe);
    channel.push(first);
    if (isDone(first)) channel.end();
    else void this.follow(tenant, first, wakeup, channel);
    return channel;
  }

  private async follow(tenant: Tenant, first: OAuthFlow, wakeup: Wakeup, channel: Channel<OAuthFlow>) {
    let last = flowStatus(first);
    let seen = first;
    try {
      while (!channel.closed) {
        const left = expiryOf(seen) - Date.now();
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([wakeup.wait(), new Promise<void>((resolve) => (timer = setTimeout(resolve, Math.max(left, 0) + 10)))]);
        clearTimeout(timer);
        if (channel.closed) return;
        const flow = await this.settled(tenant, first.id);
        if (!flow) return channel.end();
        seen = flow;
        const status = flowStatus(flow);
        if (status === last) continue;
        last = status;
        channel.push(flow);
        if (status !== "pending") return channel.end();
      }
    } catch (err) {
      channel.end(err);
    }
  }

  /** The caller's flow (or null), stored as expired first if its time ran out (see `expire`). */
  private async settled(tenant: Tenant, flowId: string): Promise<OAuthFlow | null> {
    for (;;) {
      const flow = await this.get(tenant, flowId);
      if (!flow || flowStatus(flow) !== "expired") return flow;
      if (await this.expire(flow)) return { ...flow, status: "expired" };
    }
  }

  /**
   * Stores a flow whose time ran out as expired, unless it changed since it was read (false: read it
   * again). Whoever reports a flow expired stores it so first: an exchange of its code that is still
   * running then finds it no longer its own and stores nothing.
   */
  private async expire(flow: OAuthFlow): Promise<boolean> {
    if (flow.status === "expired") return true;
    const why = flow.status === "exchanging" ? "the code exchange did not end in time" : "the authorization expired before the provider called back";
    return this.end(flow, "expired", why);
  }

  private async start(tenant: Tenant, provider: OAuthProvider, scopes: string[], isDefault: boolean, origin: string | null) {
    const state = randomBytes(32).toString("base64url");
    const verifier = provider.usesPkce ? randomPKCECodeVerifier() : null;
    const redirect = redirectUri(this.settings, origin, provider.providerId);
    // Flows that ended long ago, of any workspace, are of no use to anyone: each new flow sweeps them.
    await this.deps.prisma.oAuthFlow.deleteMany({ where: { expiresAt: { lt: new Date(Date.now() - KEEP_EXPIRED_MS) } } });
    const flow = await this.deps.data(tenant).oAuthFlow.create({
      data: {
        workspaceId: tenant.workspaceId,
        oauthProviderId: provider.id,
        owner: tenant.actor,
        stateHash: sha256(state),
        codeVerifier: verifier ? this.deps.secrets.seal(verifier) : null,
        redirectUri: redirect,
        scopes,
        isDefault,
        status: "pending",
        expiresAt: new Date(Date.now() + this.settings.flowTtlSeconds * 1000),
      },
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
    const found = query.state ? await this.byState(providerId, query.state, caller) : null;
    const now = Date.now();
    if (query.error) {
      const refusal = `the provider refused the authorization (${query.error}${query.error_description ? `: ${query.error_description}` : ""})`;
      // The refusal fails a flow still waiting for its callback. Once a callback has claimed it (its
      // code is being exchanged) or it has completed or failed, the state is used and that outcome
      // stands; a flow whose time ran out is left to say so.
      if (found && flowStatus(found.flow, now) !== "expired") {
        const failed = found.flow.status === "pending" && (await this.end(found.flow, "failed", refusal));
        if (!failed) throw alreadyUsed(found.flow);
      }
      throw badRequest(`Authorization failed: ${refusal}.`);
    }
    if (!query.code || !query.state) throw badRequest("The callback needs the code and state the provider sent back.");
    if (!found) throw badRequest("Unknown or already used state: this callback belongs to no authorization in progress. Start a new one with POST /v2/auth/authenticate.");
    const { flow, provider } = found;
    const status = flowStatus(flow, now);
    if (status === "expired") {
      await this.expire(flow);
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
      tokens = await this.client.exchange(endpointsOf(this.deps.secrets, provider), callbackUrl, {
        state: query.state,
        codeVerifier: flow.codeVerifier ? this.deps.secrets.open(flow.codeVerifier) : null,
        redirectUri: flow.redirectUri,
      });
    } catch (err) {
      await this.end(exchanging, "failed", err instanceof CoreError ? err.message : "the code exchange failed");
      throw err;
    }
    let result: CallbackResult;
    try {
      result = await this.deps.prisma.$transaction(async (tx) => {
        const token = await this.vault.store(tx, tenant, provider, tokens, { requestedScopes: flow.scopes, isDefault: flow.isDefault });
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
      if (!(err instanceof ClaimLost)) throw err;
      // Only its time running out takes a flow from the callback exchanging its code.
      await this.expire(exchanging);
      throw ended(flow, "expired");
    }
    await this.publish(result.flow);
    return result;
  }

  /** The flow a state belongs to, for this provider (and, when finalized through the API, this caller). */
  private async byState(providerId: string, state: string, caller: Tenant | null) {
    const flow = await this.deps.prisma.oAuthFlow.findUnique({ where: { stateHash: sha256(state) }, include: { provider: true } });
    if (!flow || flow.provider.providerId !== providerId) return null;
    if (caller && (caller.workspaceId !== flow.workspaceId || caller.actor !== flow.owner)) return null;
    const { provider, ...row } = flow;
    return { flow: row as OAuthFlow, provider };
  }

  /**
   * Ends a flow that has not ended, as failed or expired: a compare-and-set from the status it was read
   * with (`flow.status`), so that whoever changed it since wins. Whether this call ended it.
   */
  private async end(flow: OAuthFlow, status: "failed" | "expired", message: string): Promise<boolean> {
    if (flow.status !== "pending" && flow.status !== "exchanging") return false;
    const { count } = await this.deps.prisma.oAuthFlow.updateMany({ where: { id: flow.id, status: flow.status }, data: { status, message } });
    if (count > 0) await this.publish({ ...flow, status });
    return count > 0;
  }

  private publish(flow: Pick<OAuthFlow, "id" | "workspaceId" | "status">) {
    return this.deps.events.publish({ type: "oauth.flow", workspaceId: flow.workspaceId, flowId: flow.id, status: flow.status });
  }

  private async tokenOf(tenant: Tenant, flow: OAuthFlow): Promise<string | null> {
    if (!flow.tokenId) return null;
    const [token] = await this.vault.byIds(tenant, [flow.tokenId]);
    return token ? this.vault.freshAccessToken(tenant, token) : null;
  }
}

/** A callback for a flow another callback has already claimed, or that has ended. */
const alreadyUsed = (flow: OAuthFlow) =>
  badRequest(`Authorization ${flow.id} has already been used (state is single use): start a new one with POST /v2/auth/authenticate.`);

/** A failed or expired flow, as the 400 that says so. */
function ended(flow: OAuthFlow, status: FlowStatus): CoreError {
  return status === "expired"
    ? badRequest(`Authorization ${flow.id} expired at ${flow.expiresAt.toISOString()}: start a new one with POST /v2/auth/authenticate.`)
    : badRequest(`Authorization ${flow.id} failed: ${flow.message || "the provider did not complete it"}. Start a new one with POST /v2/auth/authenticate.`);
}

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
