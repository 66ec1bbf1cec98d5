import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type pg from "pg";
import type { DomainEvent, EventBus } from "../events/types.js";
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";

/** Where an operation or subscription came in: graphql-ws, or HTTP (SSE for subscriptions). */
export type Transport = "websocket" | "sse";

/** What a request did, filled in by whoever learns it (REST authentication, the GraphQL plugin). */
export interface RequestRecord {
  workspaceId?: string;
  keyId?: string;
  actor?: string;
  operationName?: string;
}

const SECONDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const STEP_SECONDS = [0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 30, 60, 300];

/**
 * The process's own metrics (CPU, memory, event loop, GC), collected once per process: each call of
 * collectDefaultMetrics installs observers that live as long as the process, and made per app they
 * kept every app (with its database) alive; the test suite, which starts many apps in one process,
 * grew until the kernel killed it.
 */
let processRegistry: Registry | null = null;
function processMetrics(): Registry {
  if (!processRegistry) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry, prefix: "dcp_process_" });
  }
  return processRegistry;
}

/** How many distinct GraphQL operation names get series of their own; later ones count as OTHER_OPERATIONS. */
const MAX_OPERATION_NAMES = 200;
const OTHER_OPERATIONS = "(other)";

/**
 * The service's Prometheus metrics, in a registry of its own (one per app: tests run many in one
 * process) merged with the process's. Served by serveMetrics on METRICS_PORT, never on the API's port.
 */
export class Metrics {
  /** This app's metrics and the process's, as served. */
  readonly registry: Registry;
  readonly httpRequests: Counter<"route" | "method" | "status">;
  readonly httpDuration: Histogram<"route" | "method" | "status">;
  readonly graphqlOperations: Counter<"operation" | "type" | "outcome">;
  readonly subscriptionsOpen: Gauge<"transport">;
  readonly revisionStatus: Counter<"status">;
  readonly stepDuration: Histogram<"status" | "outcome">;
  readonly eventBusLag: Histogram<"origin">;
  /** The operation names labelled so far (operationExecuted). */
  private readonly operationNames = new Set<string>();

  constructor(pool: () => pg.Pool | null) {
    const own = new Registry();
    const registers = [own];
    this.httpRequests = new Counter({
      name: "dcp_http_requests_total",
      help: "HTTP requests answered, by route pattern, method and status",
      labelNames: ["route", "method", "status"],
      registers,
    });
    this.httpDuration = new Histogram({
      name: "dcp_http_request_duration_seconds",
      help: "Time to answer an HTTP request (to the first byte of a streamed answer)",
      labelNames: ["route", "method", "status"],
      buckets: SECONDS,
      registers,
    });
    this.graphqlOperations = new Counter({
      name: "dcp_graphql_operations_total",
      help: `GraphQL operations executed, by operation name (the first ${MAX_OPERATION_NAMES} names seen; later ones as ${OTHER_OPERATIONS}), type and outcome (ok or error)`,
      labelNames: ["operation", "type", "outcome"],
      registers,
    });
    this.subscriptionsOpen = new Gauge({
      name: "dcp_graphql_subscriptions_open",
      help: "GraphQL subscriptions open now, by transport (websocket or sse)",
      labelNames: ["transport"],
      registers,
    });
    this.subscriptionsOpen.set({ transport: "websocket" }, 0);
    this.subscriptionsOpen.set({ transport: "sse" }, 0);
    this.revisionStatus = new Counter({
      name: "dcp_revisions_entered_status_total",
      help: "Revisions that entered each status (counted by the replica that made the change)",
      labelNames: ["status"],
      registers,
    });
    this.stepDuration = new Histogram({
      name: "dcp_pipeline_step_duration_seconds",
      help: "Pipeline steps performed by this replica's worker, by the status they ran in and their outcome",
      labelNames: ["status", "outcome"],
      buckets: STEP_SECONDS,
      registers,
    });
    this.eventBusLag = new Histogram({
      name: "dcp_event_bus_lag_seconds",
      help: "From an event's publication to its delivery here (origin: local, or remote for another replica's NOTIFY)",
      labelNames: ["origin"],
      buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 5],
      registers,
    });
    new Gauge({
      name: "dcp_db_pool_connections",
      help: "Database connections of this replica's pool, by state (total, idle, waiting clients); embedded PGlite is one connection",
      labelNames: ["state"],
      registers,
      collect() {
        const p = pool();
        this.set({ state: "total" }, p ? p.totalCount : 1);
        this.set({ state: "idle" }, p ? p.idleCount : 0);
        this.set({ state: "waiting" }, p ? p.waitingCount : 0);
      },
    });
    this.registry = Registry.merge([processMetrics(), own]);
  }

  /**
   * One GraphQL operation executed. Its name is the client's to choose: the first
   * MAX_OPERATION_NAMES names seen get series of their own, later ones count as "(other)", so that
   * a client sending a new name each time cannot grow the registry (and every scrape) without end.
   */
  operationExecuted(name: string, type: string, outcome: "ok" | "error"): void {
    let operation = name;
    if (!this.operationNames.has(name)) {
      if (this.operationNames.size < MAX_OPERATION_NAMES) this.operationNames.add(name);
      else operation = OTHER_OPERATIONS;
    }
    this.graphqlOperations.inc({ operation, type, outcome });
  }

  /** Open subscriptions of one transport: call the returned function once when it ends. */
  subscriptionOpened(transport: Transport): () => void {
    this.subscriptionsOpen.inc({ transport });
    let open = true;
    return () => {
      if (!open) return;
      open = false;
      this.subscriptionsOpen.dec({ transport });
    };
  }
}

/**
 * The metrics endpoint on a port of its own (METRICS_PORT): GET /metrics in Prometheus's text
 * format, nothing else. Kept off the API's port so that it is reachable only where the operator
 * exposes it (a scrape network), not wherever the API is.
 */
export async function serveMetrics(metrics: Metrics, port: number, host: string): Promise<{ server: Server; url: string }> {
  const server = createServer((req, res) => {
    if (req.method !== "GET" || (req.url ?? "").split("?")[0] !== "/metrics") {
      res.writeHead(404, { "content-type": "text/plain" }).end("Not Found: GET /metrics\n");
      return;
    }
    metrics.registry.metrics().then(
      (text) => res.writeHead(200, { "content-type": metrics.registry.contentType }).end(text),
      (err: unknown) => res.writeHead(500, { "content-type": "text/plain" }).end(`could not collect metrics: ${err instanceof Error ? err.message : String(err)}\n`),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve());
  });
  const { port: bound } = server.address() as AddressInfo;
  return { server, url: `http://${host.includes(":") ? `[${host}]` : host}:${bound}/metrics` };
}

/**
 * The bus core publishes on, counting each revision status change this replica makes (core
 * publishes one per committed change, so each change is counted once, by the replica that made it).
 */
export function countRevisionStatuses<B extends EventBus>(bus: B, metrics: Metrics): B {
  // A proxy, so that the bus is still what it is (tests and diagnostics look at its class).
  return new Proxy(bus, {
    get(target, property, receiver) {
      if (property !== "publish") return Reflect.get(target, property, receiver);
      return (event: DomainEvent) => {
        if (event.type === "revision.status") metrics.revisionStatus.inc({ status: event.status });
        return target.publish(event);
      };
    },
  });
}
