import { Hono } from "hono";
import { type CodehostInstallation, type InstallationService, installationPageSchema } from "../core/installations.js";
import { type Env, queryParams, readJson } from "./http.js";

const FORGE = "/v2/integrations/forge-codehost/installations";

/** The basic (v1) integration record: id, installation_id and name only. */
export const presentBasicInstallation = (i: CodehostInstallation) => ({
  id: i.id,
  installation_id: i.installationId,
  name: i.name,
});

/** The forge variant, kept apart from the basic shape as SPEC.md's Versioning asks. */
export const presentInstallation = (i: CodehostInstallation) => ({
  ...presentBasicInstallation(i),
  repository_selection: i.repositorySelection,
  settings_url: i.settingsUrl,
});

export function integrationRoutes(installations: InstallationService) {
  return new Hono<Env>()
    .get(FORGE, async (c) => {
      const page = await installations.page(c.var.tenant, queryParams(c, installationPageSchema));
      return c.json({ items: page.items.map(presentInstallation), next_cursor: page.nextCursor });
    })
    .post(FORGE, async (c) => {
      const installation = await installations.register(c.var.tenant, await readJson(c));
      return c.json(presentInstallation(installation), 201);
    })
    .get("/v1/integrations/codehost/install", async (c) => {
      return c.json((await installations.all(c.var.tenant)).map(presentBasicInstallation));
    });
}
