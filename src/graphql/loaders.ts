import DataLoader from "dataloader";
import type { Tenant } from "../core/auth.js";
import { CoreError } from "../core/errors.js";
import type { Core } from "../core/index.js";
import type { LogLine } from "../core/logs.js";
import type { KeysetArgs, KeysetPage } from "../core/pagination.js";
import type { RevisionSummary } from "../core/revision-reads.js";
import type { LogFilter, LogKind } from "../core/schemas/logs.js";
import type {
  AgentConnection,
  CodehostInstallation,
  CodehostRepository,
  OAuthFlow,
  OAuthProvider,
  OAuthToken,
  Deployment,
  Listener,
  Revision,
  RevisionEvent,
} from "../generated/prisma/client.js";

/**
 * The most repositories one operation reads (CodehostInstallation.repositories): five installations
 * holding as many as one may (MAX_REPOSITORIES), or a page of a hundred holding 250 each. The cost
 * limit counts a list as ten items, and cannot know how long these are.
 */
export const REPOSITORIES_PER_OPERATION = 25_000;

/**
 * Every batch is one core call, one SQL statement: N parents cost the same as one. Each loader is
 * made when first used: most operations use one or two, and a subscription gets fresh loaders for
 * every event it sends.
 */
export class Loaders {
  private made: Partial<{
    deployment: DataLoader<string, Deployment | null>;
    revision: DataLoader<string, RevisionSummary | null>;
    revisionFull: DataLoader<string, Revision | null>;
    listener: DataLoader<string, Listener | null>;
    installation: DataLoader<string, CodehostInstallation | null>;
    connection: DataLoader<string, AgentConnection | null>;
    revisionEvents: DataLoader<string, RevisionEvent[]>;
    oauthProvider: DataLoader<string, OAuthProvider | null>;
    oauthToken: DataLoader<string, OAuthToken | null>;
    oauthFlow: DataLoader<string, OAuthFlow | null>;
    repositories: DataLoader<string, CodehostRepository[]>;
  }> = {};
  // Nested connections with the same arguments under many parents share one windowed query.
  private revisionPages: Map<string, DataLoader<string, KeysetPage<RevisionSummary>>> | null = null;
  private revisionCounts: Map<string, DataLoader<string, number>> | null = null;
  private logPages: Map<string, DataLoader<string, KeysetPage<LogLine>>> | null = null;
  private logCounts: Map<string, DataLoader<string, number>> | null = null;
  /** Repositories read by this operation so far, once its batches before have read (REPOSITORIES_PER_OPERATION): kept across clearAll. */
  private repositoriesRead: Promise<number> = Promise.resolve(0);

  constructor(
    private readonly core: Core,
    private readonly tenant: Tenant,
  ) {}

  /** Forgets every read so far: a mutation reads what is there now, and its payload what it left. */
  clearAll(): void {
    this.made = {};
    this.revisionPages = this.revisionCounts = this.logPages = this.logCounts = null;
  }

  private byIds<T>(load: (tenant: Tenant, ids: readonly string[]) => Promise<(T | null)[]>) {
    return new DataLoader<string, T | null>((ids) => load(this.tenant, ids), { maxBatchSize: 500 });
  }

  get deployment() {
    return (this.made.deployment ??= this.byIds((t, ids) => this.core.batch.deploymentsByIds(t, ids)));
  }
  /**
   * Revisions as most reads show them (RevisionSummary: no JSON snapshot, secrets or build report);
   * a field outside the summary loads the whole row through revisionFull, batched as well.
   */
  get revision() {
    return (this.made.revision ??= this.byIds<RevisionSummary>((t, ids) => this.core.batch.revisionSummariesByIds(t, ids)));
  }
  get revisionFull() {
    return (this.made.revisionFull ??= this.byIds((t, ids) => this.core.batch.revisionsByIds(t, ids)));
  }
  get listener() {
    return (this.made.listener ??= this.byIds((t, ids) => this.core.batch.listenersByIds(t, ids)));
  }
  get installation() {
    return (this.made.installation ??= this.byIds((t, ids) => this.core.batch.installationsByIds(t, ids)));
  }
  get connection() {
    return (this.made.connection ??= this.byIds((t, ids) => this.core.batch.connectionsByIds(t, ids)));
  }
  get revisionEvents() {
    return (this.made.revisionEvents ??= new DataLoader<string, RevisionEvent[]>((ids) => this.core.batch.eventsByRevisionIds(this.tenant, ids)));
  }

  get oauthProvider() {
    return (this.made.oauthProvider ??= this.byIds((t, ids) => this.core.oauthProviders.byIds(t, ids)));
  }
  /** The caller's own tokens only: another user's token loads as null. */
  get oauthToken() {
    return (this.made.oauthToken ??= this.byIds((t, ids) => this.core.oauthTokens.byIds(t, ids)));
  }
  get oauthFlow() {
    return (this.made.oauthFlow ??= this.byIds((t, ids) => this.core.oauthFlows.byIds(t, ids)));
  }
  /**
   * Each installation's repositories, at most REPOSITORIES_PER_OPERATION in all: an operation's
   * batches (aliased pages, nodes) read one after another, each within what the ones before left.
   */
  get repositories() {
    return (this.made.repositories ??= new DataLoader<string, CodehostRepository[]>((ids) => {
      const before = this.repositoriesRead;
      const read = before.then(async (sofar) => {
        const lists = await this.core.repositories.byInstallations(this.tenant, ids, REPOSITORIES_PER_OPERATION - sofar);
        if (lists === null) {
          throw new CoreError(
            "BAD_REQUEST",
            `This operation asks for more than ${REPOSITORIES_PER_OPERATION.toLocaleString("en")} repositories of code-host installations: ask for those of fewer installations at once (codehostInstallations(first: …)).`,
          );
        }
        return { lists, sofar: sofar + lists.reduce((sum, list) => sum + list.length, 0) };
      });
      // A refused batch reads nothing: those after it have what it left.
      this.repositoriesRead = read.then(({ sofar }) => sofar, () => before);
      return read.then(({ lists }) => lists);
    }));
  }

  /** The revision page of each deployment for one set of arguments (`probe`: see RevisionPages.pages). */
  revisionPage(args: KeysetArgs, statuses: readonly string[] | undefined, probe = true): DataLoader<string, KeysetPage<RevisionSummary>> {
    const pages = (this.revisionPages ??= new Map());
    const key = JSON.stringify([args, statuses ?? null, probe]);
    let loader = pages.get(key);
    if (!loader) {
      loader = new DataLoader<string, KeysetPage<RevisionSummary>>((ids) => this.core.revisionPages.pages(this.tenant, ids, args, statuses, probe));
      pages.set(key, loader);
    }
    return loader;
  }

  revisionCount(statuses: readonly string[] | undefined): DataLoader<string, number> {
    const counts = (this.revisionCounts ??= new Map());
    const key = JSON.stringify(statuses ?? null);
    let loader = counts.get(key);
    if (!loader) {
      loader = new DataLoader<string, number>((ids) => this.core.revisionPages.counts(this.tenant, ids, statuses));
      counts.set(key, loader);
    }
    return loader;
  }

  /** The log page of each revision for one kind of log and one set of arguments and filters. */
  logPage(kind: LogKind, args: KeysetArgs, filter: LogFilter): DataLoader<string, KeysetPage<LogLine>> {
    const pages = (this.logPages ??= new Map());
    const key = JSON.stringify([kind, args, filter]);
    let loader = pages.get(key);
    if (!loader) {
      loader = new DataLoader<string, KeysetPage<LogLine>>((ids) => this.core.logs.pages(this.tenant, kind, ids, args, filter));
      pages.set(key, loader);
    }
    return loader;
  }

  logCount(kind: LogKind, filter: LogFilter): DataLoader<string, number> {
    const counts = (this.logCounts ??= new Map());
    const key = JSON.stringify([kind, filter]);
    let loader = counts.get(key);
    if (!loader) {
      loader = new DataLoader<string, number>((ids) => this.core.logs.counts(this.tenant, kind, ids, filter));
      counts.set(key, loader);
    }
    return loader;
  }
}

export function createLoaders(core: Core, tenant: Tenant): Loaders {
  return new Loaders(core, tenant);
}
