import { setTimeout as sleep } from "node:timers/promises";
import { type Client, createClient } from "graphql-ws";
import WebSocket from "ws";
import { API_KEY } from "./server.js";

/** The soak's traffic (bench/soak.ts): the request mix over HTTP, and the graphql-ws subscribers. */

const HEADERS = { "x-api-key": API_KEY, "content-type": "application/json", accept: "application/json" };

export class Traffic {
  readonly recycled: string[] = [];
  readonly pinned: string[] = [];
  readonly latest = new Map<string, string>();
  readonly latencies: number[] = [];
  readonly errorSamples: string[] = [];
  errors = 0;
  completed = 0;
  private n = 0;

  constructor(private readonly url: string) {}

  error(what: string) {
    this.errors++;
    if (this.errorSamples.length < 20) this.errorSamples.push(what);
  }

  async call(method: string, path: string, body: unknown, expected: number): Promise<Record<string, any> | null> {
    const started = performance.now();
    try {
      const res = await fetch(`${this.url}${path}`, { method, headers: HEADERS, body: body === undefined ? undefined : JSON.stringify(body), signal: AbortSignal.timeout(30_000) });
      const text = await res.text();
      this.latencies.push(performance.now() - started);
      this.completed++;
      const parsed = text ? (JSON.parse(text) as Record<string, any>) : {};
      if (res.status !== expected || parsed.errors) {
        this.error(`${method} ${path}: ${res.status} ${text.slice(0, 200)}`);
        return null;
      }
      return parsed;
    } catch (err) {
      this.error(`${method} ${path}: ${err instanceof Error ? err.message : String(err)}`);
      return null;
    }
  }

  async create(pinned: boolean) {
    const name = `soak-${process.pid}-${this.n++}`;
    const d = await this.call("POST", "/v2/deployments", { name, source: "internal_container", source_config: { deployment_type: "dev" }, source_revision_config: { image_uri: `r.example/${name}:1` } }, 201);
    if (!d) return;
    this.latest.set(d.id, d.latest_revision_id);
    (pinned ? this.pinned : this.recycled).push(d.id);
  }

  private any = () => { const all = [...this.recycled, ...this.pinned]; return all[Math.floor(Math.random() * all.length)]!; };

  /** Requests under way per deployment: a retired deployment is deleted once it has none. */
  private readonly inUse = new Map<string, number>();
  private readonly retired = new Set<string>();

  /** One request (a recycle is two) of the mix: two thirds reads, the rest writes. */
  async op(): Promise<void> {
    const id = this.any();
    this.inUse.set(id, (this.inUse.get(id) ?? 0) + 1);
    try {
      await this.request(id);
    } finally {
      const left = this.inUse.get(id)! - 1;
      if (left > 0) this.inUse.set(id, left);
      else {
        this.inUse.delete(id);
        if (this.retired.has(id)) void this.remove(id);
      }
    }
  }

  private async request(id: string): Promise<void> {
    const r = Math.random();
    if (r < 0.25) await this.call("GET", `/v2/deployments/${id}`, undefined, 200);
    else if (r < 0.37) await this.call("GET", "/v2/deployments?limit=20", undefined, 200);
    else if (r < 0.52) await this.call("GET", `/v2/deployments/${id}/revisions/${this.latest.get(id)}`, undefined, 200);
    else if (r < 0.6) await this.call("GET", `/v2/deployments/${id}/revisions?limit=5`, undefined, 200);
    else if (r < 0.7) {
      await this.call("POST", "/graphql", { query: "{ deployments(first: 20) { totalCount edges { node { name status latestRevision { status } activeRevision { id } } } } }" }, 200);
    } else if (r < 0.85) {
      const d = await this.call("PATCH", `/v2/deployments/${id}`, { source_revision_config: { image_uri: `r.example/soak:${this.n++}` } }, 200);
      if (d) this.latest.set(id, d.latest_revision_id);
    } else if (r < 0.95) {
      const rev = await this.call("POST", `/v2/deployments/${id}/revisions`, {}, 201);
      if (rev) this.latest.set(id, rev.id);
    } else await this.recycle();
  }

  /**
   * The oldest recycled deployment leaves the mix and is deleted once no request to it is under way
   * (at a rate near the maximum one may take seconds); a new one joins.
   */
  private async recycle() {
    const old = this.recycled.shift();
    if (old) {
      this.retired.add(old);
      if (!this.inUse.has(old)) void this.remove(old);
    }
    await this.create(false);
  }

  private async remove(id: string) {
    this.retired.delete(id);
    this.latest.delete(id);
    await this.call("DELETE", `/v2/deployments/${id}`, undefined, 204);
  }
}

const wsClient = (url: string) =>
  createClient({ url: `${url.replace(/^http/, "ws")}/graphql`, webSocketImpl: WebSocket, connectionParams: { "X-Api-Key": API_KEY }, retryAttempts: 0, lazy: true });

/** Subscription traffic: long-lived watches of the pinned deployments, and followers of revisions to their end. */
export class Subscriptions {
  messages = 0;
  streams = 0;
  private stopped = false;
  private readonly clients: Client[] = [];
  private readonly running: Promise<void>[] = [];

  constructor(
    private readonly url: string,
    private readonly traffic: Traffic,
    /** graphql-ws clients following one revision to its end, then the next. */
    private readonly followers: number,
  ) {}

  start() {
    for (const id of this.traffic.pinned) {
      const client = this.client();
      client.subscribe(
        { query: `subscription($id: ID!) { deploymentRevisionsChanged(deploymentId: $id) { kind revision { status } } }`, variables: { id: Buffer.from(`Deployment:${id}`).toString("base64") } },
        {
          next: (m) => (m.errors ? this.traffic.error(`deploymentRevisionsChanged: ${JSON.stringify(m.errors)}`) : this.messages++),
          error: (e) => this.stopped || this.traffic.error(`deploymentRevisionsChanged ended: ${JSON.stringify(e)}`),
          complete: () => this.stopped || this.traffic.error("deploymentRevisionsChanged completed"),
        },
      );
    }
    for (let i = 0; i < this.followers; i++) this.running.push(this.follow(this.client()));
  }

  private client() {
    const client = wsClient(this.url);
    this.clients.push(client);
    return client;
  }

  /** Follows the latest revision of a pinned deployment to its terminal status, then another. */
  private async follow(client: Client) {
    while (!this.stopped) {
      const deployment = this.traffic.pinned[Math.floor(Math.random() * this.traffic.pinned.length)]!;
      const revision = this.traffic.latest.get(deployment)!;
      const statuses: string[] = [];
      await new Promise<void>((resolve) => {
        client.subscribe(
          { query: `subscription($id: ID!) { revisionStatusChanged(revisionId: $id) { status } }`, variables: { id: Buffer.from(`Revision:${revision}`).toString("base64") } },
          {
            next: (m) => {
              this.messages++;
              if (m.errors) this.traffic.error(`revisionStatusChanged: ${JSON.stringify(m.errors)}`);
              else statuses.push((m.data as { revisionStatusChanged: { status: string } }).revisionStatusChanged.status);
            },
            error: (e) => {
              if (!this.stopped) this.traffic.error(`revisionStatusChanged ended: ${JSON.stringify(e)}`);
              resolve();
            },
            complete: () => {
              // Disposing the clients at the end completes the streams still open.
              if (this.stopped) return resolve();
              this.streams++;
              if (!/^(DEPLOYED|SKIPPED|INTERRUPTED|\w+_FAILED)$/.test(statuses.at(-1) ?? "")) this.traffic.error(`revision stream ended at ${statuses.join(">")}`);
              resolve();
            },
          },
        );
      });
    }
  }

  async stop() {
    this.stopped = true;
    await Promise.all(this.clients.map((c) => c.dispose()));
    await Promise.race([Promise.all(this.running), sleep(10_000)]);
  }
}
