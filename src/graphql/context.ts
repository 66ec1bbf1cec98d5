import type { Tenant } from "../core/auth.js";
import type { Core } from "../core/index.js";
import { createLoaders, type Loaders } from "./loaders.js";

/** What every resolver sees: the core, the caller's tenant, and this request's own DataLoaders. */
export interface GraphQLContext {
  core: Core;
  tenant: Tenant;
  loaders: Loaders;
  /** The origin the request came in on (null over WebSocket): where OAuth providers send browsers back when PUBLIC_URL is unset. */
  origin: string | null;
}

/** One per operation: loaders cache rows, so they are never shared between requests or callers. */
export function createContext(core: Core, tenant: Tenant, origin: string | null = null): GraphQLContext {
  return { core, tenant, loaders: createLoaders(core, tenant), origin };
}

/**
 * A subscription's context lives as long as the subscription: before each event its loaders are
 * replaced, so that the event shows the database as it is now, not as the first event saw it.
 */
export function refreshLoaders(ctx: GraphQLContext): void {
  ctx.loaders = createLoaders(ctx.core, ctx.tenant);
}
