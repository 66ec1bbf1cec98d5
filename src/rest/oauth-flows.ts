import type { Context } from "hono";
import { Hono } from "hono";
import { z } from "zod";
import type { Core } from "../core/index.js";
import type { CallbackResult } from "../core/oauth-flows.js";
import { providerSlugSchema } from "../core/schemas/oauth.js";
import { type Env, iso, pathParams, readJson } from "./http.js";

const providerParam = z.object({ provider_id: providerSlugSchema });
// auth_id is a string in the contract: an id that names no flow of the caller's is `not_found`.
const authParam = z.object({ auth_id: z.string().max(100) });

const queryOf = (c: Context) => Object.fromEntries(new URL(c.req.url).searchParams);

/** What a callback answers the browser (or the finalizing client): never the token itself. */
const presentCallback = ({ flow, token }: CallbackResult) => ({
  status: "completed",
  auth_id: flow.id,
  provider_id: token.providerId,
  token_id: token.id,
});

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
    .get("/v2/auth/callback/:provider_id", callback)
    // The setup variant (a code-host app's post-installation redirect) finishes a flow the same way.
    .get("/v2/auth/setup/:provider_id", async (c) => {
      const { provider_id } = pathParams(c, providerParam);
      const query = queryOf(c);
      const result = await flows.callback(provider_id, query);
      return c.json({ ...presentCallback(result), setup_action: query.setup_action ?? null, installation_id: query.installation_id ? Number(query.installation_id) : null });
    });
}

export function oauthFlowRoutes(core: Pick<Core, "oauthFlows">) {
  const flows = core.oauthFlows;
  return new Hono<Env>()
    .post("/v2/auth/authenticate", async (c) => {
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
      });
    })
    .post("/v2/auth/callback/:provider_id", async (c) => {
      const { provider_id } = pathParams(c, providerParam);
      return c.json(presentCallback(await flows.finalize(c.var.tenant, provider_id, await readJson(c))));
    })
    .get("/v2/auth/wait/:auth_id", async (c) => {
      const { auth_id } = pathParams(c, authParam);
      const result = await flows.wait(c.var.tenant, auth_id, queryOf(c), c.req.raw.signal);
      return c.json({ status: result.status, token: result.accessToken });
    });
}
