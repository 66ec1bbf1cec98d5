import { type ChildProcess, spawn } from "node:child_process";
import type { Client } from "./http.js";
import { ROOT } from "./server.js";
import type { ParentMessage, SubscriberConfig, SubscriberMessage } from "./subscribers.js";

/** A process of subscribers (bench/lib/subscribers.ts) and the messages it has sent. */
export interface Group {
  kind: "ws" | "sse";
  child: ChildProcess;
  messages: SubscriberMessage[];
  next(type: SubscriberMessage["type"], timeoutMs: number): Promise<SubscriberMessage>;
  send(m: ParentMessage): void;
}

export function startGroup(config: SubscriberConfig): Group {
  const child = spawn(process.execPath, ["--import", "tsx", "bench/lib/subscribers.ts"], {
    cwd: ROOT,
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const messages: SubscriberMessage[] = [];
  const waiters: (() => void)[] = [];
  child.on("message", (m: SubscriberMessage) => {
    messages.push(m);
    waiters.splice(0).forEach((w) => w());
  });
  child.send(config);
  return {
    kind: config.kind,
    child,
    messages,
    send: (m) => child.connected && child.send(m),
    next: (type, timeoutMs) =>
      new Promise((resolve, reject) => {
        const deadline = setTimeout(() => reject(new Error(`${config.kind} subscribers: no "${type}" within ${timeoutMs} ms`)), timeoutMs);
        const check = () => {
          const found = messages.find((m) => m.type === type);
          if (found) {
            clearTimeout(deadline);
            resolve(found);
          } else if (child.exitCode !== null) {
            clearTimeout(deadline);
            reject(new Error(`${config.kind} subscribers exited with ${child.exitCode}`));
          } else waiters.push(check);
        };
        child.once("exit", check);
        check();
      }),
  };
}

export async function closeGroup(g: Group): Promise<void> {
  if (g.child.exitCode !== null || g.child.signalCode !== null) return;
  const exited = new Promise((r) => g.child.once("exit", r));
  g.send({ type: "close" });
  const killer = setTimeout(() => g.child.kill("SIGKILL"), 10_000);
  await exited;
  clearTimeout(killer);
}

/** `total` split into `parts` near-equal positive counts. */
export const split = (total: number, parts: number) =>
  Array.from({ length: parts }, (_, i) => Math.floor(total / parts) + (i < total % parts ? 1 : 0)).filter((n) => n > 0);

export type Ready = Extract<SubscriberMessage, { type: "ready" }>;

/** Starts a group of `kind` subscribers per count (added to `groups`) and waits until each has subscribed. */
export async function openGroups(base: Omit<SubscriberConfig, "kind" | "count">, kind: "ws" | "sse", counts: number[], groups: Group[]): Promise<Ready[]> {
  const started = counts.map((count) => startGroup({ ...base, kind, count }));
  groups.push(...started);
  const readies: Ready[] = [];
  for (const g of started) readies.push((await g.next("ready", 600_000)) as Ready);
  const failed = readies.reduce((n, r) => n + r.failed, 0);
  if (failed > 0) throw new Error(`${failed} subscriptions failed: ${readies.find((r) => r.firstError)?.firstError}`);
  return readies;
}

/**
 * After the change made at `t0` (absolute ms, performance.timeOrigin + now): each transport's
 * delivery delays, and how many subscribers had not received it after `timeoutSeconds`.
 */
export async function collectDelays(groups: Group[], t0: number, timeoutSeconds: number): Promise<Record<"ws" | "sse", { delays: number[]; missing: number }>> {
  const results = await Promise.all(
    groups.map(async (g) => {
      const timer = setTimeout(() => g.send({ type: "collect" }), timeoutSeconds * 1000);
      const m = (await g.next("arrivals", timeoutSeconds * 1000 + 30_000)) as Extract<SubscriberMessage, { type: "arrivals" }>;
      clearTimeout(timer);
      return { kind: g.kind, ...m };
    }),
  );
  const of = (kind: "ws" | "sse") => {
    const mine = results.filter((r) => r.kind === kind);
    return { delays: mine.flatMap((r) => r.arrivals.map((a) => a - t0)), missing: mine.reduce((n, r) => n + r.missing, 0) };
  };
  return { ws: of("ws"), sse: of("sse") };
}

/** The global id (what subscriptions take) of a deployment's latest revision. */
export async function latestRevisionGlobalId(client: Client, deploymentId: string): Promise<string> {
  const found = await client.graphql<{ deployments: { edges: { node: { latestRevision: { id: string } } }[] } }>(
    `query ($ids: [ID!]) { deployments(first: 1, filter: { deploymentIds: $ids }) { edges { node { latestRevision { id } } } } }`,
    { ids: [deploymentId] },
  );
  const id = found.deployments.edges[0]?.node.latestRevision.id;
  if (!id) throw new Error("the seeded deployment is not in the GraphQL listing");
  return id;
}
