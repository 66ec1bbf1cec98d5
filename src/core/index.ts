import type { Logger } from "../logger.js";
import { Authenticator } from "./auth.js";
import { ApiKeyService } from "./api-keys.js";
import type { CoreDeps } from "./context.js";
import { ListenerService } from "./listeners.js";
import { deploymentServices } from "./deployments.js";
import { InstallationService } from "./installations.js";
import { ConnectionService } from "./connections.js";
import { BatchReads } from "./batch-reads.js";
import { IdempotencyService } from "./idempotency.js";
import { LogService } from "./logs.js";
import { RevisionPages } from "./revision-pages.js";
import { Watcher } from "./watch.js";
import { PushTokenService } from "./push-tokens.js";
import type { Registry } from "./registry/index.js";
import { UploadService } from "./uploads.js";
import { OAuthClient, PROVIDER_TIMEOUT_SECONDS } from "./oauth-client.js";
import { type OAuthSettings, ProviderService } from "./oauth-providers.js";
import { TokenVault } from "./oauth-tokens.js";
import { FlowService } from "./oauth-flows.js";
import { RepositoryService } from "./repositories.js";
import { SubscriptionQuota } from "./subscription-quota.js";
import { RevisionWork, type RevisionWorkOptions } from "./revision-work.js";

/** The core: one service per resource, all over the same dependencies. Faces call only this. */
export function createCore(
  deps: CoreDeps,
  options: {
    jwtSecret?: string;
    /** Bearer tokens meant to live longer are refused (default: a day). */
    maxTokenLifetimeSeconds?: number;
    /** Keys the fingerprints of Idempotency-Key requests (derived from SECRETS_KEY). */
    idempotencyFingerprintKey: Buffer;
    /** The container registry this service is the token server of (REGISTRY_URL); null: none. */
    registry: Registry | null;
    /** Signs upload URLs (derived from SECRETS_KEY). */
    uploadSigningKey: Buffer;
    /** PUBLIC_URL: the base of upload URLs; null: the request's origin. */
    publicUrl: string | null;
    /** The agents' OAuth service: where browsers reach this service, http providers, flow lifetime. */
    oauth: OAuthSettings;
    /** Where the authenticator reports a re-check of keys that failed (after the event bus resynced). */
    authLogger?: Logger;
    /** SUBSCRIPTIONS_PER_CALLER: live subscriptions one caller may hold open here (0: no limit). */
    subscriptionsPerCaller: number;
  },
) {
  const subscriptions = new SubscriptionQuota(options.subscriptionsPerCaller);
  const oauthClient = new OAuthClient({ allowHttp: options.oauth.allowHttp, timeoutSeconds: PROVIDER_TIMEOUT_SECONDS });
  const oauthTokens = new TokenVault(deps, options.oauth, oauthClient);
  const oauthProviders = new ProviderService(deps, options.oauth, oauthClient, oauthTokens);
  const auth = new Authenticator(
    deps.prisma,
    { jwtSecret: options.jwtSecret, maxTokenLifetimeSeconds: options.maxTokenLifetimeSeconds, logger: options.authLogger },
    deps.events,
  );
  return {
    auth,
    /** API keys after the first start (npm run keys): hashes only; revocation reaches every replica. */
    apiKeys: new ApiKeyService(deps.prisma, deps.events),
    listeners: new ListenerService(deps),
    ...deploymentServices(deps),
    installations: new InstallationService(deps),
    connections: new ConnectionService(deps, oauthTokens),
    repositories: new RepositoryService(deps),
    /** The agents' OAuth service: providers, the token vault, authorization flows. */
    oauthProviders,
    oauthTokens,
    oauthFlows: new FlowService(deps, options.oauth, oauthClient, oauthProviders, oauthTokens, subscriptions, auth),
    /** Idempotency-Key on POSTs: the first answer, replayed. */
    idempotency: new IdempotencyService(deps, options.idempotencyFingerprintKey),
    /** Batch loads, counts and per-parent pages for the GraphQL face's DataLoaders. */
    batch: new BatchReads(deps),
    revisionPages: new RevisionPages(deps),
    /** Live views for subscriptions. */
    watch: new Watcher(deps, { subscriptions }),
    registry: options.registry,
    /** Push tokens of the command-line tool, and the registry's token server. */
    pushTokens: new PushTokenService(deps, options.registry),
    /** Signed upload URLs and the source tarballs uploaded through them. */
    uploads: new UploadService(deps, deps.blobs, options.uploadSigningKey, options.publicUrl),
    /** Revisions' build and deploy logs. */
    logs: new LogService(deps),
    /** A pipeline worker's leases, steps, log lines and sweeps (src/pipeline/worker.ts). */
    revisionWork: (work: RevisionWorkOptions, logger: Logger) => new RevisionWork(deps, work, logger),
  };
}

export type Core = ReturnType<typeof createCore>;
