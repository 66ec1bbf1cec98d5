import { createHmac } from "node:crypto";
import { subscribe, unsubscribe } from "node:diagnostics_channel";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { createAdaptorServer } from "@hono/node-server";
import { Hono } from "hono";
import type { Config } from "./config.js";
import type { CoreDeps } from "./core/context.js";
import { createCore, type Core } from "./core/index.js";
import { tenantData } from "./core/tenant-data.js";
import { CursorCodec } from "./core/pagination.js";
import { loadSecretsKey, SecretBox } from "./core/secrets.js";
import { bootstrap } from "./core/workspaces.js";
import { DatabaseBlobStore } from "./core/blobs/database.js";
import { FolderBlobStore } from "./core/blobs/folder.js";
import { Registry } from "./core/registry/index.js";
import { TokenSigner } from "./core/registry/signer.js";
import { BuildInputs } from "./pipeline/build-inputs.js";
import { type Database, openDatabase, type PGliteLease, unreachableDatabase } from "./db/client.js";
import { migrate, migrationsApplied, readMigrations, unknownMigrations } from "./db/migrate.js";
import { startRetry } from "./db/start-retry.js";
import { type DataDirLock, lockDataDir, StartupError } from "./db/data-dir-lock.js";
import { isDatabaseUnavailable, isRefusedForGood } from "./core/prisma-errors.js";
import { Vacuum } from "./db/vacuum.js";
import { KEY_CACHE_MS, KeyRecheck } from "./core/auth.js";
import { createEventBus } from "./events/index.js";
import { createGraphQLServer, type GraphQLServer } from "./graphql/server.js";
import { graphqlRoute } from "./graphql/route.js";
import { attachWebSocket, type WebSocketFace } from "./graphql/ws.js";
import { createLogger, type Logger } from "./logger.js";
import { SimulatorRuntime } from "./pipeline/runtimes/simulator.js";
import { PipelineWorker, type WorkerOptions } from "./pipeline/worker.js";
import { deferredStart } from "./pipeline/deferred-start.js";
import { toErrorAnswer, withOtherProblems } from "./rest/errors.js";
import { CoreError } from "./core/errors.js";
import { idempotency } from "./middleware/idempotency.js";
import { limitBodySize, rateLimit } from "./middleware/limits.js";
import { limitFailedAuthentications } from "./middleware/auth-failures.js";
import { CallerLimits } from "./middleware/caller-limits.js";
import { restRoutes } from "./rest/index.js";
import { uploadRoutes } from "./rest/builds.js";
import { countRevisionStatuses, Metrics, serveMetrics } from "./middleware/metrics.js";
import { observeRequests, type ObservedEnv } from "./middleware/access-log.js";
import { API_VERSION, describe, methodsAt, openApiDocument, routesOf } from "./rest/docs.js";
import { referenceRoutes } from "./rest/reference.js";
import { z } from "zod";

export interface BuildOptions {
  logger?: Logger;
  /** PGlite only: start from this migrated snapshot instead of an empty database (tests). */
  pgliteSnapshot?: Blob;
  /** PGlite only: run on this lent database, handed back when the app stops (tests). */
  pgliteLease?: PGliteLease;
  /** Pipeline worker tuning (tests: short leases and polls). */
  pipeline?: Partial<WorkerOptions>;
  /** How often embedded PGlite is vacuumed (it has no autovacuum); default PGLITE_VACUUM_EVERY_MS. */
  vacuumEveryMs?: number;
  /** How often the API keys in use are re-read for revocations whose event never came; default KEY_CACHE_MS. */
  keyRecheckMs?: number;
  /**
   * When the pipeline worker starts: at once (an app used through fetch alone, as tests do), or once
   * start() has the server listening and /readyz has answered ready, or a second later (main.ts), so
   * that waiting work cannot hold readiness back.
   */
  workerStart?: "build" | "listen";
}

export interface App {
  readonly config: Config;
  readonly db: Database;
  readonly core: Core;
  /** What core stands on (the database client, events, secrets…): for tests that reach below core; faces call core only. */
  readonly deps: CoreDeps;
  readonly logger: Logger;
  /** The whole HTTP surface as a fetch handler: tests call it with no port. */
  fetch(request: Request): Promise<Response>;
  /** Listens on config.host:config.port (0 picks a free port); resolves with the base URL. */
  start(): Promise<string>;
  /** Stops the pipeline worker (its steps handed back), ends subscriptions, stops accepting, drains requests in flight, then closes the database. */
  stop(): Promise<void>;
  readonly server: Server | null;
  /** The pipeline worker of this instance; null when PIPELINE_WORKER=off. */
  readonly worker: PipelineWorker | null;
  /** The GraphQL server (yoga) behind /graphql and graphql-ws. */
  readonly graphql: GraphQLServer;
  /** The Prometheus metrics of this instance. */
  readonly metrics: Metrics;
  /** Where start() serves them (METRICS_PORT); null before start() or when off. */
  readonly metricsUrl: string | null;
}

export async function buildApp(config: Config, options: BuildOptions = {}): Promise<App> {
  const logger = options.logger ?? createLogger(config.logLevel);
  // Embedded PGlite owns its folder: a second process is told who has it instead of aborting inside PGlite.
  const lock = config.database.kind === "pglite" && config.database.dataDir ? lockDataDir(config.dataDir, "control plane server") : null;
  if (lock?.tookOverFrom) logger.warn({ data_dir: config.dataDir, stale_pid: lock.tookOverFrom }, "took over the DATA_DIR lock of a process that is gone");
  try {
    return await build(config, options, logger, lock);
  } catch (err) {
    lock?.release();
    throw err;
  }
}

async function build(config: Config, options: BuildOptions, logger: Logger, lock: DataDirLock | null): Promise<App> {
  logger.info(
    config.database.kind === "postgres"
      ? { database: "postgres" }
      : { database: "pglite", data_dir: config.database.dataDir ?? "memory" },
    config.database.kind === "postgres" ? "opening the database (DATABASE_URL)…" : "opening the embedded database (its first start initialises it, which takes a while)…",
  );
  const db = await openDatabase(config.database, { pgliteSnapshot: options.pgliteSnapshot, pgliteLease: options.pgliteLease, logger });
  const migrations = await readMigrations();
  // PostgreSQL may not answer yet (starting, failing over): the steps that need it wait for it.
  // One that answers but refuses for good (no such database, role or password) is not waited for.
  const step = startRetry({ transient: (err) => isDatabaseUnavailable(err) && !isRefusedForGood(err), logger, waitMs: config.databaseStartWaitMs });
  logger.info({ known: migrations.length }, "applying migrations…");
  let applied: string[];
  let unknown: string[];
  try {
    ({ applied, unknown } = await step("migrations", async () => ({
      applied: await migrate(db.sql, migrations),
      unknown: await unknownMigrations(db.sql, migrations),
    })));
  } catch (err) {
    await db.close().catch(() => {});
    if (config.database.kind === "postgres" && isDatabaseUnavailable(err)) {
      const waited = isRefusedForGood(err) ? "" : `; waited ${config.databaseStartWaitMs} ms (DATABASE_START_WAIT_MS)`;
      throw new StartupError(unreachableDatabase(config.database.url, err, waited));
    }
    throw err;
  }
  logger.info({ applied: applied.length, migrations: applied.length > 0 ? applied : undefined }, applied.length > 0 ? "applied migrations" : "migrations up to date");
  if (unknown.length > 0) {
    // Not refused: an older replica restarting during a rolling upgrade meets the same, and runs on.
    logger.warn(
      { unknown },
      "the database has migrations this version does not know: a newer version applied them, and this one may not work with the schema they made (roll forward, or restore the database from before them)",
    );
  }
  const vacuum = db.kind === "pglite" ? new Vacuum(db.sql, logger).start(options.vacuumEveryMs) : null;

  const secretsKey = loadSecretsKey(config.secretsKey, config.dataDir);
  const metrics = new Metrics(() => db.pool);
  const events = countRevisionStatuses(
    await step("events", () =>
      createEventBus(db, config.database.kind === "postgres" ? config.database.url : null, logger, (seconds) =>
        metrics.eventBusLag.observe({ origin: "remote" }, seconds),
      ),
    ),
    metrics,
  );
  const registry = config.registryUrl ? new Registry(config.registryUrl, new TokenSigner(secretsKey)) : null;
  if (registry) logger.info({ registry: registry.url, certificate: await registry.writeCertificate(config.dataDir) }, "registry token server: its certificate is written for the registry's auth.token.rootcertbundle");
  const deps: CoreDeps = {
    prisma: db.prisma,
    data: (tenant) => tenantData(db.prisma, tenant),
    prepared: db.prepared,
    events,
    secrets: new SecretBox(secretsKey, config.secretsKeyPrevious.map((k) => Buffer.from(k, "base64"))),
    cursors: new CursorCodec(createHmac("sha256", secretsKey).update("cursor-signing").digest()),
    deploymentDomain: config.deploymentDomain,
    internalImageBuilds: config.internalImageBuilds,
    // Uploads go where every replica sees them: the folder of the one embedded process, or PostgreSQL.
    blobs: db.kind === "pglite" ? new FolderBlobStore(config.dataDir) : new DatabaseBlobStore(db.prisma),
  };
  const core = createCore(
    deps,
    {
      jwtSecret: config.jwtSecret,
      maxTokenLifetimeSeconds: config.jwtMaxLifetimeSeconds,
      idempotencyFingerprintKey: createHmac("sha256", secretsKey).update("idempotency-fingerprint").digest(),
      registry,
      uploadSigningKey: createHmac("sha256", secretsKey).update("upload-url-signing").digest(),
      publicUrl: config.publicUrl,
      oauth: { ...config.oauth, publicUrl: config.publicUrl, logger: logger.child({ component: "oauth" }) },
      authLogger: logger.child({ component: "auth" }),
      subscriptionsPerCaller: config.limits.subscriptionsPerCaller,
    },
  );
  const keyRecheck = new KeyRecheck(core.auth, logger.child({ component: "auth" })).start(options.keyRecheckMs ?? KEY_CACHE_MS);

  const boot = await step("bootstrap", () => bootstrap(db.prisma, config.bootstrap));
  if (boot.kind === "created" && boot.printKey) {
    logger.info(
      { workspace_id: boot.workspaceId, api_key: boot.apiKey },
      "created a workspace and an API key: store the key now, it is not shown again",
    );
  } else if (boot.kind === "created" && boot.how === "new-beside-others") {
    logger.warn(
      { workspace_id: boot.workspaceId, other_workspaces: boot.others },
      "BOOTSTRAP_API_KEY: the data already has several workspaces and BOOTSTRAP_TENANT_ID names none, so the key got a NEW, empty workspace; set BOOTSTRAP_TENANT_ID to bind it to an existing one (npm run keys -- list shows them)",
    );
  } else if (boot.kind === "created" && boot.how === "only-workspace") {
    logger.info({ workspace_id: boot.workspaceId }, "BOOTSTRAP_API_KEY: bound to the existing workspace (the data folder's only one)");
  } else if (boot.kind === "created") {
    logger.info({ workspace_id: boot.workspaceId }, "provisioned BOOTSTRAP_API_KEY");
  }

  const worker = config.pipeline.worker
    ? new PipelineWorker(
        core.revisionWork,
        new SimulatorRuntime(config.pipeline.stepMs),
        logger.child({ component: "pipeline" }),
        {
          leaseMs: config.pipeline.leaseMs,
          crashLimit: config.pipeline.crashLimit,
          logRetentionMs: config.logs.retentionDays * 86_400_000,
          onStep: (status, outcome, seconds) => metrics.stepDuration.observe({ status, outcome }, seconds),
          ...options.pipeline,
        },
        new BuildInputs(registry, core.uploads),
      )
    : null;
  if (options.workerStart !== "listen") worker?.start();

  const http = new Hono<ObservedEnv>();
  // First: every request gets its id and its access line, whatever answers it.
  http.use("*", observeRequests(logger, metrics));
  // Per caller and per address, shared by HTTP and graphql-ws.
  const limits = new CallerLimits(config.limits.ratePerMinute, config.limits.authFailuresPerMinute);
  // Abuse protection ahead of every route, REST and /graphql alike: throttle first, then cap the body.
  http.use("*", rateLimit(limits, core.auth));
  http.use("*", limitFailedAuthentications(limits));
  // Source uploads stream in under their own limit (200 MiB): routed before the global body limit.
  http.route("/", uploadRoutes(core));
  http.use("*", limitBodySize(config.limits.maxBodyBytes));
  const probe = z.object({ status: z.string() });
  http.get("/healthz", describe({ tag: "Service", auth: "none", summary: "Liveness: the process answers", responses: { 200: { description: "Alive", schema: probe } } }, (c) => c.json({ status: "ok" })));
  http.get("/readyz", describe({ tag: "Service", auth: "none", summary: "Readiness: the database answers and its migrations are applied", responses: { 200: { description: "Ready", schema: probe }, 503: { description: "Not ready: migrations pending, or the database unreachable", schema: probe } } }, async (c) => {
    try {
      const ready = await migrationsApplied(db.sql, migrations);
      if (ready) workerWhenReady.ready();
      return ready ? c.json({ status: "ready" }) : c.json({ status: "migrations pending" }, 503);
    } catch {
      return c.json({ status: "database unreachable" }, 503);
    }
  }));
  const idempotent = idempotency(core.idempotency, core.auth, logger);
  http.use("/v1/*", idempotent);
  http.use("/v2/*", idempotent);
  http.route("/", restRoutes(core));
  const graphiql = !config.production;
  const graphql = createGraphQLServer(core, logger.child({ component: "graphql" }), {
    production: config.production,
    introspection: config.graphql.introspection,
    graphiql,
    metrics,
  });
  http.route("/", graphqlRoute(graphql, { graphiql }));
  // The REST reference, made from the routes above (and itself) on first request.
  http.route("/", referenceRoutes(() => openApiDocument(routesOf(http), API_VERSION)));
  // A known path asked with a method it does not take: 405 with Allow, as the reference (FastAPI) answers.
  let methods: ((path: string) => string[]) | null = null;
  http.notFound((c) => {
    methods ??= methodsAt(routesOf(http));
    const allow = methods(c.req.path);
    return allow.length > 0 ? c.json({ detail: "Method Not Allowed" }, 405, { Allow: allow.join(", ") }) : c.json({ detail: "Not Found" }, 404);
  });
  http.onError(async (err, c) => {
    const answer = toErrorAnswer(err instanceof CoreError ? await withOtherProblems(c, err) : err);
    if (answer) return c.json(answer.body, answer.status, answer.headers);
    logger.error({ err, method: c.req.method, path: c.req.path }, "unhandled error");
    return c.json({ detail: "Internal Server Error" }, 500);
  });

  let server: Server | null = null;
  let websockets: WebSocketFace | null = null;
  let metricsServer: Server | null = null;
  let metricsUrl: string | null = null;
  const workerWhenReady = deferredStart(() => worker?.start());
  const fetch = async (request: Request) => http.fetch(request);

  return {
    config,
    db,
    core,
    deps,
    logger,
    fetch,
    get server() {
      return server;
    },
    worker,
    graphql,
    metrics,
    get metricsUrl() {
      return metricsUrl;
    },
    async start() {
      const timeout = config.limits.requestTimeoutMs;
      server = createAdaptorServer({
        fetch: http.fetch,
        // Slow clients (slowloris) get 408 and lose the connection; Node checks every
        // connectionsCheckingInterval, so that runs at a fraction of the timeout.
        serverOptions: {
          requestTimeout: timeout,
          headersTimeout: timeout,
          connectionsCheckingInterval: Math.min(30_000, Math.max(25, Math.floor(timeout / 4))),
        },
      }) as Server;
      await new Promise<void>((resolve, reject) => {
        server!.once("error", (err) => reject(listenProblem("PORT", config.host, config.port, err)));
        server!.listen(config.port, config.host, () => resolve());
      });
      // graphql-ws shares the port: it answers the HTTP upgrade on /graphql.
      websockets = attachWebSocket(server, graphql, core, logger.child({ component: "graphql-ws" }), {
        production: config.production,
        maxPayloadBytes: config.limits.maxBodyBytes,
        limits,
        metrics,
      });
      if (config.metricsPort !== null) {
        try {
          ({ server: metricsServer, url: metricsUrl } = await serveMetrics(metrics, config.metricsPort, config.host));
        } catch (err) {
          const problem = listenProblem("METRICS_PORT", config.host, config.metricsPort, err);
          if (problem instanceof StartupError) throw problem;
          throw new Error(`METRICS_PORT: could not serve metrics on ${config.host}:${config.metricsPort} (${problem.message}); choose another port, 0 for any free one, or off`);
        }
        logger.info({ metrics: metricsUrl }, "metrics served");
      }
      if (options.workerStart === "listen") workerWhenReady.arm();
      const { port } = server.address() as AddressInfo;
      const url = `http://${config.host.includes(":") ? `[${config.host}]` : config.host}:${port}`;
      logger.info({ url }, `listening on ${url}`);
      return url;
    },
    async stop() {
      // The pipeline first: a draining replica claims no more steps and hands back those in progress
      // (aborted, their leases released) now, whatever the requests in flight take to drain; a stop
      // cut short after that (SIGKILL) leaves no lease held, so no crash is counted. Before the
      // database closes.
      workerWhenReady.disarm();
      await worker?.stop();
      // Subscribers are sent what was written until now (the lines saying where the worker's steps
      // stopped) before their streams end; the transports write what they took on the next turns.
      await core.watch.settle();
      await new Promise((resolve) => setImmediate(resolve));
      // Subscriptions end next (their sockets would otherwise hold the server open), and so do long-polls.
      await websockets?.close();
      // Its plugins stop listening to the core (the SSE streams' revocations), and end the SSE streams
      // still open, whose answers the server's close below would otherwise wait for for ever.
      await graphql.dispose();
      if (metricsServer) {
        const closing = new Promise<void>((resolve) => metricsServer!.close(() => resolve()));
        metricsServer.closeAllConnections();
        await closing;
      }
      core.oauthFlows.close();
      if (server) {
        const closing = new Promise<void>((resolve) => server!.close(() => resolve()));
        // Idle connections close now; one still answering (an SSE stream just ended, a request in
        // flight) as soon as its answer is sent, rather than when its keep-alive runs out (5 s).
        const closeOnceAnswered = (message: unknown) => {
          if ((message as { server?: unknown }).server === server) setImmediate(() => server?.closeIdleConnections());
        };
        subscribe("http.server.response.finish", closeOnceAnswered);
        server.closeIdleConnections();
        try {
          await closing;
        } finally {
          unsubscribe("http.server.response.finish", closeOnceAnswered);
        }
      }
      await keyRecheck.stop();
      await events.close();
      await vacuum?.stop();
      await db.close();
      lock?.release();
    },
  };
}

/** A database URL without its password, for messages. */
/**
 * Why the service could not listen, as one line naming the setting to change (StartupError): the
 * port in use, not allowed, or HOST not an address of this machine; any other error as it is.
 */
function listenProblem(setting: "PORT" | "METRICS_PORT", host: string, port: number, err: unknown): Error {
  const code = (err as NodeJS.ErrnoException | null)?.code;
  const where = `${host}:${port}`;
  switch (code) {
    case "EADDRINUSE":
      return new StartupError(`${setting}=${port}: ${where} is in use by another process`);
    case "EACCES":
      return new StartupError(`${setting}=${port}: this user may not listen on ${where} (ports under 1024 need privileges)`);
    case "EADDRNOTAVAIL":
    case "ENOTFOUND":
    case "EAI_AGAIN":
      return new StartupError(`HOST=${host}: not an address of this machine (${code})`);
    default:
      return err instanceof Error ? err : new Error(String(err));
  }
}
