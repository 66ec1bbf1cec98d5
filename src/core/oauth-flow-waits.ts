import { topics } from "../events/types.js";
import { type Authenticator, REVOKED_KEY_MESSAGE, type Tenant } from "./auth.js";
import { EXPIRED_TOKEN_MESSAGE, whenExpired } from "./credential-expiry.js";
import type { CoreDeps } from "./context.js";
import { CoreError, notFound } from "./errors.js";
import { Channel, Wakeup, wakeOn } from "./feeds.js";
import { ended, expiryOf, type FlowStore, flowStatus, isDone, type OAuthFlow } from "./oauth-flow-store.js";
import type { TokenVault } from "./oauth-tokens.js";
import type { SubscriptionQuota } from "./subscription-quota.js";
import { waitQuerySchema } from "./schemas/oauth.js";
import { parseInput } from "./validation.js";

export interface WaitResult {
  status: "completed" | "pending" | "timeout" | "not_found";
  accessToken: string | null;
}

/** How often a waiter re-reads its flow with no event (a NOTIFY that failed; the bus's resync covers a reconnect). */
const RECHECK_MS = 5_000;

/**
 * Waiting for a flow to end, on whichever replica its callback lands: REST's long-poll (`wait`) and
 * GraphQL's subscription (`watch`). Each wake-up, by the bus or by the re-check, reads the flow; one
 * whose time ran out is stored as expired before anyone is told so.
 */
export class FlowWaits {
  /** Aborted when the service stops: long-polls answer at once instead of holding the shutdown. */
  private readonly stopping = new AbortController();

  constructor(
    private readonly deps: CoreDeps,
    private readonly store: FlowStore,
    private readonly vault: TokenVault,
    private readonly subscriptions: SubscriptionQuota,
    private readonly auth: Authenticator,
  ) {}

  /**
   * GET /v2/auth/wait/{auth_id}?timeout=: answers as soon as the caller's flow completes (with its
   * token), or after `timeout` seconds (at most MAX_WAIT_SECONDS) with `timeout`. A flow that failed
   * or expired is a 400 saying why; another caller's flow, or none, is `not_found`. The caller's
   * credentials are held to the end: a key revoked or a bearer token expired meanwhile ends the wait
   * at once with 401, as it ends the caller's streams, and no token is handed out past it.
   */
  async wait(tenant: Tenant, authId: string, query: unknown, signal?: AbortSignal): Promise<WaitResult> {
    const { timeout } = parseInput(waitQuerySchema, query, "query");
    const deadline = Date.now() + timeout * 1000;
    const wakeup = new Wakeup(RECHECK_MS);
    // Each wake-up reads the flow: a notification lost while the bus reconnected is covered by its resync.
    const offFlow = wakeOn(this.deps.events, topics.oauthFlow(authId.toLowerCase()), tenant.workspaceId, wakeup);
    const offRevoked = this.auth.onKeyRevoked(wakeup.ring);
    const offExpired = whenExpired(tenant, wakeup.ring);
    const unsubscribe = () => {
      offFlow();
      offRevoked();
      offExpired();
    };
    const signals = [this.stopping.signal, ...(signal ? [signal] : [])];
    let onAbort!: () => void;
    const aborted = new Promise<void>((resolve) => {
      onAbort = () => resolve();
      for (const s of signals) s.addEventListener("abort", onAbort, { once: true });
    });
    try {
      for (;;) {
        this.stillAdmitted(tenant);
        const flow = await this.store.get(tenant, authId);
        if (!flow) return { status: "not_found", accessToken: null };
        const status = flowStatus(flow);
        if (status === "completed") {
          const accessToken = await this.tokenOf(tenant, flow);
          // A refresh may have taken a while: revoked or expired meanwhile, the token stays here.
          this.stillAdmitted(tenant);
          return { status, accessToken };
        }
        // Stored as expired before the waiter is told so: an exchange still running cannot complete it after.
        if (status === "expired" && !(await this.store.expire(flow))) continue;
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
      // The stop signal lives as long as the process: a listener left on it would keep this wait for good.
      for (const s of signals) s.removeEventListener("abort", onAbort);
    }
  }

  /** Throws UNAUTHENTICATED once the caller's key has been revoked (as handled here) or its bearer token has expired. */
  private stillAdmitted(tenant: Tenant): void {
    if (!this.auth.stillAdmitted(tenant.actor)) throw new CoreError("UNAUTHENTICATED", REVOKED_KEY_MESSAGE);
    if (tenant.expiresAt !== undefined && tenant.expiresAt <= Date.now()) throw new CoreError("UNAUTHENTICATED", EXPIRED_TOKEN_MESSAGE);
  }

  /** Ends every wait in progress (the process is stopping); each answers with the flow as it is. */
  close(): void {
    this.stopping.abort();
  }

  /** The flow as it is now, then each change, ending once it completed, failed or expired (subscriptions). */
  async watch(tenant: Tenant, flowId: string): Promise<AsyncIterableIterator<OAuthFlow>> {
    const id = flowId.toLowerCase();
    // Before anything is read: a caller past its quota costs no statement.
    const release = this.subscriptions.take(tenant);
    const wakeup = new Wakeup(RECHECK_MS);
    const off = wakeOn(this.deps.events, topics.oauthFlow(id), tenant.workspaceId, wakeup);
    const unsubscribe = () => {
      off();
      release();
    };
    const first = await this.store.settled(tenant, id).catch((err: unknown) => {
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
        const flow = await this.store.settled(tenant, first.id);
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

  private async tokenOf(tenant: Tenant, flow: OAuthFlow): Promise<string | null> {
    if (!flow.tokenId) return null;
    const [token] = await this.vault.byIds(tenant, [flow.tokenId]);
    return token ? this.vault.freshAccessToken(tenant, token) : null;
  }
}
