import { Authenticator } from "./auth.js";
import type { CoreDeps } from "./context.js";
import { ListenerService } from "./listeners.js";
import { deploymentServices } from "./deployments.js";
import { InstallationService } from "./installations.js";
import { ConnectionService } from "./connections.js";
import { GraphQueries } from "./graph-queries.js";
import { IdempotencyService } from "./idempotency.js";
import { RevisionPages } from "./revision-pages.js";
import { Watcher } from "./watch.js";

/** The core: one service per resource, all over the same dependencies. Faces call only this. */
export function createCore(
  deps: CoreDeps,
  options: {
    jwtSecret?: string;
    /** Keys the fingerprints of Idempotency-Key requests (derived from SECRETS_KEY). */
    idempotencyFingerprintKey: Buffer;
  },
) {
  return {
    deps,
    auth: new Authenticator(deps.prisma, options.jwtSecret),
    listeners: new ListenerService(deps),
    ...deploymentServices(deps),
    installations: new InstallationService(deps),
    connections: new ConnectionService(deps),
    /** Idempotency-Key on POSTs: the first answer, replayed. */
    idempotency: new IdempotencyService(deps.prisma, options.idempotencyFingerprintKey),
    /** Batch loads, counts and per-parent pages for the GraphQL face's DataLoaders. */
    graph: new GraphQueries(deps),
    revisionPages: new RevisionPages(deps),
    /** Live views for subscriptions. */
    watch: new Watcher(deps),
  };
}

export type Core = ReturnType<typeof createCore>;
