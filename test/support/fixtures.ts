import { randomUUID } from "node:crypto";
import type { Tenant } from "../../src/core/auth.js";
import type { TestApp, TestResponse } from "./app.js";

/**
 * Builders for what many tests set up before the part they test: bodies the API accepts (override
 * any field), and the POSTs that create the resources, failing loudly when the set-up itself fails.
 */

type Fields = Record<string, unknown>;

/**
 * A well-formed UUID of no RFC 9562 version or variant: pydantic (the reference service) and
 * PostgreSQL take it as a UUID, so an id like it is looked up (404), not refused (422).
 */
export const ANY_UUID = "12345678-1234-1234-1234-123456789012";

/** A listener body the API accepts: a k8s cluster with a unique compute_id. */
export const listenerBody = (overrides: Fields = {}): Fields => ({
  compute_type: "k8s",
  compute_id: `c-${randomUUID()}`,
  version: "1",
  compute_config: { k8s_namespaces: ["default"] },
  ...overrides,
});

/** A code-hosting installation body the API accepts, with a unique installation_id. */
export const installationBody = (overrides: Fields = {}): Fields => ({
  installation_id: Math.floor(Math.random() * 1_000_000_000),
  name: `inst-${randomUUID().slice(0, 8)}`,
  ...overrides,
});

/** A deployment body the API accepts: a managed internal_container deployment of an image, with a unique name. */
export const deploymentBody = (overrides: Fields = {}): Fields => ({
  name: `dep-${randomUUID().slice(0, 8)}`,
  source: "internal_container",
  source_revision_config: { image_uri: "registry.example.com/agent:1" },
  ...overrides,
});

/** A codehost deployment body of the installation's repository, built from main. */
export const codehostDeploymentBody = (integrationId: string, overrides: Fields = {}): Fields =>
  deploymentBody({
    source: "codehost",
    source_config: { integration_id: integrationId, repo_url: "https://codehost.example/acme/agent" },
    source_revision_config: { repo_ref: "main", framework_config_path: "langgraph.json" },
    ...overrides,
  });

/** A self-hosted (external_container) deployment body: an image that the listener's cluster runs. */
export const selfHostedDeploymentBody = (listenerId: string, overrides: Fields = {}): Fields =>
  deploymentBody({
    source: "external_container",
    source_config: { listener_id: listenerId },
    source_revision_config: { image_uri: "docker.io/a/b:1" },
    ...overrides,
  });

/** The caller a key stands for, as core sees it: for tests that call core directly. */
export const tenantOf = (t: Pick<TestApp, "app">, apiKey: string): Promise<Tenant> => t.app.core.auth.authenticate({ apiKey });

/** POSTs `body` with the workspace's key and returns the created resource; anything but 201 fails the test. */
export async function created(t: Pick<TestApp, "request">, key: string, path: string, body: unknown): Promise<TestResponse["body"]> {
  const res = await t.request("POST", path, { key, body });
  if (res.status !== 201) throw new Error(`set-up: POST ${path} answered ${res.status}: ${res.text}`);
  return res.body;
}

/** Registers a listener in the workspace; returns its id. */
export const createListener = async (t: Pick<TestApp, "request">, key: string, overrides: Fields = {}) =>
  (await created(t, key, "/v2/listeners", listenerBody(overrides))).id as string;

/** Registers a code-hosting installation in the workspace; returns its id. */
export const createInstallation = async (t: Pick<TestApp, "request">, key: string, overrides: Fields = {}) =>
  (await created(t, key, "/v2/integrations/forge-codehost/installations", installationBody(overrides))).id as string;
