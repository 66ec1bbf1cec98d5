import { Hono } from "hono";
import { z } from "zod";
import type { Core } from "../core/index.js";
import type { OAuthProvider } from "../core/oauth-providers.js";
import type { OAuthToken } from "../core/oauth-tokens.js";
import { providerSlugSchema, tokenListQuerySchema, tokenProviderQuerySchema } from "../core/schemas/oauth.js";
import { type Env, iso, pathParams, queryParams, readJson } from "./http.js";

const providerParam = z.object({ provider_id: providerSlugSchema });
// The contract types token ids as strings: one that is not a token's id is not found (404), not a 422.
const tokenParam = z.object({ token_id: z.string().max(100) });

/** OAuthProviderResponse: never the client secret. */
export const presentProvider = (p: OAuthProvider) => ({
  id: p.id,
  organization_id: p.organizationId,
  provider_id: p.providerId,
  name: p.name,
  client_id: p.clientId,
  auth_url: p.authUrl,
  token_url: p.tokenUrl,
  uses_pkce: p.usesPkce,
  code_challenge_method: p.codeChallengeMethod,
  provider_type: p.providerType,
  mcp_server_url: p.mcpServerUrl,
  token_endpoint_auth_method: p.tokenEndpointAuthMethod,
  is_dynamic_client: p.isDynamicClient,
  created_at: iso(p.createdAt),
  updated_at: iso(p.updatedAt),
});

/** OAuthTokenSummary: what a token is, never its value. */
export const presentToken = (t: OAuthToken) => ({
  id: t.id,
  provider_id: t.providerId,
  provider_account_label: t.providerAccountLabel,
  scopes: t.scopes,
  expires_at: iso(t.expiresAt),
  is_default: t.isDefault,
  created_at: iso(t.createdAt),
  updated_at: iso(t.updatedAt),
});

/** The contract answers 200 on create, as FastAPI does by default. */
export function oauthProviderRoutes(core: Pick<Core, "oauthProviders">) {
  const providers = core.oauthProviders;
  return new Hono<Env>()
    .get("/v2/auth/providers", async (c) => c.json((await providers.list(c.var.tenant)).map(presentProvider)))
    .post("/v2/auth/providers", async (c) => c.json(presentProvider(await providers.create(c.var.tenant, await readJson(c)))))
    .post("/v2/auth/providers/mcp-discover", async (c) =>
      c.json(presentProvider(await providers.discover(c.var.tenant, await readJson(c), new URL(c.req.url).origin))),
    )
    .get("/v2/auth/providers/:provider_id", async (c) => {
      const { provider_id } = pathParams(c, providerParam);
      return c.json(presentProvider(await providers.get(c.var.tenant, provider_id)));
    })
    .patch("/v2/auth/providers/:provider_id", async (c) => {
      const { provider_id } = pathParams(c, providerParam);
      return c.json(presentProvider(await providers.update(c.var.tenant, provider_id, await readJson(c))));
    })
    .delete("/v2/auth/providers/:provider_id", async (c) => {
      const { provider_id } = pathParams(c, providerParam);
      const { deletedTokens } = await providers.delete(c.var.tenant, provider_id);
      return c.json({ provider_id, deleted: true, deleted_tokens: deletedTokens });
    });
}

export function oauthTokenRoutes(core: Pick<Core, "oauthTokens">) {
  const tokens = core.oauthTokens;
  return new Hono<Env>()
    .get("/v2/auth/tokens", async (c) => {
      const { provider_id } = queryParams(c, tokenListQuerySchema);
      return c.json((await tokens.list(c.var.tenant, provider_id || undefined)).map(presentToken));
    })
    .delete("/v2/auth/tokens", async (c) => {
      const { provider_id } = queryParams(c, tokenProviderQuerySchema);
      return c.json({ provider_id, deleted: await tokens.deleteForProvider(c.var.tenant, provider_id) });
    })
    .get("/v2/auth/tokens/exists", async (c) => {
      const { provider_id } = queryParams(c, tokenProviderQuerySchema);
      return c.json({ has_token: await tokens.exists(c.var.tenant, provider_id) });
    })
    .get("/v2/auth/tokens/workspace/slack/exists", async (c) => c.json({ has_token: await tokens.slackExists(c.var.tenant) }))
    .delete("/v2/auth/tokens/workspace/slack", async (c) => c.json({ deleted: await tokens.revokeSlack(c.var.tenant) }))
    .patch("/v2/auth/tokens/:token_id/metadata", async (c) => {
      const { token_id } = pathParams(c, tokenParam);
      return c.json(presentToken(await tokens.update(c.var.tenant, token_id, await readJson(c))));
    })
    .delete("/v2/auth/tokens/:token_id", async (c) => {
      const { token_id } = pathParams(c, tokenParam);
      await tokens.delete(c.var.tenant, token_id);
      return c.body(null, 204);
    });
}
