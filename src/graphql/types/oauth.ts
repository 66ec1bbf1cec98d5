import type { OAuthProvider } from "../../core/oauth-providers.js";
import type { OAuthToken } from "../../core/oauth-tokens.js";
import { builder } from "../builder.js";
import { SECRET_FIELD } from "../redact.js";
import { mutate, type UserError, UserErrorType } from "../errors.js";
import { toRestBody } from "../input-names.js";
import { registerNode, requireId } from "../nodes.js";
import { connection, PAGE_ARGS_DESCRIPTION, pageComplexity } from "../paging.js";
import { OAuthProviderRef, OAuthTokenRef } from "./refs.js";

builder.node(OAuthProviderRef, {
  description: "An OAuth 2.0 provider the workspace's agents act through on behalf of users. Its client secret is never shown.",
  id: { resolve: (p) => p.id },
  fields: (t) => ({
    uuid: t.exposeID("id", { description: "The REST id." }),
    providerId: t.exposeString("providerId", { description: "The workspace's name for it, as REST paths and tokens use it." }),
    name: t.exposeString("name"),
    clientId: t.exposeString("clientId"),
    hasClientSecret: t.boolean({ description: "Whether a client secret is stored (it is never shown).", resolve: (p) => p.clientSecret !== null }),
    authUrl: t.exposeString("authUrl"),
    tokenUrl: t.exposeString("tokenUrl"),
    revocationUrl: t.exposeString("revocationUrl", { nullable: true, description: "RFC 7009 revocation, where discovery found it." }),
    usesPkce: t.exposeBoolean("usesPkce"),
    codeChallengeMethod: t.exposeString("codeChallengeMethod", { nullable: true }),
    providerType: t.exposeString("providerType", { nullable: true }),
    mcpServerUrl: t.exposeString("mcpServerUrl", { nullable: true }),
    tokenEndpointAuthMethod: t.exposeString("tokenEndpointAuthMethod"),
    isDynamicClient: t.exposeBoolean("isDynamicClient", { description: "Registered by this service (RFC 7591) when discovered from an MCP server." }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
    updatedAt: t.expose("updatedAt", { type: "DateTime" }),
  }),
});

builder.node(OAuthTokenRef, {
  description: "One of the caller's tokens at a provider: what it is, never its value. Only its owner sees it.",
  id: { resolve: (t) => t.id },
  fields: (t) => ({
    uuid: t.exposeID("id", { description: "The REST id (token_id, oauth_token_id)." }),
    providerId: t.exposeString("providerId"),
    provider: t.field({ type: OAuthProviderRef, nullable: true, resolve: (tok, _args, ctx) => ctx.loaders.oauthProvider.load(tok.oauthProviderId) }),
    providerAccountLabel: t.exposeString("providerAccountLabel", { nullable: true }),
    scopes: t.exposeStringList("scopes"),
    expiresAt: t.expose("expiresAt", { type: "DateTime", nullable: true }),
    isDefault: t.exposeBoolean("isDefault"),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
    updatedAt: t.expose("updatedAt", { type: "DateTime" }),
  }),
});

registerNode(OAuthProviderRef, (ctx, id) => ctx.loaders.oauthProvider.load(id));
registerNode(OAuthTokenRef, (ctx, id) => ctx.loaders.oauthToken.load(id));

builder.queryFields((t) => ({
  oauthProviders: t.connection(
    {
      type: OAuthProviderRef,
      description: `The workspace's OAuth providers, newest first. ${PAGE_ARGS_DESCRIPTION}`,
      complexity: pageComplexity,
      resolve: async (_root, args, ctx) =>
        connection(
          await ctx.core.batch.relay(ctx.tenant, "graphql:oauth-providers", args, (keyset) => ctx.core.oauthProviders.keyset(ctx.tenant, keyset)),
          () => ctx.core.oauthProviders.count(ctx.tenant),
        ),
    },
    { name: "OAuthProviderConnection" },
    { name: "OAuthProviderEdge" },
  ),
  oauthTokens: t.connection(
    {
      type: OAuthTokenRef,
      description: `The caller's own OAuth tokens (of one provider, given providerId), newest first. ${PAGE_ARGS_DESCRIPTION}`,
      args: { providerId: t.arg.string() },
      complexity: pageComplexity,
      resolve: async (_root, { providerId: given, ...args }, ctx) => {
        const providerId = ctx.core.batch.parseTokenProviderId(given);
        return connection(
          await ctx.core.batch.relay(ctx.tenant, "graphql:oauth-tokens", args, (keyset) => ctx.core.oauthTokens.keyset(ctx.tenant, providerId, keyset)),
          () => ctx.core.oauthTokens.count(ctx.tenant, providerId),
        );
      },
    },
    { name: "OAuthTokenConnection" },
    { name: "OAuthTokenEdge" },
  ),
}));

const TokenEndpointAuthMethodEnum = builder.enumType("TokenEndpointAuthMethod", {
  values: { NONE: { value: "none" }, CLIENT_SECRET_BASIC: { value: "client_secret_basic" }, CLIENT_SECRET_POST: { value: "client_secret_post" } } as const,
});
const ProviderTypeEnum = builder.enumType("OAuthProviderType", {
  values: { MICROSOFT: { value: "microsoft" }, SALESFORCE: { value: "salesforce" }, SLACK: { value: "slack" } } as const,
});

const ProviderCreateInput = builder.inputType("OAuthProviderCreateInput", {
  fields: (t) => ({
    providerId: t.string({ required: true }),
    name: t.string({ required: true }),
    clientId: t.string({ required: true }),
    clientSecret: t.string({ description: "Sealed at rest, never shown again.", extensions: SECRET_FIELD }),
    authUrl: t.string({ required: true }),
    tokenUrl: t.string({ required: true }),
    usesPkce: t.boolean(),
    codeChallengeMethod: t.string({ description: "S256 (default) or plain." }),
    providerType: t.field({ type: ProviderTypeEnum }),
    tokenEndpointAuthMethod: t.field({ type: TokenEndpointAuthMethodEnum }),
    revocationUrl: t.string({ description: "The provider's RFC 7009 endpoint: deleted tokens are revoked there." }),
  }),
});

const ProviderUpdateInput = builder.inputType("OAuthProviderUpdateInput", {
  description: "An omitted field keeps its value.",
  fields: (t) => ({
    name: t.string(),
    clientId: t.string(),
    clientSecret: t.string({ extensions: SECRET_FIELD }),
    authUrl: t.string(),
    tokenUrl: t.string(),
    usesPkce: t.boolean(),
    codeChallengeMethod: t.string(),
    revocationUrl: t.string(),
  }),
});

const ProviderDiscoverInput = builder.inputType("OAuthProviderDiscoverInput", {
  fields: (t) => ({ providerId: t.string({ required: true }), name: t.string({ required: true }), mcpServerUrl: t.string({ required: true }) }),
});

const TokenUpdateInput = builder.inputType("OAuthTokenUpdateInput", {
  fields: (t) => ({ providerAccountLabel: t.string(), isDefault: t.boolean() }),
});

const ProviderPayload = (name: string) =>
  builder.objectRef<{ oauthProvider?: OAuthProvider | null; userErrors: UserError[] }>(name).implement({
    fields: (t) => ({
      oauthProvider: t.field({ type: OAuthProviderRef, nullable: true, resolve: (p) => p.oauthProvider ?? null }),
      userErrors: t.field({ type: [UserErrorType], resolve: (p) => p.userErrors }),
    }),
  });

const DeletedPayload = (name: string, field: string) =>
  builder.objectRef<{ deletedId?: string | null; userErrors: UserError[] }>(name).implement({
    fields: (t) => ({
      [field]: t.id({ nullable: true, resolve: (p) => p.deletedId ?? null }),
      userErrors: t.field({ type: [UserErrorType], resolve: (p) => p.userErrors }),
    }),
  });

const TokenUpdatePayload = builder.objectRef<{ oauthToken?: OAuthToken | null; userErrors: UserError[] }>("OAuthTokenUpdatePayload").implement({
  fields: (t) => ({
    oauthToken: t.field({ type: OAuthTokenRef, nullable: true, resolve: (p) => p.oauthToken ?? null }),
    userErrors: t.field({ type: [UserErrorType], resolve: (p) => p.userErrors }),
  }),
});

builder.mutationFields((t) => ({
  oauthProviderCreate: t.field({
    type: ProviderPayload("OAuthProviderCreatePayload"),
    description: "Configures a provider by hand (its client registered at the provider beforehand).",
    args: { input: t.arg({ type: ProviderCreateInput, required: true }) },
    resolve: (_root, { input }, ctx) => mutate(ctx, async () => ({ oauthProvider: await ctx.core.oauthProviders.create(ctx.tenant, toRestBody(input)) })),
  }),
  oauthProviderDiscover: t.field({
    type: ProviderPayload("OAuthProviderDiscoverPayload"),
    description: "Finds an MCP server's authorization server (RFC 9728, RFC 8414 / OpenID discovery) and registers a client there (RFC 7591).",
    args: { input: t.arg({ type: ProviderDiscoverInput, required: true }) },
    resolve: (_root, { input }, ctx) =>
      mutate(ctx, async () => ({ oauthProvider: await ctx.core.oauthProviders.discover(ctx.tenant, toRestBody(input), ctx.origin) })),
  }),
  oauthProviderUpdate: t.field({
    type: ProviderPayload("OAuthProviderUpdatePayload"),
    args: { id: t.arg.id({ required: true }), input: t.arg({ type: ProviderUpdateInput, required: true }) },
    resolve: (_root, { id, input }, ctx) =>
      mutate(
        ctx,
        async () => ({ oauthProvider: await ctx.core.oauthProviders.update(ctx.tenant, { id: requireId(id, "OAuthProvider") }, toRestBody(input)) }),
        { notFound: "id" },
      ),
  }),
  oauthProviderDelete: t.field({
    type: DeletedPayload("OAuthProviderDeletePayload", "deletedOAuthProviderId"),
    description: "Revokes every token of the provider there (where it can), then forgets the provider and its tokens.",
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, { id }, ctx) =>
      mutate(ctx, async () => {
        await ctx.core.oauthProviders.delete(ctx.tenant, { id: requireId(id, "OAuthProvider") });
        return { deletedId: id };
      }, { notFound: "id" }),
  }),
  oauthTokenUpdate: t.field({
    type: TokenUpdatePayload,
    description: "Relabels one of the caller's tokens, or makes it the default of its provider.",
    args: { id: t.arg.id({ required: true }), input: t.arg({ type: TokenUpdateInput, required: true }) },
    resolve: (_root, { id, input }, ctx) =>
      mutate(
        ctx,
        async () => ({ oauthToken: await ctx.core.oauthTokens.update(ctx.tenant, requireId(id, "OAuthToken"), toRestBody(input)) }),
        { notFound: "id" },
      ),
  }),
  oauthTokenDelete: t.field({
    type: DeletedPayload("OAuthTokenDeletePayload", "deletedOAuthTokenId"),
    description: "Revokes one of the caller's tokens at its provider (where it can) and forgets it, and the agent connections that use it.",
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, { id }, ctx) =>
      mutate(ctx, async () => {
        await ctx.core.oauthTokens.delete(ctx.tenant, requireId(id, "OAuthToken"));
        return { deletedId: id };
      }, { notFound: "id" }),
  }),
}));
