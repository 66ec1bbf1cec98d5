import { randomUUID } from "node:crypto";
import { expect } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, type TestApp } from "./app.js";
import { addProvider, OAUTH_ENV, pathOf, storeToken } from "./oauth.js";
import { type OAuthServer, startOAuthServer } from "./oauth-server.js";
import { created } from "./fixtures.js";

/**
 * A workspace holding one object of every kind, and a valid request body for every endpoint that
 * takes one, with every documented field set: the fuzzers start from these and break them.
 */

/** A container using every documented container field. */
const container = (name: string) => ({
  name,
  image: "registry.example/sidecar:1",
  imagePullPolicy: "IfNotPresent",
  command: ["/bin/run"],
  args: ["--port", "9000"],
  workingDir: "/app",
  env: [{ name: "MODE", value: "fuzz" }, { name: "FROM", valueFrom: { secretKeyRef: { name: "s", key: "k" } } }],
  envFrom: [{ configMapRef: { name: "cm" } }],
  resources: { limits: { cpu: "1" }, requests: { cpu: "0.5" } },
  volumeMounts: [{ name: "data", mountPath: "/data", subPath: "x", mountPropagation: "None", readOnly: true, subPathExpr: "$(POD)" }],
  securityContext: { runAsNonRoot: true, capabilities: { drop: ["ALL"] } },
  restartPolicy: "Always",
});

const scaling = {
  stabilization_window_seconds: 60,
  select_policy: "Max",
  policies: [{ type: "Pods", value: 2, period_seconds: 30 }],
};

/** Every resource spec field of SPEC.md and of the reference (orchestrator_*, executor_*), each within its bounds. */
export const FULL_RESOURCE_SPEC = {
  min_scale: 1, max_scale: 3, cpu: 0.5, cpu_limit: 1, memory_mb: 512, memory_limit_mb: 1024,
  queue_min_scale: 1, queue_max_scale: 2, queue_cpu: 0.25, queue_cpu_limit: 0.5, queue_memory_mb: 256, queue_memory_limit_mb: 512,
  orchestrator_min_scale: 1, orchestrator_max_scale: 2, orchestrator_cpu: 0.5, orchestrator_cpu_limit: 1, orchestrator_memory_mb: 512, orchestrator_memory_limit_mb: 1024,
  executor_cpu: 1, executor_cpu_limit: 2, executor_memory_mb: 1024, executor_memory_limit_mb: 2048,
  cache_cpu: 0.1, cache_cpu_limit: 0.2, cache_memory_mb: 128, cache_memory_limit_mb: 256,
  core_cpu: 0.1, core_cpu_limit: 0.2, core_memory_mb: 128, core_memory_limit_mb: 256,
  db_cpu: 0.5, db_cpu_limit: 1, db_memory_mb: 512, db_memory_limit_mb: 1024, db_storage_gi: 10, db_max_connections: 100,
  labels: { team: "fuzz" },
  annotations: { "example.com/note": "n" },
  service_account_name: "agent",
  image_pull_secrets: [{ name: "regcred" }],
  volumes: [{ name: "data", emptyDir: {}, configMap: { name: "cm" }, projected: { sources: [{ configMap: { items: [{ key: "a", path: "b" }] } }] } }],
  volume_mounts: [{ name: "data", mountPath: "/data", readOnly: false }],
  init_containers: [container("init")],
  sidecars: [container("side")],
  cpu_target_percent: 80, cpu_scaling_enabled: true, cpu_limit_enabled: false,
  autoscaling_behavior: { scale_up: scaling, scale_down: scaling },
  queue_cpu_target_percent: 70, queue_cpu_scaling_enabled: false, queue_cpu_limit_enabled: true,
  queue_autoscaling_behavior: { scale_up: scaling },
};

export interface Fixtures {
  ws: NewWorkspace;
  /** A workspace reached through an organisation-wide key: X-Tenant-Id decides. */
  orgWide: NewWorkspace;
  other: NewWorkspace;
  deploymentId: string;
  revisionId: string;
  listenerId: string;
  installationId: string;
  agentId: string;
  connectionId: string;
  /** The OAuth provider (its provider_id), a token from a completed flow, and that flow (auth_id). */
  providerId: string;
  providerUuid: string;
  tokenId: string;
  authId: string;
  oauth: OAuthServer;
  bodies: Record<
    | "deploymentCreate" | "deploymentUpdate" | "revisionCreate" | "listenerCreate" | "listenerUpdate" | "connectionCreate" | "installationRegister"
    | "providerCreate" | "providerUpdate" | "mcpDiscover" | "authenticate" | "finalize" | "tokenUpdate" | "repositoriesSet" | "logQuery",
    object[]
  >;
}

/**
 * What an app needs for the fixtures (makeFixtures): no worker and no limits (the fuzzers send floods
 * on purpose), a registry named (push tokens need one; with no worker nothing ever calls it), and
 * OAuth providers on this machine (http).
 */
export const FUZZ_APP_ENV = { PIPELINE_WORKER: "off", RATE_LIMIT_PER_MINUTE: "0", AUTH_FAILURES_PER_MINUTE: "0", REGISTRY_URL: "http://127.0.0.1:9", ...OAUTH_ENV };

/**
 * The app a fuzz file drives, and its fixtures: no pipeline worker (only requests write, so any
 * change after a refused request is that request's), no rate limit, and bodies whose secrets carry a
 * value the app's leak guard watches for (no answer, log line or row may show it); the fuzzed bodies'
 * own secret values are not registered (see TestAppOptions.registerSecrets).
 */
export async function startFuzzApp(): Promise<{ t: TestApp; fx: Fixtures }> {
  const t = await startTestApp(FUZZ_APP_ENV, undefined, { registerSecrets: false });
  return { t, fx: await makeFixtures(t, t.guard.secret()) };
}

/** `secret` is the value the bodies' secrets carry: a leak guard watches for it. */
export async function makeFixtures(t: TestApp, secret = "fuzz-secret-value"): Promise<Fixtures> {
  const ws = await t.workspace();
  const orgWide = await t.workspace({ orgWide: true });
  const other = await t.workspace();
  const key = ws.apiKey;
  const listener = await created(t, key, "/v2/listeners", { compute_type: "k8s", compute_id: `fx-${randomUUID()}`, version: "1", compute_config: { k8s_namespaces: ["a"] } });
  const installation = await created(t, key, "/v2/integrations/forge-codehost/installations", {
    installation_id: 4242, name: "acme", repository_selection: "selected", settings_url: "https://github.com/settings/installations/4242",
  });
  // A real provider, a token from a completed flow, and a flow left pending with the code it got back.
  const oauth = await startOAuthServer();
  const stop = t.close;
  t.close = async () => {
    try {
      await stop();
    } finally {
      await oauth.close();
    }
  };
  const providerId = "fuzz-idp";
  const provider = await addProvider(t, oauth, key, providerId, { revocation_url: `${oauth.issuer}/token/revocation` });
  const started = await t.request("POST", "/v2/auth/authenticate", { key, body: { provider: providerId, scopes: ["openid"] } });
  const done = await t.request("GET", pathOf(await oauth.follow(started.body.url)));
  expect(done.status, done.text).toBe(200);
  const pending = await t.request("POST", "/v2/auth/authenticate", { key, body: { provider: providerId, scopes: ["openid"], force_new: true } });
  const back = await oauth.follow(pending.body.url);
  const agentId = "fuzz-agent";
  const connection = await created(t, key, `/v2/auth/agents/${agentId}/connections`, { oauth_token_id: done.body.token_id });
  const deployment = await created(t, key, "/v2/deployments", {
    name: "fuzz-target", source: "internal_container", source_config: { deployment_type: "dev" }, source_revision_config: { image_uri: "r.example/a:1" },
  });

  const secrets = [{ name: "API_TOKEN", value: secret }];
  const secret_references = [{ name: "DB_URL", secret_name: "db", secret_key: "url" }];
  const managedConfig = { custom_url: "https://agent.example.com", resource_spec: FULL_RESOURCE_SPEC, install_command: "npm ci", build_command: "npm run build", build_on_push: true, repo_branch: "main", deployment_type: "dev" };
  const codehost = {
    name: "fuzz-codehost", source: "codehost",
    source_config: { ...managedConfig, integration_id: installation.id, repo_url: "https://github.com/acme/agent", listener_config: { k8s_namespace: "ns" } },
    source_revision_config: { repo_ref: "main", framework_config_path: "agent.json", image_uri: null, source_tarball_path: null },
    secrets, secret_references, agent: { agent_id: agentId, environment: "production" }, shareable: true, route_through_gateway: false,
  };
  const selfHosted = {
    name: "fuzz-self-hosted", source: "external_container",
    source_config: { listener_id: listener.id, listener_config: { k8s_namespace: "a" }, resource_spec: FULL_RESOURCE_SPEC, deployment_type: "prod" },
    source_revision_config: { image_uri: "registry.example/agent:2" }, secrets, secret_references,
  };
  const update = {
    revision_source: "internal_source",
    // A host of its own: a host serves one deployment, and the creates above take managedConfig's.
    source_config: { ...managedConfig, custom_url: "https://target.example.com" },
    source_revision_config: { framework_config_path: "agent.json", source_tarball_path: "uploads/a.tgz", repo_ref: "v2", image_uri: "r.example/a:2" },
    secrets, secret_references, shareable: false, route_through_gateway: true,
  };
  return {
    ws, orgWide, other,
    deploymentId: deployment.id, revisionId: deployment.latest_revision_id,
    listenerId: listener.id, installationId: installation.id, agentId, connectionId: connection.id,
    providerId, providerUuid: provider.id, tokenId: done.body.token_id, authId: started.body.auth_id, oauth,
    bodies: {
      deploymentCreate: [codehost, selfHosted, { name: "fuzz-plain", source: "internal_container", source_config: { deployment_type: "dev" }, source_revision_config: {} }],
      deploymentUpdate: [update, { ...update, name: "fuzz-target", source: "internal_container" }],
      revisionCreate: [update],
      listenerCreate: [{ compute_type: "k8s", compute_id: "fuzz-cluster", compute_config: { k8s_namespaces: ["a", "b"] }, version: "1.2.3" }],
      listenerUpdate: [{ version: "2", compute_config: { k8s_namespaces: ["c"] } }],
      connectionCreate: [{ oauth_token_id: (await storeToken(t, key, { providerId })).id }],
      installationRegister: [{
        installation_id: 7, name: "fuzz", repository_selection: "all", settings_url: "https://github.com/settings/installations/7",
        repositories: [{ id: 70, owner: "fuzz", name: "agent", url: "https://github.com/fuzz/agent", default_branch: "main" }],
      }],
      providerCreate: [{
        provider_id: "fuzz-new", name: "Fuzz", client_id: "fuzz-client", client_secret: secret, auth_url: "https://fuzz.example/authorize",
        token_url: "https://fuzz.example/token", uses_pkce: true, code_challenge_method: "S256", provider_type: "slack",
        token_endpoint_auth_method: "client_secret_basic", revocation_url: "https://fuzz.example/revoke",
      }],
      providerUpdate: [{ name: "Fuzz IdP", client_id: null, uses_pkce: true, code_challenge_method: "S256" }],
      mcpDiscover: [{ provider_id: "fuzz-mcp", name: "Fuzz MCP", mcp_server_url: oauth.mcpUrl }],
      authenticate: [{ provider: providerId, scopes: ["openid"], user_id: null, agent_id: agentId, force_new: false, token_id: null, is_default: true }],
      finalize: [{ code: back.searchParams.get("code"), state: back.searchParams.get("state") }],
      tokenUpdate: [{ provider_account_label: "fuzz label", is_default: true }],
      repositoriesSet: [{ repositories: [{ id: 71, owner: "fuzz", name: "tools", url: "https://github.com/fuzz/tools", default_branch: "dev" }] }],
      logQuery: [
        { order: "asc", limit: 50, level: "INFO", query: "Revision", start_time: "2020-01-01T00:00:00Z", end_time: "2100-01-01T00:00:00+00:00" },
        { order: "desc", limit: 30, offset: null, level: null, query: null, start_time: 1577836800000, end_time: null },
      ],
    },
  };
}
