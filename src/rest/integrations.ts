import { Hono } from "hono";
import { z } from "zod";
import { type CodehostInstallation, type InstallationService, installationPageSchema, installationRegisterSchema } from "../core/installations.js";
import { type CodehostRepository, type RepositoryService, repositorySetSchema } from "../core/repositories.js";
import { describe, notFound, refused } from "./docs.js";
import { type Env, pathParams, queryParams, readJson } from "./http.js";

const integrationParam = z.object({ integration_id: z.guid() });

const FORGE = "/v2/integrations/forge-codehost/installations";

/** The basic (v1) integration record: id, installation_id and name only. */
export const presentBasicInstallation = (i: CodehostInstallation): z.input<typeof basicInstallationSchema> => ({
  id: i.id,
  installation_id: i.installationId,
  name: i.name,
});

/** The forge variant, kept apart from the basic shape as SPEC.md's Versioning asks. */
export const presentInstallation = (i: CodehostInstallation): z.input<typeof installationSchema> => ({
  ...presentBasicInstallation(i),
  repository_selection: i.repositorySelection,
  settings_url: i.settingsUrl,
});

/** CodehostRepository. */
export const presentRepository = (r: CodehostRepository): z.input<typeof repositorySchema> => ({
  host_integration_id: r.integrationId,
  id: r.repositoryId,
  name: r.name,
  owner: r.owner,
  url: r.url,
  default_branch: r.defaultBranch,
});

const basicInstallationSchema = z.object({ id: z.uuid(), installation_id: z.number().int(), name: z.string() });
const installationSchema = basicInstallationSchema.extend({ repository_selection: z.string().nullable(), settings_url: z.string().nullable() });
const repositorySchema = z.object({
  host_integration_id: z.uuid(),
  id: z.number().int(),
  name: z.string(),
  owner: z.string(),
  url: z.string(),
  default_branch: z.string(),
});
// The reference tags its v1 operations "Integrations (v1)" and leaves the v2 listing untagged.
const tag = "Integrations (v2)";
const v1Tag = "Integrations (v1)";
const repositoriesDoc = (operationId: string, summary: string) =>
  ({ tag: v1Tag, operationId, summary, params: integrationParam, responses: { 200: { description: "The installation's repositories", schema: z.array(repositorySchema) }, 404: notFound } }) as const;

export function integrationRoutes(installations: InstallationService, repositories: RepositoryService) {
  const listRepositories = async (c: import("hono").Context<Env>) => {
    const { integration_id } = pathParams(c, integrationParam);
    return c.json((await repositories.list(c.var.tenant, integration_id)).map(presentRepository));
  };
  return new Hono<Env>()
    .get(FORGE, describe({ tag, operationId: "list_forge_codehost_installations_v2_integrations_forge_codehost_installations_get", summary: "List code-host installations (cursor paging)", query: installationPageSchema, responses: { 200: { description: "A page of installations", schema: z.object({ items: z.array(installationSchema), next_cursor: z.string().nullable() }) } } }, async (c) => {
      const page = await installations.page(c.var.tenant, queryParams(c, installationPageSchema));
      return c.json({ items: page.items.map(presentInstallation), next_cursor: page.nextCursor });
    }))
    .post(FORGE, describe({ tag, summary: "Register a code-host installation", body: installationRegisterSchema, idempotent: true, responses: { 201: { description: "The installation", schema: installationSchema }, 409: refused("This installation is already registered in the workspace") } }, async (c) => {
      const installation = await installations.register(c.var.tenant, await readJson(c));
      return c.json(presentInstallation(installation), 201);
    }))
    // Registers the repositories an installation gives access to, replacing those registered before.
    .put(`${FORGE}/:integration_id/repositories`, describe({ tag, summary: "Replace an installation's repositories", params: integrationParam, body: repositorySetSchema, responses: { 200: { description: "The installation's repositories", schema: z.array(repositorySchema) }, 404: notFound } }, async (c) => {
      const { integration_id } = pathParams(c, integrationParam);
      return c.json((await repositories.replace(c.var.tenant, integration_id, await readJson(c))).map(presentRepository));
    }))
    .get("/v1/integrations/codehost/install", describe({ tag: v1Tag, operationId: "list_codehost_integrations_v1_integrations_codehost_install_get", summary: "List code-host installations (v1)", responses: { 200: { description: "Every installation", schema: z.array(basicInstallationSchema) } } }, async (c) => {
      return c.json((await installations.all(c.var.tenant)).map(presentBasicInstallation));
    }))
    // The forge variants list the same installations and repositories: this service has one code host.
    .get("/v1/integrations/forge/codehost/install", describe({ tag: v1Tag, operationId: "list_forge_codehost_integrations_v1_integrations_forge_codehost_install_get", summary: "List code-host installations (v1, forge variant)", responses: { 200: { description: "Every installation", schema: z.array(basicInstallationSchema) } } }, async (c) => {
      return c.json((await installations.all(c.var.tenant)).map(presentBasicInstallation));
    }))
    // A handler of its own each: describe() keys a description by its handler.
    .get("/v1/integrations/codehost/:integration_id/repos", describe(repositoriesDoc("list_codehost_repositories_v1_integrations_codehost__integration_id__repos_get", "List an installation's repositories (v1)"), (c) => listRepositories(c)))
    .get("/v1/integrations/forge/codehost/:integration_id/repos", describe(repositoriesDoc("list_forge_codehost_repositories_v1_integrations_forge_codehost__integration_id__repos_get", "List an installation's repositories (v1, forge variant)"), (c) => listRepositories(c)));
}
