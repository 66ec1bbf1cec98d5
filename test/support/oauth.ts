import { expect } from "vitest";
import type { Tenant } from "../../src/core/auth.js";
import type { OAuthToken } from "../../src/core/oauth-tokens.js";
import type { TestApp } from "./app.js";
import { tenantOf } from "./fixtures.js";
import type { OAuthServer } from "./oauth-server.js";

/** Where the test app says providers send browsers back (PUBLIC_URL of the OAuth tests). */
export const PUBLIC_URL = "http://test";
/** Settings of an app whose providers run on this machine (http) and whose public URL is the test's. */
export const OAUTH_ENV = { OAUTH_ALLOW_HTTP: "on", PUBLIC_URL };

/** The answers whose purpose is to hand an access token to its owner: anywhere else it is a leak. */
export const TOKEN_ANSWERS = /^(POST \/v2\/auth\/authenticate|GET \/v2\/auth\/wait\/[^ ]+) -> 200$/;

export const callbackUrl = (providerId: string) => `${PUBLIC_URL}/v2/auth/callback/${providerId}`;

/**
 * Registers an application at the test provider (as an administrator would) and configures it in the
 * workspace through the REST API; the client secret is registered with the leak guard.
 */
export async function addProvider(
  t: TestApp,
  server: OAuthServer,
  key: string,
  providerId: string,
  extra: Record<string, unknown> = {},
): Promise<Record<string, any>> {
  const { clientId, clientSecret } = await server.addClient({ redirectUris: [callbackUrl(providerId)] });
  const res = await t.request("POST", "/v2/auth/providers", {
    key,
    body: {
      provider_id: providerId,
      name: `Provider ${providerId}`,
      client_id: clientId,
      client_secret: t.guard.secret(clientSecret!),
      auth_url: `${server.issuer}/auth`,
      token_url: `${server.issuer}/token`,
      uses_pkce: true,
      ...extra,
    },
  });
  expect(res.status, res.text).toBe(200);
  return res.body;
}

/** The path and query of a URL the provider sent the browser back to (the test app answers at any host). */
export const pathOf = (url: URL) => `${url.pathname}${url.search}`;

/**
 * One whole authorization: authenticate (pending), the user consents at the provider, the browser
 * lands on the callback. Returns the callback's answer and the flow's id; tokens registered with the guard.
 */
export async function authorize(
  t: TestApp,
  server: OAuthServer,
  key: string,
  provider: string,
  scopes: string[],
  options: { account?: string; body?: Record<string, unknown> } = {},
) {
  const started = await t.request("POST", "/v2/auth/authenticate", { key, body: { provider, scopes, ...options.body } });
  expect(started.status, started.text).toBe(200);
  expect(started.body.status, started.text).not.toBe("completed");
  const back = await server.follow(started.body.url, { account: options.account });
  const callback = await t.request("GET", pathOf(back));
  expect(callback.status, callback.text).toBe(200);
  return { authId: started.body.auth_id as string, callback: callback.body, started: started.body };
}

/** The access token the service hands its owner now (authenticate), registered with the guard. */
export async function accessTokenOf(t: TestApp, key: string, provider: string, scopes: string[] = []): Promise<string> {
  const res = await t.request("POST", "/v2/auth/authenticate", { key, body: { provider, scopes } });
  expect(res.status, res.text).toBe(200);
  expect(res.body.status, res.text).toBe("completed");
  return t.guard.secret(res.body.token, { shownIn: TOKEN_ANSWERS });
}

/**
 * A token stored through core as if a provider had issued it (no provider is called), for tests of
 * what uses tokens (connections): a provider configured by hand, and made-up token values, watched
 * by the guard.
 */
export async function storeToken(
  t: TestApp,
  key: string,
  options: { providerId?: string; scopes?: string[]; label?: string | null; expiresAt?: Date | null; tenant?: Tenant } = {},
): Promise<OAuthToken> {
  const tenant = options.tenant ?? (await tenantOf(t, key));
  const providerId = options.providerId ?? "github";
  const provider =
    (await t.app.core.oauthProviders.find(tenant, providerId)) ??
    (await t.app.core.oauthProviders.create(tenant, {
      provider_id: providerId,
      name: providerId,
      client_id: `client-${providerId}`,
      client_secret: t.guard.secret(),
      auth_url: "https://provider.example/authorize",
      token_url: "https://provider.example/token",
    }));
  return t.app.core.oauthTokens.save(
    tenant,
    provider,
    {
      accessToken: t.guard.secret(),
      refreshToken: t.guard.secret(),
      tokenType: "bearer",
      scopes: options.scopes ?? ["repo"],
      expiresAt: options.expiresAt === undefined ? new Date(Date.now() + 3600_000) : options.expiresAt,
      accountLabel: options.label === undefined ? "acme-bot" : options.label,
    },
    { requestedScopes: [], isDefault: true },
  );
}
