import { randomUUID } from "node:crypto";
import type { TestApp, TestResponse } from "./app.js";

/**
 * Builders for what many tests set up before the part they test: bodies the API accepts (override
 * any field), and the POSTs that create the resources, failing loudly when the set-up itself fails.
 */

type Fields = Record<string, unknown>;

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
