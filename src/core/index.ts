import { Authenticator } from "./auth.js";
import type { CoreDeps } from "./context.js";
import { ListenerService } from "./listeners.js";
import { deploymentServices } from "./deployments.js";
import { InstallationService } from "./installations.js";
import { ConnectionService } from "./connections.js";

/** The core: one service per resource, all over the same dependencies. Faces call only this. */
export function createCore(deps: CoreDeps, options: { jwtSecret?: string }) {
  return {
    deps,
    auth: new Authenticator(deps.prisma, options.jwtSecret),
    listeners: new ListenerService(deps),
    ...deploymentServices(deps),
    installations: new InstallationService(deps),
    connections: new ConnectionService(deps),
  };
}

export type Core = ReturnType<typeof createCore>;
