import { SECRET_FIELD } from "../redact.js";
import { type FlowStatus, flowStatus, type OAuthFlow } from "../../core/oauth-flows.js";
import type { OAuthToken } from "../../core/oauth-tokens.js";
import { builder } from "../builder.js";
import { refreshLoaders } from "../context.js";
import { mutate, type UserError, UserErrorType } from "../errors.js";
import { toRestBody } from "../input-names.js";
import { registerNode, requireId } from "../nodes.js";
import { OAuthFlowRef, OAuthProviderRef, OAuthTokenRef } from "./refs.js";

const FlowStatusEnum = builder.enumType("OAuthFlowStatus", {
  description: "Where an authorization flow is: waiting for the user at the provider, or ended.",
  values: {
    PENDING: { value: "pending" as FlowStatus, description: "Waiting for the user to authorize at the provider." },
    COMPLETED: { value: "completed" as FlowStatus, description: "The code was exchanged; the token is stored." },
    FAILED: { value: "failed" as FlowStatus, description: "The provider refused or could not be reached; `message` says why." },
    EXPIRED: { value: "expired" as FlowStatus, description: "The user did not come back in time." },
  } as const,
});

const AuthenticateStatusEnum = builder.enumType("OAuthAuthenticateStatus", {
  values: {
    COMPLETED: { value: "completed" as const, description: "The caller has a usable token for the provider and scopes." },
    PENDING: { value: "pending" as const, description: "A flow started: open `url`, then follow `flow`." },
    TOKEN_EXPIRED: { value: "token_expired" as const, description: "The caller's token expired and could not be refreshed; a new flow started." },
  } as const,
});

builder.node(OAuthFlowRef, {
  description: "An authorization-code flow of the caller's (auth_id in REST).",
  id: { resolve: (f) => f.id },
  fields: (t) => ({
    uuid: t.exposeID("id", { description: "The REST id (auth_id)." }),
    provider: t.field({ type: OAuthProviderRef, nullable: true, resolve: (f, _args, ctx) => ctx.loaders.oauthProvider.load(f.oauthProviderId) }),
    status: t.field({ type: FlowStatusEnum, resolve: (f) => flowStatus(f) }),
    message: t.exposeString("message", { description: "Why the flow failed; empty otherwise." }),
    scopes: t.exposeStringList("scopes"),
    expiresAt: t.expose("expiresAt", { type: "DateTime" }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
    oauthToken: t.field({
      type: OAuthTokenRef,
      nullable: true,
      description: "The token the flow stored, once completed.",
      resolve: (f, _args, ctx) => (f.tokenId ? ctx.loaders.oauthToken.load(f.tokenId) : null),
    }),
  }),
});

registerNode(OAuthFlowRef, (ctx, id) => ctx.loaders.oauthFlow.load(id));

const AuthenticateInput = builder.inputType("OAuthAuthenticateInput", {
  fields: (t) => ({
    provider: t.string({ required: true, description: "The provider's providerId." }),
    scopes: t.stringList({ required: true }),
    forceNew: t.boolean({ description: "Start a flow even when a token exists." }),
    tokenId: t.string({ description: "Use this token (its REST id) rather than the default." }),
    isDefault: t.boolean({ description: "Make the token this flow stores the provider's default (true unless false)." }),
  }),
});

const FinalizeInput = builder.inputType("OAuthFinalizeInput", {
  // Secrets until used: whoever reads them can finish the caller's flow (never quoted in an error or a log line).
  fields: (t) => ({ code: t.string({ required: true, extensions: SECRET_FIELD }), state: t.string({ required: true, extensions: SECRET_FIELD }) }),
});

interface AuthenticatePayload {
  status?: "completed" | "pending" | "token_expired" | null;
  url?: string | null;
  flow?: OAuthFlow | null;
  oauthToken?: OAuthToken | null;
  userErrors: UserError[];
}

const AuthenticatePayloadRef = builder.objectRef<AuthenticatePayload>("OAuthAuthenticatePayload").implement({
  description: "The caller's token (never its value: agents get it over REST), or a flow to complete at `url`.",
  fields: (t) => ({
    status: t.field({ type: AuthenticateStatusEnum, nullable: true, resolve: (p) => p.status ?? null }),
    url: t.string({ nullable: true, description: "Where the user authorizes.", resolve: (p) => p.url ?? null }),
    flow: t.field({ type: OAuthFlowRef, nullable: true, resolve: (p) => p.flow ?? null }),
    oauthToken: t.field({ type: OAuthTokenRef, nullable: true, resolve: (p) => p.oauthToken ?? null }),
    userErrors: t.field({ type: [UserErrorType], resolve: (p) => p.userErrors }),
  }),
});

const FinalizePayloadRef = builder.objectRef<{ flow?: OAuthFlow | null; oauthToken?: OAuthToken | null; userErrors: UserError[] }>("OAuthFinalizePayload").implement({
  fields: (t) => ({
    flow: t.field({ type: OAuthFlowRef, nullable: true, resolve: (p) => p.flow ?? null }),
    oauthToken: t.field({ type: OAuthTokenRef, nullable: true, resolve: (p) => p.oauthToken ?? null }),
    userErrors: t.field({ type: [UserErrorType], resolve: (p) => p.userErrors }),
  }),
});

builder.mutationFields((t) => ({
  oauthAuthenticate: t.field({
    type: AuthenticatePayloadRef,
    description: "The caller's token for a provider and scopes when one exists (refreshed if due), else starts an authorization-code flow with PKCE.",
    args: { input: t.arg({ type: AuthenticateInput, required: true }) },
    resolve: (_root, { input }, ctx) =>
      mutate(ctx, async () => {
        const result = await ctx.core.oauthFlows.authenticate(ctx.tenant, toRestBody(input), ctx.origin);
        return { status: result.status, url: result.url, flow: result.flow, oauthToken: result.token };
      }),
  }),
  oauthFinalize: t.field({
    type: FinalizePayloadRef,
    description: "Completes one of the caller's flows with the code and state the provider sent back.",
    args: { providerId: t.arg.string({ required: true }), input: t.arg({ type: FinalizeInput, required: true }) },
    resolve: (_root, { providerId, input }, ctx) =>
      mutate(ctx, async () => {
        const { flow, token } = await ctx.core.oauthFlows.finalize(ctx.tenant, providerId, input);
        return { flow, oauthToken: token };
      }),
  }),
}));

builder.subscriptionField("oauthFlowStatusChanged", (t) =>
  t.field({
    type: OAuthFlowRef,
    description: "The flow as it is now, then once more when it completes, fails or expires; then the subscription completes.",
    args: { flowId: t.arg.id({ required: true }) },
    subscribe: (_root, { flowId }, ctx) => ctx.core.oauthFlows.watch(ctx.tenant, requireId(flowId, "OAuthFlow")),
    resolve: (flow, _args, ctx) => {
      refreshLoaders(ctx);
      return flow;
    },
  }),
);
