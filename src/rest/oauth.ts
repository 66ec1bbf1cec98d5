import { Hono } from "hono";
import { z } from "zod";
import type { Core } from "../core/index.js";
import type { OAuthProvider } from "../core/oauth-providers.js";
import type { OAuthToken } from "../core/oauth-tokens.js";
import { mcpDiscoverSchema, providerCreateSchema, providerSlugSchema, providerUpdateSchema, tokenListQuerySchema, tokenProviderQuerySchema, tokenUpdateSchema } from "../core/schemas/oauth.js";
import { describe, notFound, nullableTimestamp, refused, timestamp } from "./docs.js";
import { type Env, iso, pathParams, queryParams, readJson } from "./http.js";

const providerParam = z.object({ provider_id: providerSlugSchema });
// The contract types token ids as strings: one that is not a token's id is not found (404), not a 422.
const tokenParam = z.object({ token_id: z.string().max(100) });

/** OAuthProviderResponse: never the client secret. */
export const presentProvider = (p: OAuthProvider): z.input<typeof providerSchema> => ({
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
export const presentToken = (t: OAuthToken): z.input<typeof tokenSchema> => ({
  id: t.id,
  provider_id: t.providerId,
  provider_account_label: t.providerAccountLabel,
  scopes: t.scopes,
  expires_at: iso(t.expiresAt),
  is_default: t.isDefault,
  created_at: iso(t.createdAt),
  updated_at: iso(t.updatedAt),
});

const providerSchema = z.object({
  id: z.uuid(),
  organization_id: z.uuid(),
  provider_id: z.string(),
  name: z.string(),
  client_id: z.string(),
  auth_url: z.string(),
  token_url: z.string(),
  uses_pkce: z.boolean(),
  code_challenge_method: z.string().nullable(),
  provider_type: z.string().nullable(),
  mcp_server_url: z.string().nullable(),
  token_endpoint_auth_method: z.string(),
  is_dynamic_client: z.boolean(),
  created_at: timestamp,
  updated_at: timestamp,
});
const tokenSchema = z.object({
  id: z.uuid(),
  provider_id: z.string(),
  provider_account_label: z.string().nullable(),
  scopes: z.array(z.string()),
  expires_at: nullableTimestamp,
  is_default: z.boolean(),
  created_at: timestamp,
  updated_at: timestamp,
});
// The reference tags providers, tokens and flows alike.
const tag = "Auth Service (v2)";
// Documented as https only; OAUTH_ALLOW_HTTP=on also takes http:// endpoints.
const providerAnswer = { 200: { description: "The provider (never its client secret)", schema: providerSchema } };

/** The contract answers 200 on create, as FastAPI does by default. */
export function oauthProviderRoutes(core: Pick<Core, "oauthProviders">) {
  const providers = core.oauthProviders;
  return new Hono<Env>()
    .get(
      "/v2/auth/providers",
      describe({ tag, operationId: "list_oauth_providers_v2_auth_providers_get", summary: "List OAuth providers", responses: { 200: { description: "The providers", schema: z.array(providerSchema) } } }, async (c) =>
        c.json((await providers.list(c.var.tenant)).map(presentProvider)),
      ),
    )
    .post(
      "/v2/auth/providers",
      describe({ tag, operationId: "create_oauth_provider_v2_auth_providers_post", summary: "Create an OAuth provider", body: providerCreateSchema(false), responses: { ...providerAnswer, 409: refused("A provider with this provider_id exists in the workspace") } }, async (c) =>
        c.json(presentProvider(await providers.create(c.var.tenant, await readJson(c)))),
      ),
    )
    .post(
      "/v2/auth/providers/mcp-discover",
      describe({ tag, operationId: "create_mcp_oauth_provider_v2_auth_providers_mcp_discover_post", summary: "Create an OAuth provider by discovering an MCP server's authorization server", body: mcpDiscoverSchema(false), responses: { ...providerAnswer, 400: refused("The MCP server or its authorization server publishes no usable OAuth metadata"), 409: refused("A provider with this provider_id exists in the workspace"), 502: refused("The MCP server or its authorization server could not be reached, or answered nonsense") } }, async (c) =>
        c.json(presentProvider(await providers.discover(c.var.tenant, await readJson(c), new URL(c.req.url).origin))),
      ),
    )
    .get("/v2/auth/providers/:provider_id", describe({ tag, operationId: "get_oauth_provider_v2_auth_providers__provider_id__get", summary: "Get an OAuth provider", params: providerParam, responses: { ...providerAnswer, 404: notFound } }, async (c) => {
      const { provider_id } = pathParams(c, providerParam);
      return c.json(presentProvider(await providers.get(c.var.tenant, provider_id)));
    }))
    .patch("/v2/auth/providers/:provider_id", describe({ tag, operationId: "update_oauth_provider_v2_auth_providers__provider_id__patch", summary: "Update an OAuth provider", params: providerParam, body: providerUpdateSchema(false), responses: { ...providerAnswer, 404: notFound } }, async (c) => {
      const { provider_id } = pathParams(c, providerParam);
      return c.json(presentProvider(await providers.update(c.var.tenant, { providerId: provider_id }, await readJson(c))));
    }))
    .delete("/v2/auth/providers/:provider_id", describe({ tag, operationId: "delete_oauth_provider_v2_auth_providers__provider_id__delete", summary: "Delete an OAuth provider and its tokens", params: providerParam, responses: { 200: { description: "Deleted", schema: z.object({ provider_id: z.string(), deleted: z.boolean(), deleted_tokens: z.number().int() }) }, 404: notFound } }, async (c) => {
      const { provider_id } = pathParams(c, providerParam);
      const { deletedTokens } = await providers.delete(c.var.tenant, { providerId: provider_id });
      return c.json({ provider_id, deleted: true, deleted_tokens: deletedTokens });
    }));
}

export function oauthTokenRoutes(core: Pick<Core, "oauthTokens">) {
  const tokens = core.oauthTokens;
  return new Hono<Env>()
    .get("/v2/auth/tokens", describe({ tag, operationId: "list_oauth_tokens_for_user_v2_auth_tokens_get", summary: "List OAuth tokens (never their values)", query: tokenListQuerySchema, responses: { 200: { description: "The tokens", schema: z.array(tokenSchema) } } }, async (c) => {
      const { provider_id } = queryParams(c, tokenListQuerySchema);
      return c.json((await tokens.list(c.var.tenant, provider_id || undefined)).map(presentToken));
    }))
    .delete("/v2/auth/tokens", describe({ tag, operationId: "delete_oauth_tokens_for_user_v2_auth_tokens_delete", summary: "Delete a provider's tokens", query: tokenProviderQuerySchema, responses: { 200: { description: "How many were deleted", schema: z.object({ provider_id: z.string(), deleted: z.number().int() }) } } }, async (c) => {
      const { provider_id } = queryParams(c, tokenProviderQuerySchema);
      return c.json({ provider_id, deleted: await tokens.deleteForProvider(c.var.tenant, provider_id) });
    }))
    .get("/v2/auth/tokens/exists", describe({ tag, operationId: "check_oauth_token_exists_v2_auth_tokens_exists_get", summary: "Whether the caller has a token for a provider", query: tokenProviderQuerySchema, responses: { 200: { description: "Whether one exists", schema: z.object({ has_token: z.boolean() }) } } }, async (c) => {
      const { provider_id } = queryParams(c, tokenProviderQuerySchema);
      return c.json({ has_token: await tokens.exists(c.var.tenant, provider_id) });
    }))
    .get(
      "/v2/auth/tokens/workspace/slack/exists",
      describe({ tag, operationId: "check_workspace_slack_tokens_exist_v2_auth_tokens_workspace_slack_exists_get", summary: "Whether the workspace has a Slack token", responses: { 200: { description: "Whether one exists", schema: z.object({ has_token: z.boolean() }) } } }, async (c) =>
        c.json({ has_token: await tokens.slackExists(c.var.tenant) }),
      ),
    )
    .delete(
      "/v2/auth/tokens/workspace/slack",
      describe({ tag, operationId: "revoke_all_slack_tokens_for_workspace_v2_auth_tokens_workspace_slack_delete", summary: "Revoke the workspace's Slack token", responses: { 200: { description: "Whether one was deleted", schema: z.object({ deleted: z.number().int().describe("How many were deleted") }) } } }, async (c) =>
        c.json({ deleted: await tokens.revokeSlack(c.var.tenant) }),
      ),
    )
    .patch("/v2/auth/tokens/:token_id/metadata", describe({ tag, operationId: "update_token_label_v2_auth_tokens__token_id__metadata_patch", summary: "Update a token's label or default flag", params: tokenParam, body: tokenUpdateSchema, responses: { 200: { description: "The token", schema: tokenSchema }, 404: notFound } }, async (c) => {
      const { token_id } = pathParams(c, tokenParam);
      return c.json(presentToken(await tokens.update(c.var.tenant, token_id, await readJson(c))));
    }))
    .delete("/v2/auth/tokens/:token_id", describe({ tag, operationId: "delete_single_oauth_token_v2_auth_tokens__token_id__delete", summary: "Delete a token", params: tokenParam, responses: { 204: { description: "Deleted" }, 404: notFound } }, async (c) => {
      const { token_id } = pathParams(c, tokenParam);
      await tokens.delete(c.var.tenant, token_id);
      return c.body(null, 204);
    }));
}
