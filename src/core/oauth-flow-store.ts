import { createHash } from "node:crypto";
import type { OAuthFlow } from "../generated/prisma/client.js";
import type { Tenant } from "./auth.js";
import { inOrder, uuidsOnly } from "./batch-reads.js";
import type { CoreDeps } from "./context.js";
import { badRequest, type CoreError } from "./errors.js";
import { PROVIDER_TIMEOUT_SECONDS } from "./oauth-client.js";

export type { OAuthFlow };

/** A flow as its owner sees it: `expired` once its time ran out before the provider called back. */
export type FlowStatus = "pending" | "completed" | "failed" | "expired";

export const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");

/**
 * How long past its expiry a flow whose code is at the token endpoint (stored `exchanging`) still
 * counts as pending: its callback came in time, so the exchange decides. That exchange is one request
 * of at most PROVIDER_TIMEOUT_SECONDS, and storing its answer takes a moment more. A flow still
 * exchanging after that (its process died mid-exchange) has expired, and an exchange that ends later
 * stores nothing.
 */
export const EXCHANGE_GRACE_MS = (PROVIDER_TIMEOUT_SECONDS + 5) * 1000;

/** When a flow that has not ended expires: its expiry, or, while its code is exchanged, that plus the grace. */
export const expiryOf = (flow: OAuthFlow) => flow.expiresAt.getTime() + (flow.status === "exchanging" ? EXCHANGE_GRACE_MS : 0);

export function flowStatus(flow: OAuthFlow, now = Date.now()): FlowStatus {
  if (flow.status === "completed" || flow.status === "failed" || flow.status === "expired") return flow.status;
  return expiryOf(flow) <= now ? "expired" : "pending";
}

export const isDone = (flow: OAuthFlow) => flowStatus(flow) !== "pending";

/**
 * The stored flows: read by their owner or by their state, and ended (failed, expired) by
 * compare-and-set, each change published on the event bus for the waiters of every replica.
 */
export class FlowStore {
  constructor(private readonly deps: CoreDeps) {}

  /** The caller's own flow, or null. */
  async get(tenant: Tenant, flowId: string): Promise<OAuthFlow | null> {
    return (await this.byIds(tenant, [flowId]))[0] ?? null;
  }

  async byIds(tenant: Tenant, ids: readonly string[]): Promise<(OAuthFlow | null)[]> {
    const rows = await this.deps.data(tenant).oAuthFlow.findMany({ where: { owner: tenant.actor, id: { in: uuidsOnly(ids) } } });
    return inOrder(ids, rows);
  }

  /** The flow a state belongs to, for this provider (and, when finalized through the API, this caller). */
  async byState(providerId: string, state: string, caller: Tenant | null) {
    const flow = await this.deps.prisma.oAuthFlow.findUnique({ where: { stateHash: sha256(state) }, include: { provider: true } });
    if (!flow || flow.provider.providerId !== providerId) return null;
    if (caller && (caller.workspaceId !== flow.workspaceId || caller.actor !== flow.owner)) return null;
    const { provider, ...row } = flow;
    return { flow: row as OAuthFlow, provider };
  }

  /** The caller's flow (or null), stored as expired first if its time ran out (see `expire`). */
  async settled(tenant: Tenant, flowId: string): Promise<OAuthFlow | null> {
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
  async expire(flow: OAuthFlow): Promise<boolean> {
    if (flow.status === "expired") return true;
    const why = flow.status === "exchanging" ? "the code exchange did not end in time" : "the authorization expired before the provider called back";
    return this.end(flow, "expired", why);
  }

  /**
   * Ends a flow that has not ended, as failed or expired: a compare-and-set from the status it was read
   * with (`flow.status`), so that whoever changed it since wins. Whether this call ended it.
   */
  async end(flow: OAuthFlow, status: "failed" | "expired", message: string): Promise<boolean> {
    if (flow.status !== "pending" && flow.status !== "exchanging") return false;
    const { count } = await this.deps.prisma.oAuthFlow.updateMany({ where: { id: flow.id, status: flow.status }, data: { status, message } });
    if (count > 0) await this.publish({ ...flow, status });
    return count > 0;
  }

  /** Tells the waiters of every replica that the flow changed. */
  publish(flow: Pick<OAuthFlow, "id" | "workspaceId" | "status">) {
    return this.deps.events.publish({ type: "oauth.flow", workspaceId: flow.workspaceId, flowId: flow.id, status: flow.status });
  }
}

/** A failed or expired flow, as the 400 that says so. */
export function ended(flow: OAuthFlow, status: FlowStatus): CoreError {
  return status === "expired"
    ? badRequest(`Authorization ${flow.id} expired at ${flow.expiresAt.toISOString()}: start a new one with POST /v2/auth/authenticate.`)
    : badRequest(`Authorization ${flow.id} failed: ${flow.message || "the provider did not complete it"}. Start a new one with POST /v2/auth/authenticate.`);
}
