import type { Context } from "hono";
import { Hono } from "hono";
import { z } from "zod";
import type { Core } from "../core/index.js";
import type { CallbackResult } from "../core/oauth-flows.js";
import { authenticateSchema, callbackQuerySchema, finalizeSchema, providerSlugSchema, waitQuerySchema } from "../core/schemas/oauth.js";
import { describe, NO_STORE_HEADER, notFound, nullableTimestamp, refused } from "./docs.js";
import { type Env, iso, NO_STORE, pathParams, readJson } from "./http.js";

const providerParam = z.object({ provider_id: providerSlugSchema });
// auth_id is a string in the contract: an id that names no flow of the caller's is `not_found`.
const authParam = z.object({ auth_id: z.string().max(100) });

const queryOf = (c: Context) => Object.fromEntries(new URL(c.req.url).searchParams);

/** What a callback answers the browser (or the finalizing client): never the token itself. */
const presentCallback = ({ flow, token }: CallbackResult): z.input<typeof callbackSchema> => ({
  status: "completed",
  auth_id: flow.id,
  provider_id: token.providerId,
  token_id: token.id,
});

const tag = "Auth Service (v2)";
const callbackSchema = z.object({ status: z.literal("completed"), auth_id: z.string(), provider_id: z.string(), token_id: z.string() });
// The callback's own fields (flows.callback reads them with callbackQuerySchema), described.
const setupQuery = callbackQuerySchema.extend({
  setup_action: callbackQuerySchema.shape.setup_action.describe("The code host's post-installation action"),
  installation_id: callbackQuerySchema.shape.installation_id.describe("The installation the code host set up"),
});
/** A token due for its refresh, whose provider could not be reached (try again) or answered nonsense. */
const refreshUnreachable = refused("The token is due for a refresh and its provider could not be reached, or answered nonsense: try again later");
const callbackRefused = {
  400: refused("Unknown, expired or used state; or the provider refused"),
  502: refused("The provider could not be reached at the code exchange, or answered nonsense"),
};

/**
 * The provider's redirect back to this service, opened by the user's browser: it carries no
 * credentials of ours, so these routes are mounted ahead of authentication. The single-use state
 * names the flow, and with it the workspace and the user the tokens are stored for.
 */
export function oauthCallbackRoutes(core: Pick<Core, "oauthFlows">) {
  const flows = core.oauthFlows;
  const callback = async (c: Context) => {
    const { provider_id } = pathParams(c, providerParam);
    return c.json(presentCallback(await flows.callback(provider_id, queryOf(c))));
  };
  return new Hono()
    .get(
      "/v2/auth/callback/:provider_id",
      describe(
        { tag, auth: "none", operationId: "oauth_callback_get_v2_auth_callback__provider_id__get", summary: "The provider's redirect back (opened by the user's browser)", description: "Carries no credentials of ours: the single-use state names the flow.", params: providerParam, query: callbackQuerySchema, responses: { 200: { description: "The flow is complete; the token is stored", schema: callbackSchema }, ...callbackRefused } },
        callback,
      ),
    )
    // The setup variant (a code-host app's post-installation redirect) finishes a flow the same way.
    .get("/v2/auth/setup/:provider_id", describe({ tag, auth: "none", operationId: "oauth_setup_callback_v2_auth_setup__provider_id__get", summary: "A code-host app's post-installation redirect: finishes the flow like the callback", params: providerParam, query: setupQuery, responses: { 200: { description: "The flow is complete", schema: callbackSchema.extend({ setup_action: z.string().nullable(), installation_id: z.number().int().nullable() }) }, ...callbackRefused } }, async (c) => {
      const { provider_id } = pathParams(c, providerParam);
      const query = queryOf(c);
      const result = await flows.callback(provider_id, query);
      return c.json({ ...presentCallback(result), setup_action: query.setup_action ?? null, installation_id: query.installation_id ? Number(query.installation_id) : null });
    }));
}

export function oauthFlowRoutes(core: Pick<Core, "oauthFlows">) {
  const flows = core.oauthFlows;
  return new Hono<Env>()
    .post("/v2/auth/authenticate", describe({ tag, operationId: "authenticate_v2_auth_authenticate_post", summary: "Start (or reuse) an OAuth flow for a user", body: authenticateSchema, responses: { 200: { description: "completed with the token, or pending with the URL to send the user to (never kept by Idempotency-Key)", headers: NO_STORE_HEADER, schema: z.object({ status: z.enum(["completed", "pending", "token_expired"]), url: z.string().nullable(), auth_id: z.string().nullable(), token: z.string().nullable(), user_id: z.string().nullable(), metadata: z.object({ token_id: z.string().optional(), provider_id: z.string().optional(), scopes: z.array(z.string()), expires_at: nullableTimestamp }).nullable() }) }, 404: notFound, 502: refreshUnreachable } }, async (c) => {
      const result = await flows.authenticate(c.var.tenant, await readJson(c), new URL(c.req.url).origin);
      return c.json({
        status: result.status,
        url: result.url,
        auth_id: result.flow?.id ?? null,
        token: result.accessToken,
        user_id: result.userId,
        metadata: result.token
          ? { token_id: result.token.id, provider_id: result.token.providerId, scopes: result.token.scopes, expires_at: iso(result.token.expiresAt) }
          : result.flow
            ? { expires_at: iso(result.flow.expiresAt), scopes: result.flow.scopes }
            : null,
      }, 200, NO_STORE);
    }))
    .post("/v2/auth/callback/:provider_id", describe({ tag, operationId: "oauth_callback_v2_auth_callback__provider_id__post", summary: "Finish a flow with the code and state the provider gave (a client that caught the redirect itself)", params: providerParam, body: finalizeSchema, responses: { 200: { description: "The flow is complete", schema: callbackSchema }, ...callbackRefused } }, async (c) => {
      const { provider_id } = pathParams(c, providerParam);
      return c.json(presentCallback(await flows.finalize(c.var.tenant, provider_id, await readJson(c))));
    }))
    .get("/v2/auth/wait/:auth_id", describe({ tag, operationId: "wait_for_auth_completion_v2_auth_wait__auth_id__get", summary: "Wait (long-poll) for a flow to complete", params: authParam, query: waitQuerySchema, responses: { 200: { description: "The flow's status; the token once completed", headers: NO_STORE_HEADER, schema: z.object({ status: z.enum(["completed", "pending", "timeout", "not_found"]), token: z.string().nullable() }) }, 400: refused("The flow expired or failed: start a new one"), 502: refreshUnreachable } }, async (c) => {
      const { auth_id } = pathParams(c, authParam);
      const result = await flows.wait(c.var.tenant, auth_id, queryOf(c), c.req.raw.signal);
      return c.json({ status: result.status, token: result.accessToken }, 200, NO_STORE);
    }));
}
