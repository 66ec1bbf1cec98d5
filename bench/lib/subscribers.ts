import { request as httpRequest, Agent } from "node:http";
import { createClient, type Client as WsClient } from "graphql-ws";
import WebSocket from "ws";
import { API_KEY } from "./server.js";

/**
 * A process of subscribers for the fan-out benchmark, started by bench/fanout.ts with an IPC channel:
 *
 *   { kind: "ws" | "sse", url, count, query, variables, field, status, batch }
 *
 * It opens `count` subscriptions (graphql-ws clients, one socket each, or SSE streams), each first
 * receiving the current status; reports "ready"; then records the wall-clock arrival time of the
 * first event whose `field.status` (or `field[key]`) equals `status`, and reports "arrivals" when all have arrived or
 * when asked. The times are absolute (performance.timeOrigin + now) so that the parent compares them
 * with its own.
 */
export interface SubscriberConfig {
  kind: "ws" | "sse";
  url: string;
  count: number;
  query: string;
  variables: Record<string, unknown>;
  /** The subscription field: data[field][key] is the value watched for. */
  field: string;
  /** The key of data[field] watched; "status" when omitted. */
  key?: string;
  /** The value whose arrival is timed (a status, a log line's message). */
  status: string;
  /** Subscriptions opened at once. */
  batch: number;
}

export type SubscriberMessage =
  | { type: "ready"; connected: number; failed: number; firstError?: string; seconds: number }
  | { type: "arrivals"; arrivals: number[]; missing: number };

export type ParentMessage = { type: "collect" } | { type: "close" };

const now = () => performance.timeOrigin + performance.now();
type Payload = { data?: Record<string, Record<string, unknown> | null> | null; errors?: unknown };

interface Subscription {
  /** Resolves at the first event (the current status), rejects on failure before it. */
  first: Promise<void>;
  close(): void;
}

const statusOf = (payload: Payload, config: SubscriberConfig) => {
  const value = payload.data?.[config.field]?.[config.key ?? "status"];
  return typeof value === "string" ? value : undefined;
};

function wsSubscribe(config: SubscriberConfig, onStatus: (status: string | undefined) => void): Subscription {
  const client: WsClient = createClient({
    url: config.url.replace(/^http/, "ws") + "/graphql",
    webSocketImpl: WebSocket,
    connectionParams: { "x-api-key": API_KEY },
    retryAttempts: 0,
    lazy: true,
  });
  let started = false;
  const first = new Promise<void>((resolve, reject) => {
    client.subscribe<Payload["data"]>(
      { query: config.query, variables: config.variables },
      {
        next: (payload) => {
          if (payload.errors) return reject(new Error(JSON.stringify(payload.errors).slice(0, 300)));
          if (!started) {
            started = true;
            return resolve();
          }
          onStatus(statusOf(payload as Payload, config));
        },
        error: (err) => reject(err instanceof Error ? err : new Error(JSON.stringify(err).slice(0, 300))),
        complete: () => resolve(),
      },
    );
  });
  return { first, close: () => void client.dispose() };
}

const sseAgent = new Agent({ keepAlive: false, maxSockets: Infinity });

function sseSubscribe(config: SubscriberConfig, onStatus: (status: string | undefined) => void): Subscription {
  const body = JSON.stringify({ query: config.query, variables: config.variables });
  let started = false;
  let close = () => {};
  const first = new Promise<void>((resolve, reject) => {
    const req = httpRequest(
      `${config.url}/graphql`,
      {
        method: "POST",
        agent: sseAgent,
        headers: {
          accept: "text/event-stream",
          "content-type": "application/json",
          "content-length": Buffer.byteLength(body),
          "x-api-key": API_KEY,
        },
      },
      (res) => {
        if (res.statusCode !== 200) return reject(new Error(`SSE answered ${res.statusCode}`));
        res.setEncoding("utf8");
        let buffer = "";
        res.on("data", (chunk: string) => {
          buffer += chunk;
          let end;
          while ((end = buffer.indexOf("\n\n")) !== -1) {
            const event = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            const data = event
              .split("\n")
              .filter((l) => l.startsWith("data:"))
              .map((l) => l.slice(5).trim())
              .join("\n");
            if (!/^event: *next/m.test(event) || data === "") continue;
            const payload = JSON.parse(data) as Payload;
            if (payload.errors) return reject(new Error(JSON.stringify(payload.errors).slice(0, 300)));
            if (!started) {
              started = true;
              resolve();
            } else {
              onStatus(statusOf(payload, config));
            }
          }
        });
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(body);
    close = () => req.destroy();
  });
  return { first, close: () => close() };
}

async function main(config: SubscriberConfig) {
  const send = (m: SubscriberMessage) => process.send!(m);
  const arrivals: number[] = [];
  const subscriptions: Subscription[] = [];
  let reported = false;
  const report = () => {
    if (reported) return;
    reported = true;
    send({ type: "arrivals", arrivals, missing: config.count - arrivals.length });
  };
  const onStatus = (status: string | undefined) => {
    if (status !== config.status) return;
    arrivals.push(now());
    if (arrivals.length === config.count) report();
  };
  process.on("message", (m: ParentMessage) => {
    if (m.type === "collect") report();
    if (m.type === "close") {
      for (const s of subscriptions) s.close();
      process.exit(0);
    }
  });

  const t0 = performance.now();
  let connected = 0;
  let failed = 0;
  let firstError: string | undefined;
  for (let i = 0; i < config.count; i += config.batch) {
    const batch = Array.from({ length: Math.min(config.batch, config.count - i) }, () =>
      config.kind === "ws" ? wsSubscribe(config, onStatus) : sseSubscribe(config, onStatus),
    );
    subscriptions.push(...batch);
    const settled = await Promise.allSettled(batch.map((s) => s.first));
    for (const s of settled) {
      if (s.status === "fulfilled") connected++;
      else {
        failed++;
        firstError ??= s.reason instanceof Error ? s.reason.message : String(s.reason);
      }
    }
  }
  send({ type: "ready", connected, failed, firstError, seconds: (performance.now() - t0) / 1000 });
}

process.once("message", (config: SubscriberConfig) => void main(config));
