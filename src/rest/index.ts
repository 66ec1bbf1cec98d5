import { Hono } from "hono";
import type { Core } from "../core/index.js";
import { credentialsFrom } from "../middleware/credentials.js";
import type { Env } from "./http.js";
import { listenerRoutes } from "./listeners.js";
import { deploymentRoutes } from "./deployments.js";
import { revisionRoutes } from "./revisions.js";
import { integrationRoutes } from "./integrations.js";
import { connectionRoutes } from "./connections.js";
import { buildRoutes } from "./builds.js";
import { logRoutes } from "./logs.js";
import { oauthProviderRoutes, oauthTokenRoutes } from "./oauth.js";
import { oauthCallbackRoutes, oauthFlowRoutes } from "./oauth-flows.js";

/** The REST face: SPEC.md's and COMPAT.md's paths, authenticated, over core. */
export function restRoutes(core: Core) {
  const api = new Hono<Env>();
  // Ahead of authentication: a provider's redirect carries no credentials; its single-use state does.
  api.route("/", oauthCallbackRoutes(core));
  api.use("/v1/*", authenticate(core));
  api.use("/v2/*", authenticate(core));
  api.route("/", listenerRoutes(core.listeners));
  api.route("/", deploymentRoutes(core.deployments));
  api.route("/", revisionRoutes(core));
  api.route("/", integrationRoutes(core.installations, core.repositories));
  api.route("/", connectionRoutes(core.connections));
  api.route("/", buildRoutes(core));
  api.route("/", logRoutes(core.logs));
  api.route("/", oauthProviderRoutes(core));
  api.route("/", oauthTokenRoutes(core));
  api.route("/", oauthFlowRoutes(core));
  return api;
}

function authenticate(core: Core) {
  return async (c: import("hono").Context<Env>, next: () => Promise<void>) => {
    const tenant = await core.auth.authenticate(credentialsFrom(c.req.raw.headers));
    c.set("tenant", tenant);
    await next();
  };
}
