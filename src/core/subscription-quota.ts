import type { Tenant } from "./auth.js";
import { CoreError } from "./errors.js";

const none = () => {};

/**
 * How many live subscriptions each caller holds open on this replica (SUBSCRIPTIONS_PER_CALLER), over
 * every transport: each holds memory and a place in a feed for as long as it lasts, and the rate limit
 * bounds how fast a caller opens them, not how many it keeps. A caller is an actor of a workspace: an
 * API key, or a bearer token's subject.
 */
export class SubscriptionQuota {
  private readonly open = new Map<string, number>();

  /** perCaller: 0 for no limit. */
  constructor(private readonly perCaller: number) {}

  /** Takes a place for the tenant's caller, or throws TOO_MANY_SUBSCRIPTIONS; call what it returns to give the place back (once). */
  take(tenant: Pick<Tenant, "workspaceId" | "actor">): () => void {
    if (this.perCaller === 0) return none;
    const caller = `${tenant.workspaceId} ${tenant.actor}`;
    const held = this.open.get(caller) ?? 0;
    if (held >= this.perCaller) {
      throw new CoreError("TOO_MANY_SUBSCRIPTIONS", `At most ${this.perCaller} live subscriptions per caller are open on this server; end one first.`);
    }
    this.open.set(caller, held + 1);
    let given = false;
    return () => {
      if (given) return;
      given = true;
      const left = (this.open.get(caller) ?? 1) - 1;
      if (left > 0) this.open.set(caller, left);
      else this.open.delete(caller);
    };
  }
}
