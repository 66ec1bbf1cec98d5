import { type DomainEvent, topics } from "../events/types.js";
import type { Deployment, Revision } from "../generated/prisma/client.js";
import { isTerminal, type RevisionStatus } from "../pipeline/machine.js";
import type { Tenant } from "./auth.js";
import type { CoreDeps } from "./context.js";
import { notFound } from "./errors.js";
import { GraphQueries } from "./graph-queries.js";

/**
 * A stream that one side pushes into and the other iterates. Unlike an async generator, return()
 * takes effect at once even while the consumer is waiting, so an unsubscribing client frees its
 * bus subscription immediately.
 */
export class Channel<T> implements AsyncIterableIterator<T> {
  private readonly queue: T[] = [];
  private readonly waiters: { resolve: (r: IteratorResult<T>) => void; reject: (e: unknown) => void }[] = [];
  private failure: unknown = null;
  closed = false;

  constructor(private readonly onClose: () => void) {}

  push(value: T): void {
    if (this.closed) return;
    const waiter = this.waiters.shift();
    if (waiter) waiter.resolve({ value, done: false });
    else this.queue.push(value);
  }

  /** No more values: waiting consumers finish (or fail with `error`) once the queue is drained. */
  end(error?: unknown): void {
    if (this.closed) return;
    this.closed = true;
    this.failure = error ?? null;
    for (const w of this.waiters.splice(0)) {
      if (error) w.reject(error);
      else w.resolve({ value: undefined, done: true });
    }
    this.onClose();
  }

  next(): Promise<IteratorResult<T>> {
    if (this.queue.length > 0) return Promise.resolve({ value: this.queue.shift()!, done: false });
    if (this.closed) return this.failure ? Promise.reject(this.failure) : Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve, reject) => this.waiters.push({ resolve, reject }));
  }

  return(): Promise<IteratorResult<T>> {
    this.queue.length = 0;
    this.end();
    return Promise.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator]() {
    return this;
  }
}

/** Wakes a waiting loop when the bus delivers; a rare re-check covers a notification lost in a reconnect. */
class Wakeup {
  private wake: (() => void) | null = null;
  private dirty = false;

  constructor(private readonly recheckMs: number) {}

  ring = (): void => {
    this.dirty = true;
    this.wake?.();
  };

  /** Returns at once if rung since the last wait; a ring during the caller's step is never lost. */
  async wait(): Promise<void> {
    if (this.dirty) {
      this.dirty = false;
      return;
    }
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, this.recheckMs);
      timer.unref();
      this.wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
    this.wake = null;
  }
}

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

const RECHECK_MS = 10_000;

/**
 * Live views for subscriptions, tenant-scoped like every core read: an id the tenant cannot see is
 * NOT_FOUND before anything streams. The bus (in-process, or LISTEN/NOTIFY across replicas) only
 * says "something changed"; what is streamed is read from the database, so nothing is missed or
 * reordered, whichever replica made the change.
 */
export class Watcher {
  private readonly graph: GraphQueries;

  constructor(private readonly deps: CoreDeps) {
    this.graph = new GraphQueries(deps);
  }

  /** First the current status, then every status change in order; ends after a terminal status. */
  async revisionStatus(tenant: Tenant, revisionId: string): Promise<AsyncIterableIterator<RevisionStatusChange>> {
    const wakeup = new Wakeup(RECHECK_MS);
    const unsubscribe = this.listen(tenant, topics.revision(revisionId), wakeup.ring);
    const channel = new Channel<RevisionStatusChange>(() => {
      unsubscribe();
      wakeup.ring();
    });
    try {
      const [revision] = await this.graph.revisionsByIds(tenant, [revisionId]);
      if (!revision) throw notFound("Revision", revisionId);
      // The log is the truth: its newest entry is the current status, and later entries are changes.
      const log = await this.graph.eventsSince(tenant, revision.id, null);
      const last = log.at(-1);
      const current: RevisionStatusChange = last
        ? { revision, status: last.toStatus as RevisionStatus, previousStatus: (last.fromStatus as RevisionStatus | null) ?? null, message: last.message, at: last.at }
        : { revision, status: revision.status as RevisionStatus, previousStatus: null, message: revision.statusMessage, at: revision.updatedAt };
      channel.push(current);
      if (isTerminal(current.status)) channel.end();
      else void this.followLog(tenant, revision.id, last?.id ?? null, wakeup, channel);
    } catch (err) {
      channel.end();
      throw err;
    }
    return channel;
  }

  /** Each new revision of the deployment and each status change of its revisions. */
  async deploymentRevisions(tenant: Tenant, deploymentId: string): Promise<AsyncIterableIterator<DeploymentRevisionChange>> {
    const pending: DomainEvent[] = [];
    const wakeup = new Wakeup(RECHECK_MS);
    const unsubscribe = this.listen(tenant, topics.deploymentRevisions(deploymentId), (event) => {
      pending.push(event);
      wakeup.ring();
    });
    const channel = new Channel<DeploymentRevisionChange>(() => {
      unsubscribe();
      wakeup.ring();
    });
    await this.requireDeployment(tenant, deploymentId, channel);
    void this.loop(channel, wakeup, async () => {
      for (const event of pending.splice(0)) {
        if (event.type === "deployment.status") continue;
        const [[deployment], [revision]] = await Promise.all([
          this.graph.deploymentsByIds(tenant, [event.deploymentId]),
          this.graph.revisionsByIds(tenant, [event.revisionId]),
        ]);
        if (!deployment) return channel.end();
        if (revision) channel.push({ deployment, revision, kind: event.type === "deployment.revisions" ? "created" : "status" });
      }
    });
    return channel;
  }

  /** First the current status, then each change; ends once the deployment is being deleted. */
  async deploymentStatus(tenant: Tenant, deploymentId: string): Promise<AsyncIterableIterator<DeploymentStatusChange>> {
    const pending: DomainEvent[] = [];
    const wakeup = new Wakeup(RECHECK_MS);
    const unsubscribe = this.listen(tenant, topics.deploymentStatus(deploymentId), (event) => {
      pending.push(event);
      wakeup.ring();
    });
    const channel = new Channel<DeploymentStatusChange>(() => {
      unsubscribe();
      wakeup.ring();
    });
    const deployment = await this.requireDeployment(tenant, deploymentId, channel);
    let status = deployment.status;
    channel.push({ deploymentId: deployment.id, deployment, status });
    if (status === "AWAITING_DELETE") {
      channel.end();
      return channel;
    }
    void this.loop(channel, wakeup, async () => {
      const changes = pending.splice(0).flatMap((e) => (e.type === "deployment.status" ? [e.status] : []));
      if (changes.length === 0) return;
      // Statuses come from the events (each change is shown, even if a later one already landed).
      const [now] = await this.graph.deploymentsByIds(tenant, [deployment.id]);
      for (const next of changes) {
        if (next === status) continue;
        status = next;
        channel.push({ deploymentId: deployment.id, deployment: now ?? null, status });
        if (status === "AWAITING_DELETE") return channel.end();
      }
      if (!now) channel.end();
    });
    return channel;
  }

  private async followLog(tenant: Tenant, revisionId: string, after: bigint | null, wakeup: Wakeup, channel: Channel<RevisionStatusChange>) {
    let lastId = after;
    await this.loop(channel, wakeup, async () => {
      const entries = await this.graph.eventsSince(tenant, revisionId, lastId);
      if (entries.length === 0) return;
      const [revision] = await this.graph.revisionsByIds(tenant, [revisionId]);
      if (!revision) return channel.end();
      for (const entry of entries) {
        lastId = entry.id;
        const status = entry.toStatus as RevisionStatus;
        channel.push({ revision, status, previousStatus: (entry.fromStatus as RevisionStatus | null) ?? null, message: entry.message, at: entry.at });
        if (isTerminal(status)) return channel.end();
      }
    });
  }

  /** Runs `step` after every wake-up until the channel closes; a failing step ends the stream with its error. */
  private async loop(channel: { closed: boolean; end(error?: unknown): void }, wakeup: Wakeup, step: () => Promise<void>) {
    try {
      while (!channel.closed) {
        await wakeup.wait();
        if (!channel.closed) await step();
      }
    } catch (err) {
      channel.end(err);
    }
  }

  private listen(tenant: Tenant, topic: string, handler: (event: DomainEvent) => void) {
    // Topics are per object id; the workspace check makes tenancy explicit rather than implied.
    return this.deps.events.subscribe(topic, (event) => {
      if (event.workspaceId === tenant.workspaceId) handler(event);
    });
  }

  private async requireDeployment(tenant: Tenant, deploymentId: string, channel: { end(): void }): Promise<Deployment> {
    const [deployment] = await this.graph.deploymentsByIds(tenant, [deploymentId]).catch((err: unknown) => {
      channel.end();
      throw err;
    });
    if (!deployment) {
      channel.end();
      throw notFound("Deployment", deploymentId);
    }
    return deployment;
  }
}
