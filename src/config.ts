import { z } from "zod";

/** An http(s) URL without query, fragment or credentials; a trailing slash is dropped. */
function httpUrl(what: string) {
  return z
    .string()
    .refine((v) => {
      try {
        const u = new URL(v);
        return /^https?:$/.test(u.protocol) && !u.search && !u.hash && !u.username && !u.password;
      } catch {
        return false;
      }
    }, `must be ${what}, without query or credentials`)
    .transform((v) => v.replace(/\/+$/, ""));
}

/**
 * A whole number, in decimal digits (spaces around them aside). z.coerce.number() read an empty
 * value as 0 (PORT= listened on any port, AUTH_FAILURES_PER_MINUTE= turned the limit off), and took
 * 0x46B4 and 1e2 as well.
 */
function envInt(min: number, max: number) {
  return z
    .string()
    .regex(/^\s*\d+\s*$/, "must be a whole number in decimal digits")
    .transform(Number)
    .pipe(z.number().min(min).max(max));
}

/** A host name (letters, digits and hyphens, in dot-separated labels): deployments' URLs are made under it. */
const HOST_NAME = /^(?!-)[A-Za-z0-9-]{1,63}(?<!-)(\.(?!-)[A-Za-z0-9-]{1,63}(?<!-))*$/;

/** Every setting the service reads, from the environment, with embedded defaults. */
const envSchema = z.object({
  PORT: envInt(0, 65535).default(8080),
  HOST: z.string().min(1).default("127.0.0.1"),
  DATABASE_URL: z
    .string()
    .refine((v) => v === "memory://" || (/^postgres(ql)?:\/\//.test(v) && URL.canParse(v)), {
      message: "must be memory:// or a postgres:// URL",
    })
    .optional(),
  /** How long start-up waits (retrying with backoff) for a PostgreSQL that does not answer; 0: not at all. */
  DATABASE_START_WAIT_MS: envInt(0, 86_400_000).default(120_000),
  DATA_DIR: z.string().min(1).default("./.data"),
  BOOTSTRAP_API_KEY: z.string().min(16, "must be at least 16 characters").optional(),
  BOOTSTRAP_TENANT_ID: z.uuid().optional(),
  JWT_SECRET: z.string().min(32, "must be at least 32 characters").optional(),
  /** Bearer tokens that would live longer than this (exp - iat, or exp - now) are refused. */
  JWT_MAX_LIFETIME_SECONDS: envInt(1, 31_536_000).default(86_400),
  SECRETS_KEY: z
    .string()
    .regex(/^[A-Za-z0-9+/]{43}=$/, "must be 32 bytes, base64-encoded")
    .optional(),
  /** Keys that sealed secrets before SECRETS_KEY: still opened, and re-sealed by `npm run secrets:rotate`. */
  SECRETS_KEY_PREVIOUS: z
    .string()
    .regex(/^\s*([A-Za-z0-9+/]{43}=\s*(,\s*[A-Za-z0-9+/]{43}=\s*)*)?$/, "must be comma separated 32-byte base64 keys")
    .optional(),
  MAX_BODY_BYTES: envInt(1, 1_073_741_824).default(1_048_576),
  RATE_LIMIT_PER_MINUTE: envInt(0, 1_000_000).default(1200),
  /** Failed authentications (401) per client address and minute before it is refused with 429; 0: no limit. */
  AUTH_FAILURES_PER_MINUTE: envInt(0, 1_000_000).default(60),
  /** Live subscriptions one caller may hold open on a replica, over graphql-ws and SSE together; 0: no limit. */
  SUBSCRIPTIONS_PER_CALLER: envInt(0, 1_000_000).default(1000),
  REQUEST_TIMEOUT_MS: envInt(1, 3_600_000).default(30_000),
  PIPELINE_STEP_MS: envInt(0, 600_000).default(1500),
  PIPELINE_WORKER: z.enum(["on", "off"]).default("on"),
  /** How long a claimed step stays a worker's without renewal: how soon a crashed process's steps run again. */
  PIPELINE_LEASE_MS: envInt(1, 3_600_000).default(10_000),
  /**
   * A step the service stopped in this many times while running it alone (a build that takes the
   * process down with it) fails its revision instead of running again; 0: never.
   */
  PIPELINE_CRASH_LIMIT: envInt(0, 1_000).default(2),
  DEPLOYMENT_DOMAIN: z.string().regex(HOST_NAME, "must be a host name such as deployments.example.com").default("deployments.localhost"),
  /** The cloud provider this installation runs on; named in the messages that depend on it. */
  CLOUD_PROVIDER: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9 ._-]{0,62}$/, "must be a short name such as aws or gcp").optional(),
  /** off where the provider cannot run internal image builds: internal_container revisions are refused (400). */
  INTERNAL_IMAGE_BUILDS: z.enum(["on", "off"]).default("on"),
  LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
  NODE_ENV: z.enum(["development", "production", "test"]).default("development"),
  /** Unset: introspection on outside production, off in production. */
  GRAPHQL_INTROSPECTION: z.enum(["on", "off"]).optional(),
  /** The container registry (CNCF Distribution) whose token server this service is; unset: none. */
  REGISTRY_URL: httpUrl("an http(s) URL such as https://registry.example.com").optional(),
  /**
   * This service's address as clients and browsers reach it: the base of signed upload URLs and of
   * OAuth redirects (PUBLIC_URL/v2/auth/callback/<provider>); unset: the request's own origin.
   */
  PUBLIC_URL: httpUrl("an http(s) URL such as https://deploy.example.com").optional(),
  /** Revision log lines older than this many days are deleted by the pipeline workers' sweep. */
  LOG_RETENTION_DAYS: envInt(1, 3650).default(30),
  /** on: OAuth provider endpoints may be http:// (a provider on this machine); https only otherwise. */
  OAUTH_ALLOW_HTTP: z.enum(["on", "off"]).default("off"),
  /** How long a user has to authorize at the provider once a flow starts. */
  OAUTH_FLOW_TTL_SECONDS: envInt(10, 86_400).default(600),
  /**
   * Prometheus metrics (GET /metrics) on a port of their own, on HOST, never on the API's port:
   * a port number (default 9464), 0 for any free port (the URL is logged), or off.
   */
  METRICS_PORT: z
    .union([z.literal("off"), envInt(0, 65535)], { error: "must be a port number, 0 (any free port) or off" })
    .default(9464),
});

export type Env = z.input<typeof envSchema>;

export interface InternalImageBuilds {
  available: boolean;
  /** CLOUD_PROVIDER, when set. */
  provider: string | null;
}

export interface Config {
  port: number;
  host: string;
  database: { kind: "pglite"; dataDir: string | null } | { kind: "postgres"; url: string };
  /** How long start-up retries a database that cannot be reached. */
  databaseStartWaitMs: number;
  dataDir: string;
  bootstrap: { apiKey?: string; tenantId?: string };
  jwtSecret?: string;
  /** Bearer tokens that would live longer are refused. */
  jwtMaxLifetimeSeconds: number;
  secretsKey?: string;
  /** Base64 keys that may have sealed stored secrets before secretsKey. */
  secretsKeyPrevious: string[];
  limits: {
    /** Larger request bodies answer 413 before anything parses them. */
    maxBodyBytes: number;
    /** Requests per minute per caller; 0 turns the limit off. */
    ratePerMinute: number;
    /** Failed authentications per minute per client address; 0 turns the limit off. */
    authFailuresPerMinute: number;
    /** Live subscriptions one caller may hold open on this replica; 0 turns the limit off. */
    subscriptionsPerCaller: number;
    /** A request (headers and body) must arrive within this; slower clients get 408 and are cut off. */
    requestTimeoutMs: number;
  };
  pipeline: { stepMs: number; worker: boolean; leaseMs: number; crashLimit: number };
  deploymentDomain: string;
  /** Whether internal_container revisions (images built and pushed by the command-line tool) are accepted. */
  internalImageBuilds: InternalImageBuilds;
  logLevel: string;
  production: boolean;
  graphql: { introspection: boolean };
  /** REGISTRY_URL: the registry this service issues push and pull tokens for; null when none. */
  registryUrl: string | null;
  /** PUBLIC_URL: the base of the URLs this service hands out; null: the request's origin. */
  publicUrl: string | null;
  /** Revisions' build and deploy logs. */
  logs: { retentionDays: number };
  /** The agents' OAuth service: http:// providers allowed (OAUTH_ALLOW_HTTP), a flow's lifetime. */
  oauth: { allowHttp: boolean; flowTtlSeconds: number };
  /** METRICS_PORT: where /metrics is served (0: any free port); null: not at all. */
  metricsPort: number | null;
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
    this.name = "ConfigError";
  }
}

/** Parses the environment; throws a ConfigError that names every bad setting. */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const parsed = envSchema.safeParse(env);
  if (!parsed.success) {
    throw new ConfigError(parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`));
  }
  const e = parsed.data;
  if (e.BOOTSTRAP_TENANT_ID && !e.BOOTSTRAP_API_KEY) {
    throw new ConfigError(["BOOTSTRAP_TENANT_ID: requires BOOTSTRAP_API_KEY"]);
  }
  const url = e.DATABASE_URL;
  return {
    port: e.PORT,
    host: e.HOST,
    database:
      url === undefined
        ? { kind: "pglite", dataDir: `${e.DATA_DIR}/pglite` }
        : url === "memory://"
          ? { kind: "pglite", dataDir: null }
          : { kind: "postgres", url },
    databaseStartWaitMs: e.DATABASE_START_WAIT_MS,
    dataDir: e.DATA_DIR,
    bootstrap: { apiKey: e.BOOTSTRAP_API_KEY, tenantId: e.BOOTSTRAP_TENANT_ID },
    jwtSecret: e.JWT_SECRET,
    jwtMaxLifetimeSeconds: e.JWT_MAX_LIFETIME_SECONDS,
    secretsKey: e.SECRETS_KEY,
    secretsKeyPrevious: (e.SECRETS_KEY_PREVIOUS ?? "").split(",").map((k) => k.trim()).filter((k) => k !== ""),
    limits: {
      maxBodyBytes: e.MAX_BODY_BYTES,
      ratePerMinute: e.RATE_LIMIT_PER_MINUTE,
      authFailuresPerMinute: e.AUTH_FAILURES_PER_MINUTE,
      subscriptionsPerCaller: e.SUBSCRIPTIONS_PER_CALLER,
      requestTimeoutMs: e.REQUEST_TIMEOUT_MS,
    },
    pipeline: { stepMs: e.PIPELINE_STEP_MS, worker: e.PIPELINE_WORKER === "on", leaseMs: e.PIPELINE_LEASE_MS, crashLimit: e.PIPELINE_CRASH_LIMIT },
    deploymentDomain: e.DEPLOYMENT_DOMAIN,
    internalImageBuilds: { available: e.INTERNAL_IMAGE_BUILDS === "on", provider: e.CLOUD_PROVIDER ?? null },
    logLevel: e.LOG_LEVEL,
    production: e.NODE_ENV === "production",
    graphql: { introspection: e.GRAPHQL_INTROSPECTION ? e.GRAPHQL_INTROSPECTION === "on" : e.NODE_ENV !== "production" },
    registryUrl: e.REGISTRY_URL ?? null,
    publicUrl: e.PUBLIC_URL ?? null,
    logs: { retentionDays: e.LOG_RETENTION_DAYS },
    oauth: { allowHttp: e.OAUTH_ALLOW_HTTP === "on", flowTtlSeconds: e.OAUTH_FLOW_TTL_SECONDS },
    metricsPort: e.METRICS_PORT === "off" ? null : e.METRICS_PORT,
  };
}
