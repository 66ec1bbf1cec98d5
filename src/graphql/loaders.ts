import DataLoader from "dataloader";
import type { Tenant } from "../core/auth.js";
import type { Core } from "../core/index.js";
import type { KeysetArgs, KeysetPage } from "../core/pagination.js";
import type {
  AgentConnection,
  CodehostInstallation,
  Deployment,
  Listener,
  Revision,
  RevisionEvent,
} from "../generated/prisma/client.js";

/** Every batch is one core call, one SQL statement: N parents cost the same as one. */
export function createLoaders(core: Core, tenant: Tenant) {
  const byIds = <T>(load: (tenant: Tenant, ids: readonly string[]) => Promise<(T | null)[]>) =>
    new DataLoader<string, T | null>((ids) => load(tenant, ids), { maxBatchSize: 500 });

  // Nested connections with the same arguments under many parents share one windowed query.
  const revisionPages = new Map<string, DataLoader<string, KeysetPage<Revision>>>();
  const revisionCounts = new Map<string, DataLoader<string, number>>();

  return {
    deployment: byIds<Deployment>((t, ids) => core.graph.deploymentsByIds(t, ids)),
    revision: byIds<Revision>((t, ids) => core.graph.revisionsByIds(t, ids)),
    listener: byIds<Listener>((t, ids) => core.graph.listenersByIds(t, ids)),
    installation: byIds<CodehostInstallation>((t, ids) => core.graph.installationsByIds(t, ids)),
    connection: byIds<AgentConnection>((t, ids) => core.graph.connectionsByIds(t, ids)),
    revisionEvents: new DataLoader<string, RevisionEvent[]>((ids) => core.graph.eventsByRevisionIds(tenant, ids)),

    /** The revision page of each deployment for one set of arguments. */
    revisionPage(args: KeysetArgs, statuses: readonly string[] | undefined): DataLoader<string, KeysetPage<Revision>> {
      const key = JSON.stringify([args, statuses ?? null]);
      let loader = revisionPages.get(key);
      if (!loader) {
        loader = new DataLoader((ids) => core.revisionPages.pages(tenant, ids, args, statuses));
        revisionPages.set(key, loader);
      }
      return loader;
    },

    revisionCount(statuses: readonly string[] | undefined): DataLoader<string, number> {
      const key = JSON.stringify(statuses ?? null);
      let loader = revisionCounts.get(key);
      if (!loader) {
        loader = new DataLoader((ids) => core.revisionPages.counts(tenant, ids, statuses));
        revisionCounts.set(key, loader);
      }
      return loader;
    },
  };
}

export type Loaders = ReturnType<typeof createLoaders>;
