import { setTimeout as sleep } from "node:timers/promises";
import { type DomainEvent, topics } from "../events/types.js";
import type { Deployment, Revision, RevisionEvent } from "../generated/prisma/client.js";
import { isTerminal, type RevisionStatus } from "./revision-machine.js";
import type { Tenant } from "./auth.js";
import type { CoreDeps } from "./context.js";
import { DELETING } from "./deployment-status.js";
import { notFound } from "./errors.js";
import { Feed } from "./feeds.js";
import { BatchReads } from "./batch-reads.js";
import { checkTail, DEFAULT_TAIL, RevisionLogFeed } from "./log-feed.js";
import type { LogLine } from "./log-queries.js";
import type { LogKind } from "./schemas/logs.js";
import { SubscriptionQuota } from "./subscription-quota.js";

export { Channel } from "./feeds.js";

export interface RevisionStatusChange {
  /** The revision as it is now. */
  revision: Revision;
  status: RevisionStatus;
  previousStatus: RevisionStatus | null;
  message: string;
  at: Date;
}

export interface DeploymentRevisionChange {
  deployment: Deployment;
  revision: Revision;
  /** A new revision (created) or a revision's new status (status). */
  kind: "created" | "status";
}

export interface DeploymentStatusChange {
  deploymentId: string;
  /** The deployment as it is now; null once deleted. */
  deployment: Deployment | null;
  status: string;
}

/** The most a stopping server waits for its feeds' last reads and their subscribers (Watcher.settle). */
const SETTLE_MS = 5_000;

/** How often a feed re-reads its object with no event: a NOTIFY that failed (the bus's resync covers a reconnect). */
const RECHECK_MS = 10_000;

const isDeletion = (event: DomainEvent) => event.type === "deployment.status" && event.status === DELETING;

/**
 * Live views for subscriptions, tenant-scoped like every core read: an id the tenant cannot see is
 * NOT_FOUND before anything streams. The bus (in-process, or LISTEN/NOTIFY across replicas) only
 * says "something changed"; what is streamed is read from the database, so nothing is missed or
 * reordered, whichever replica made the change.
 *
 * Subscribers of the same object in the same workspace share one feed (see Feed): a change costs
 * the same few statements for ten thousand subscribers as for one. Feeds are keyed by workspace, so
 * a feed's existence proves its object was found in the subscriber's workspace; another workspace
 * gets a feed of its own, whose first read answers NOT_FOUND.
 */
export class Watcher {
  private readonly batch: BatchReads;
  private readonly feeds = new Map<string, Feed<unknown, unknown>>();
  private readonly recheckMs: number;
  private readonly subscriptions: SubscriptionQuota;

  constructor(
    private readonly deps: CoreDeps,
    /**
     * recheckMs: how often each feed re-reads with no event (RECHECK_MS); subscriptions: the places
     * each caller may hold (none counted without it).
     */
    options: { recheckMs?: number; subscriptions?: SubscriptionQuota } = {},
  ) {
    this.recheckMs = options.recheckMs ?? RECHECK_MS;
    this.subscriptions = options.subscriptions ?? new SubscriptionQuota(0);
    this.batch = new BatchReads(deps);
  }

  /**
   * First the current status, then every status change in order; ends after a terminal status, or
   * once its deployment is being deleted (its rows go with the deployment's; no terminal status comes).
   */
  revisionStatus(tenant: Tenant, revisionId: string): Promise<AsyncIterableIterator<RevisionStatusChange>> {
    const id = revisionId.toLowerCase();
    return this.join(tenant, topics.revision(id), (forget) => new RevisionFeed(this.batch, tenant, id, this.recheckMs, forget));
  }

  /** Each new revision of the deployment and each status change of its revisions; ends once it is being deleted. */
  deploymentRevisions(tenant: Tenant, deploymentId: string): Promise<AsyncIterableIterator<DeploymentRevisionChange>> {
    const id = deploymentId.toLowerCase();
    return this.join(tenant, topics.deploymentRevisions(id), (forget) => new DeploymentRevisionsFeed(this.batch, tenant, id, this.recheckMs, forget));
  }

  /** First the current status, then each change; ends once the deployment is being deleted. */
  deploymentStatus(tenant: Tenant, deploymentId: string): Promise<AsyncIterableIterator<DeploymentStatusChange>> {
    const id = deploymentId.toLowerCase();
    return this.join(tenant, topics.deploymentStatus(id), (forget) => new DeploymentStatusFeed(this.batch, tenant, id, this.recheckMs, forget));
  }

  /**
   * The last `tail` lines of the revision's build or deploy log (oldest first), then every new line
   * as it is written; ends after the revision's final status line. Subscribers of one log share
   * one feed, which keeps the last MAX_TAIL lines: joining costs no read while it runs.
   */
  revisionLogs(tenant: Tenant, revisionId: string, kind: LogKind, tail: number = DEFAULT_TAIL): Promise<AsyncIterableIterator<LogLine>> {
    checkTail(tail);
    const id = revisionId.toLowerCase();
    const make = (forget: () => void) => new RevisionLogFeed(this.deps.prisma, tenant, id, kind, this.recheckMs, forget);
    return this.join(tenant, topics.revisionLogs(id, kind), make, tail);
  }

  /**
   * For a server stopping, before its transports end their streams: every live feed reads once more
   * what has been written (Feed.settle) and each subscriber takes it, for at most `withinMs` (a
   * subscriber that does not read, a database that does not answer, do not hold the stop longer).
   */
  async settle(withinMs = SETTLE_MS): Promise<void> {
    const settled = Promise.all([...this.feeds.values()].map((feed) => feed.settle()));
    await Promise.race([settled, sleep(withinMs, undefined, { ref: false })]);
  }

  /** How many feeds are live (diagnostics and tests). */
  get feedCount(): number {
    return this.feeds.size;
  }

  private async join<T, J = void>(
    tenant: Tenant,
    topic: string,
    make: (forget: () => void) => Feed<T, J>,
    options?: J,
  ): Promise<AsyncIterableIterator<T>> {
    // Before anything is read: a caller past its quota costs no statement.
    const release = this.subscriptions.take(tenant);
    const key = `${tenant.workspaceId} ${topic}`;
    let feed = this.feeds.get(key) as Feed<T, J> | undefined;
    if (!feed || feed.ended) {
      const created = make(() => {
        if (this.feeds.get(key) === created) this.feeds.delete(key);
      });
      this.feeds.set(key, created as Feed<unknown, unknown>);
      created.open(this.deps.events, topic, tenant.workspaceId);
      feed = created;
    }
    try {
      return await feed.join(options as J, release);
    } catch (err) {
      release();
      throw err;
    }
  }
}

/** A feed of one object (a revision or a deployment) of one workspace. */
abstract class ObjectFeed<T> extends Feed<T> {
  constructor(
    protected readonly batch: BatchReads,
    protected readonly tenant: Tenant,
    protected readonly id: string,
    recheckMs: number,
    forget: () => void,
  ) {
    super(recheckMs, forget);
  }
}

/**
 * A revision's status: its event log is the truth, read past the last entry seen. Its deployment's
 * status is followed too: a deployment being deleted takes its revisions' rows with it, so no
 * terminal status will come, and the feed ends there.
 */
class RevisionFeed extends ObjectFeed<RevisionStatusChange> {
  private lastId: bigint | null = null;
  private deploymentId = "";
  /** Its deployment is being deleted (told by the bus, or read). */
  private deleting = false;

  protected override received(event: DomainEvent): void {
    if (isDeletion(event)) this.deleting = true;
  }

  protected async load(): Promise<void> {
    const [revision] = await this.batch.revisionsByIds(this.tenant, [this.id]);
    if (!revision) throw notFound("Revision", this.id);
    this.deploymentId = revision.deploymentId;
    // Followed before it is read: a deletion is either read here or told later.
    this.follow(topics.deploymentStatus(revision.deploymentId));
    const [entries, deleting] = await Promise.all([
      this.batch.eventsSince(this.tenant, revision.id, null),
      beingDeleted(this.batch, this.tenant, revision.deploymentId),
    ]);
    // The log's newest entry is the current status, and later entries are changes.
    const last = entries.at(-1);
    this.lastId = last?.id ?? null;
    const current = last
      ? change(revision, last)
      : { revision, status: revision.status as RevisionStatus, previousStatus: null, message: revision.statusMessage, at: revision.updatedAt };
    this.publish(current, true);
    if (isTerminal(current.status) || deleting) this.finish();
  }

  protected async step(full: boolean): Promise<void> {
    // Told before this read: any change made before the deletion is among the entries read.
    const deleting = this.deleting;
    const entries = await this.batch.eventsSince(this.tenant, this.id, this.lastId);
    if (entries.length > 0) {
      const [revision] = await this.batch.revisionsByIds(this.tenant, [this.id]);
      if (!revision) return this.finish();
      for (const entry of entries) {
        this.lastId = entry.id;
        const next = change(revision, entry);
        this.publish(next, true);
        if (isTerminal(next.status)) return this.finish();
      }
    }
    if (deleting) return this.finish();
    // Woken with nothing new (another status of the deployment), or in full (the re-check, the bus's
    // resync): a deletion whose notification was lost ends the feed as well.
    if ((entries.length === 0 || full) && (await beingDeleted(this.batch, this.tenant, this.deploymentId))) this.finish();
  }
}

const change = (revision: Revision, entry: RevisionEvent): RevisionStatusChange => ({
  revision,
  status: entry.toStatus as RevisionStatus,
  previousStatus: (entry.fromStatus as RevisionStatus | null) ?? null,
  message: entry.message,
  at: entry.at,
});

/**
 * A deployment's status: each change the bus tells of is shown, even if a later one already landed;
 * then the status as read, if it is another (its notification was lost), and so in full steps (the
 * re-check, the bus's resync) with nothing told. One read per step, none for a step with nothing to do.
 */
class DeploymentStatusFeed extends ObjectFeed<DeploymentStatusChange> {
  private pending: string[] = [];
  private status = "";

  protected override received(event: DomainEvent): void {
    if (event.type === "deployment.status") this.pending.push(event.status);
  }

  protected async load(): Promise<void> {
    const deployment = await requireDeployment(this.batch, this.tenant, this.id);
    this.status = deployment.status;
    this.publish({ deploymentId: deployment.id, deployment, status: this.status }, true);
    if (this.status === DELETING) this.finish();
  }

  protected async step(full: boolean): Promise<void> {
    const told = this.pending.length;
    if (told === 0 && !full) return;
    const [now] = await this.batch.deploymentsByIds(this.tenant, [this.id]);
    // Taken once read, and only those told before the read (later ones are the next step's): a read
    // that failed (to be read again, feeds.ts) keeps what the bus told.
    const changes = this.pending.splice(0, told);
    if (now) changes.push(now.status);
    for (const next of changes) {
      if (next === this.status) continue;
      this.status = next;
      this.publish({ deploymentId: this.id, deployment: now ?? null, status: next }, true);
      if (next === DELETING) return this.finish();
    }
    if (!now) this.finish();
  }
}

/** Log entries read per statement when a deployment's revisions change faster than its feed reads. */
const ENTRIES_BATCH = 500;

/**
 * New revisions of a deployment and its revisions' status changes; nothing is sent on joining. What
 * it sends is read from the revision event logs of the deployment's revisions, past the last entry it
 * has seen (the bus only says when to read): a change whose notification was lost is read by the next
 * step all the same, the re-check's or the bus's resync's. Ends once the deployment is being deleted:
 * its revisions go with it.
 */
class DeploymentRevisionsFeed extends ObjectFeed<DeploymentRevisionChange> {
  /** The newest log entry seen (0: none): every later one is a change not sent yet. */
  private lastId = 0n;
  /** A revision of the deployment was created or changed status since the last step (told by the bus). */
  private changed = false;
  /** The deployment is being deleted (told by the bus). */
  private deleting = false;

  protected override received(event: DomainEvent): void {
    if (event.type === "revision.status" || event.type === "deployment.revisions") this.changed = true;
    else if (isDeletion(event)) this.deleting = true;
  }

  protected async load(): Promise<void> {
    // Followed before it is read: a deletion is either read here or told later.
    this.follow(topics.deploymentStatus(this.id));
    // Where the log stands when the subscriber comes: later entries are its changes.
    const [deployment, lastId] = await Promise.all([
      requireDeployment(this.batch, this.tenant, this.id),
      this.batch.lastDeploymentEntryId(this.tenant, this.id),
    ]);
    this.lastId = lastId;
    if (deployment.status === DELETING) this.finish();
  }

  protected async step(full: boolean): Promise<void> {
    // Told before these reads: any change made before the deletion is among the entries read.
    const deleting = this.deleting;
    if (!this.changed && !full) {
      // Another status of the deployment (or its deletion) told, and no revision's change.
      if (deleting || (await beingDeleted(this.batch, this.tenant, this.id))) this.finish();
      return;
    }
    this.changed = false;
    for (;;) {
      const [[deployment], entries] = await Promise.all([
        this.batch.deploymentsByIds(this.tenant, [this.id]),
        this.batch.deploymentEntriesSince(this.tenant, this.id, this.lastId, ENTRIES_BATCH),
      ]);
      if (!deployment) return this.finish();
      // Who is subscribed once the read is back: a subscriber that joined while it ran is told what it
      // found. Some of that may have landed just before it joined (told, as it were, twice), but a
      // change made after it joined is never skipped (lastId moves past every entry read).
      const audience = this.audience();
      for (const entry of entries) {
        this.lastId = entry.eventId;
        // A new revision is told twice, as before: created, then its first status.
        const kinds: DeploymentRevisionChange["kind"][] = entry.fromStatus === null ? ["created", "status"] : ["status"];
        // The revision as the entry left it: a burst read at once tells each status it went through.
        const revision = { ...entry.revision, status: entry.toStatus };
        for (const kind of kinds) {
          const value: DeploymentRevisionChange = { deployment, revision, kind };
          for (const channel of audience) channel.push(value);
        }
      }
      if (entries.length === ENTRIES_BATCH) continue;
      if (deleting || deployment.status === DELETING) this.finish();
      return;
    }
  }
}

async function requireDeployment(batch: BatchReads, tenant: Tenant, deploymentId: string): Promise<Deployment> {
  const [deployment] = await batch.deploymentsByIds(tenant, [deploymentId]);
  if (!deployment) throw notFound("Deployment", deploymentId);
  return deployment;
}

/** Whether the deployment is being deleted or gone (with its revisions). */
async function beingDeleted(batch: BatchReads, tenant: Tenant, deploymentId: string): Promise<boolean> {
  const [deployment] = await batch.deploymentsByIds(tenant, [deploymentId]);
  return !deployment || deployment.status === DELETING;
}
