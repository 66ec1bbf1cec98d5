import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { Steps } from "../../src/core/revision-steps.js";
import { type TestApp, startTestApp } from "../support/app.js";

/**
 * An installation is named by id in source_config.integration_id, whatever the source. One that is
 * not the workspace's own (another workspace's, or gone) is "not found" wherever a revision would use
 * it: creating the deployment, PATCH, a new revision, a redeploy, and the pipeline's create step.
 * Stored rows that name one (made before this was checked) are put in place with SQL.
 */

let t: TestApp;
let mine: NewWorkspace;
let theirs: NewWorkspace;
let foreignInstallation: string;
let ownInstallation: string;

const installation = async (key: string, id: number) => {
  const res = await t.request("POST", "/v2/integrations/forge-codehost/installations", { key, body: { installation_id: id, name: `i-${id}` } });
  expect(res.status).toBe(201);
  return res.body.id as string;
};

beforeAll(async () => {
  t = await startTestApp({ PIPELINE_WORKER: "off" });
  mine = await t.workspace();
  theirs = await t.workspace();
  ownInstallation = await installation(mine.apiKey, 11);
  foreignInstallation = await installation(theirs.apiKey, 12);
});
afterAll(() => t.close());

const internalSource = (name: string, integrationId: string) => ({
  name,
  source: "internal_source",
  source_config: { integration_id: integrationId },
  source_revision_config: { framework_config_path: "agent.json", source_tarball_path: "uploads/a.tgz" },
});

/** A deployment of `mine` whose stored integration_id is another workspace's. */
async function namingAForeignInstallation(name: string): Promise<{ id: string; revisionId: string }> {
  const created = await t.request("POST", "/v2/deployments", { key: mine.apiKey, body: internalSource(name, ownInstallation) });
  expect(created.status, created.text).toBe(201);
  const id = created.body.id as string;
  await t.app.db.sql.query("UPDATE deployments SET integration_id = $1 WHERE id = $2", [foreignInstallation, id]);
  await t.app.db.sql.query(
    "UPDATE revisions SET source_config = jsonb_set(source_config, '{integration_id}', to_jsonb($1::text)) WHERE deployment_id = $2",
    [foreignInstallation, id],
  );
  return { id, revisionId: created.body.latest_revision_id };
}

const notFound = (id: string) => ({ detail: `Integration ID ${id} not found.` });

describe("integration_id of another workspace on an internal_source deployment", () => {
  it("is refused on creation, as on codehost; the workspace's own is accepted", async () => {
    const foreign = await t.request("POST", "/v2/deployments", { key: mine.apiKey, body: internalSource("foreign", foreignInstallation) });
    expect(foreign.status).toBe(400);
    expect(foreign.body).toEqual(notFound(foreignInstallation));
    const unknown = randomUUID();
    const missing = await t.request("POST", "/v2/deployments", { key: mine.apiKey, body: internalSource("missing", unknown) });
    expect(missing.status).toBe(400);
    expect(missing.body).toEqual(notFound(unknown));
    expect((await t.request("POST", "/v2/deployments", { key: mine.apiKey, body: internalSource("own", ownInstallation) })).status).toBe(201);
  });

  it("is refused by PATCH, a new revision and a redeploy of a deployment that names one, which change nothing", async () => {
    const { id, revisionId } = await namingAForeignInstallation("stored-foreign");
    const expected = notFound(foreignInstallation);
    const revisionsBefore = (await t.app.db.sql.query("SELECT id FROM revisions WHERE deployment_id = $1", [id])).length;
    const attempts = [
      t.request("PATCH", `/v2/deployments/${id}`, { key: mine.apiKey, body: { source_revision_config: { source_tarball_path: "uploads/b.tgz" } } }),
      t.request("POST", `/v2/deployments/${id}/revisions`, { key: mine.apiKey, body: { source_revision_config: { source_tarball_path: "uploads/c.tgz" } } }),
      t.request("POST", `/v2/deployments/${id}/revisions/${revisionId}/redeploy`, { key: mine.apiKey }),
    ];
    for (const res of await Promise.all(attempts)) {
      expect(res.status, res.text).toBe(400);
      expect(res.body).toEqual(expected);
    }
    expect(await t.app.db.sql.query("SELECT id FROM revisions WHERE deployment_id = $1", [id])).toHaveLength(revisionsBefore);
  });

  it("fails the pipeline's create step (CREATE_FAILED, saying so) when the installation is no longer the workspace's", async () => {
    const { revisionId } = await namingAForeignInstallation("gone-later");
    const revision = await t.app.db.prisma.revision.findUniqueOrThrow({ where: { id: revisionId } });
    const steps = new Steps(t.app.deps, "test-worker", 1000);
    const outcome = await steps.checkReferences(revision);
    expect(outcome).toEqual({ ok: false, message: expect.stringContaining(`integration ${foreignInstallation} of this deployment no longer exists`) });
  });
});
