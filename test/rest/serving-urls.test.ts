import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { gqlOk } from "../graphql/support.js";

/**
 * A serving URL belongs to one deployment: a custom_url may not name a host that another deployment
 * (of any workspace) is served at, nor a host under DEPLOYMENT_DOMAIN, where the service makes the
 * serving URLs itself. Found by a probe: one workspace could take another's URL.
 */

let t: TestApp;
let a: NewWorkspace;
let b: NewWorkspace;

beforeAll(async () => {
  t = await startTestApp({ PIPELINE_WORKER: "off", DEPLOYMENT_DOMAIN: "apps.example.test" });
  a = await t.workspace();
  b = await t.workspace();
});
afterAll(() => t.close());

let counter = 0;
const create = (key: string, sourceConfig: Record<string, unknown> = {}) =>
  t.request("POST", "/v2/deployments", { key, body: { name: `srv-${++counter}`, source: "internal_container", source_config: sourceConfig } });
const patch = (key: string, id: string, body: unknown) => t.request("PATCH", `/v2/deployments/${id}`, { key, body });
const revisionCount = async (key: string, id: string) => (await t.request("GET", `/v2/deployments/${id}/revisions?limit=100`, { key })).body.resources.length;
const count = async (key: string) => (await t.request("GET", "/v2/deployments?limit=100", { key })).body.resources.length;

const TAKEN = { detail: "The host of this custom_url serves another deployment already: choose another custom_url." };
const UNDER_DOMAIN = (input: string) => ({
  detail: [
    {
      type: "value_error",
      loc: ["body", "source_config", "custom_url"],
      msg: "Value error, custom_url may not be a host under apps.example.test: the service makes the serving URLs there",
      input,
    },
  ],
});

describe("a custom_url's host serves one deployment", () => {
  it("refuses another workspace's host (in any case, with any path) and creates nothing", async () => {
    const first = await create(a.apiKey, { custom_url: "https://agent.customer.example" });
    expect(first.status).toBe(201);
    const before = await count(b.apiKey);
    // The host in any spelling DNS takes for the same name: capitals, a port, a path, a trailing dot.
    for (const url of ["https://agent.customer.example", "https://AGENT.Customer.example/v2", "http://agent.customer.example:8443/x?y=1", "https://agent.customer.example./"]) {
      const res = await create(b.apiKey, { custom_url: url });
      expect(res.status, url).toBe(409);
      expect(res.body).toEqual(TAKEN);
    }
    expect(await count(b.apiKey)).toBe(before);
    const kept = await t.request("GET", `/v2/deployments/${first.body.id}`, { key: a.apiKey });
    expect(kept.body.source_config.custom_url).toBe("https://agent.customer.example");
  });

  it("refuses it within one workspace too, on PATCH without a revision, and keeps a deployment's own host", async () => {
    const one = await create(a.apiKey, { custom_url: "https://one.customer.example" });
    const two = await create(a.apiKey);
    expect([one.status, two.status]).toEqual([201, 201]);
    const revisions = await revisionCount(a.apiKey, two.body.id);
    const taken = await patch(a.apiKey, two.body.id, { source_config: { custom_url: "https://one.customer.example/" } });
    expect(taken.status).toBe(409);
    expect(taken.body).toEqual(TAKEN);
    expect(await revisionCount(a.apiKey, two.body.id)).toBe(revisions);
    expect((await t.request("GET", `/v2/deployments/${two.body.id}`, { key: a.apiKey })).body.source_config.custom_url).toMatch(/\.apps\.example\.test$/);
    // Its own host, under another path: still its own.
    const same = await patch(a.apiKey, one.body.id, { source_config: { custom_url: "https://one.customer.example/agent" } });
    expect(same.status).toBe(200);
    expect(same.body.source_config.custom_url).toBe("https://one.customer.example/agent");
  });

  it("frees the host once its deployment is deleted, or serves elsewhere", async () => {
    const first = await create(a.apiKey, { custom_url: "https://moving.customer.example" });
    expect(first.status).toBe(201);
    expect((await create(b.apiKey, { custom_url: "https://moving.customer.example" })).status).toBe(409);
    expect((await patch(a.apiKey, first.body.id, { source_config: { custom_url: "https://moved.customer.example" } })).status).toBe(200);
    const second = await create(b.apiKey, { custom_url: "https://moving.customer.example" });
    expect(second.status).toBe(201);
    expect((await t.request("DELETE", `/v2/deployments/${second.body.id}`, { key: b.apiKey })).status).toBe(204);
    expect((await create(a.apiKey, { custom_url: "https://moving.customer.example" })).status).toBe(201);
  });

  it("gives a host asked for by two creates at once to one of them", async () => {
    const answers = await Promise.all([create(a.apiKey, { custom_url: "https://race.customer.example" }), create(b.apiKey, { custom_url: "https://race.customer.example" })]);
    expect(answers.map((r) => r.status).sort()).toEqual([201, 409]);
  });

  it("refuses a redeploy of a revision whose host another deployment took since", async () => {
    const d = await create(a.apiKey, { custom_url: "https://rollback.customer.example" });
    const first = d.body.latest_revision_id as string;
    expect((await patch(a.apiKey, d.body.id, { source_config: { custom_url: "https://later.customer.example" } })).status).toBe(200);
    expect((await create(b.apiKey, { custom_url: "https://rollback.customer.example" })).status).toBe(201);
    const revisions = await revisionCount(a.apiKey, d.body.id);
    const redeploy = await t.request("POST", `/v2/deployments/${d.body.id}/revisions/${first}/redeploy`, { key: a.apiKey });
    expect(redeploy.status).toBe(409);
    // It sent no custom_url: the refusal says whose URL is taken, and what to do instead.
    const revisionsUrlTaken = {
      detail: "The host of this revision's custom_url serves another deployment now: redeploy another revision, or set another custom_url with PATCH.",
    };
    expect(redeploy.body).toEqual(revisionsUrlTaken);
    // Over GraphQL the refusal names no field: the URL is the earlier revision's, not the mutation's.
    const revisionId = Buffer.from(`Revision:${first}`).toString("base64");
    const overGraphQL = await gqlOk(t, a.apiKey, `mutation($id: ID!) { revisionRedeploy(id: $id) { userErrors { field code message } } }`, { id: revisionId });
    expect(overGraphQL.revisionRedeploy.userErrors).toEqual([{ field: null, code: "CONFLICT", message: revisionsUrlTaken.detail }]);
    expect(await revisionCount(a.apiKey, d.body.id)).toBe(revisions);
  });
});

describe("a new custom URL's host", () => {
  it("is a DNS host name, in one spelling: other hosts are refused (422 at the field)", async () => {
    const long = `https://${"界".repeat(700)}.example`;
    for (const url of ["https://bücher.example", "https://%61gent.example", "https://under_score.example", "https://[::1]:8080", "https://-lead.example", "https://a..example", "https://x.example..", "https://a.example\\@b.example", "https://0x7f.0.0.2", "https://2130706433", long]) {
      const res = await create(a.apiKey, { custom_url: url });
      expect(res.status, url).toBe(422);
      expect(res.body.detail).toEqual([
        {
          type: "value_error",
          loc: ["body", "source_config", "custom_url"],
          msg: "Value error, custom_url's host must be a DNS host name: letters, digits, hyphens and dots (an internationalised name in its xn-- form)",
          input: url,
        },
      ]);
    }
    expect((await create(a.apiKey, { custom_url: "https://xn--bcher-kva.example/agent" })).status).toBe(201);
  });

  const refusedAs = (url: string, msg: string) => [{ type: "value_error", loc: ["body", "source_config", "custom_url"], msg: `Value error, ${msg}`, input: url }];

  it("follows the scheme at once: `https:///host` (which a URL parser reads as https://host/) cannot take a host past the rules", async () => {
    const held = await create(a.apiKey, { custom_url: "https://held.slashes.example" });
    expect(held.status).toBe(201);
    for (const url of ["https:///held.slashes.example", "https:////held.slashes.example/", "https:///free.slashes.example", `https:///x.${t.app.config.deploymentDomain}`]) {
      const res = await create(b.apiKey, { custom_url: url });
      expect(res.status, url).toBe(422);
      expect(res.body.detail).toEqual(refusedAs(url, "custom_url must name its host right after the scheme: https://host/…"));
      // Nor by a PATCH of a deployment that has one.
      const patched = await patch(a.apiKey, held.body.id, { source_config: { custom_url: url } });
      expect(patched.status, url).toBe(422);
    }
    expect((await t.request("GET", `/v2/deployments/${held.body.id}`, { key: a.apiKey })).body.source_config.custom_url).toBe("https://held.slashes.example");
  });

  it("is a name, not an IP address", async () => {
    for (const url of ["https://127.0.0.1", "https://10.1.2.3:8443/agent", "http://192.168.0.1."]) {
      const res = await create(a.apiKey, { custom_url: url });
      expect(res.status, url).toBe(422);
      expect(res.body.detail).toEqual(refusedAs(url, "custom_url's host must be a DNS host name, not an IP address"));
    }
    expect((await create(a.apiKey, { custom_url: "https://1.2.3.example" })).status).toBe(201);
  });
});

describe("deployments whose URLs came before these rules", () => {
  it("keep their URL, and change everything else, even when it shares a host or is under the domain", async () => {
    const ids: string[] = [];
    for (const url of ["https://shared.legacy.example", "https://shared.legacy.example/two", "https://old.apps.example.test"]) {
      const res = await create(a.apiKey);
      expect(res.status).toBe(201);
      ids.push(res.body.id);
      // As they were stored before the rules (the database keeps custom_host from source_config).
      await t.app.db.sql.query(`UPDATE deployments SET source_config = source_config || jsonb_build_object('custom_url', $2::text), url = $2 WHERE id = $1`, [res.body.id, url]);
    }
    for (const id of ids) {
      const res = await patch(a.apiKey, id, { source_config: { install_command: "pip install -e ." } });
      expect(res.status, res.text).toBe(200);
    }
    expect((await create(b.apiKey, { custom_url: "https://shared.legacy.example" })).status).toBe(409);
  });
});

describe("hosts under DEPLOYMENT_DOMAIN are the service's", () => {
  it("refuses any of them as a custom_url, another deployment's generated URL included (422 at the field)", async () => {
    const other = await create(a.apiKey);
    const generated = other.body.source_config.custom_url as string;
    expect(generated).toMatch(/^https:\/\/srv-\d+-[0-9a-f]{8}\.apps\.example\.test$/);
    for (const url of [generated, "https://api.apps.example.test", "https://APPS.example.test/x", "https://api.apps.example.test."]) {
      const res = await create(b.apiKey, { custom_url: url });
      expect(res.status, url).toBe(422);
      expect(res.body).toEqual(UNDER_DOMAIN(url));
    }
    const mine = await create(b.apiKey);
    const res = await patch(b.apiKey, mine.body.id, { source_config: { custom_url: generated } });
    expect(res.status).toBe(422);
    // Its own generated URL sent back changes nothing (as the command-line tool does).
    const own = await patch(b.apiKey, mine.body.id, { source_config: { custom_url: mine.body.source_config.custom_url } });
    expect(own.status).toBe(200);
    // A host that only ends with the domain's text is not under it.
    expect((await create(b.apiKey, { custom_url: "https://notapps.example.test" })).status).toBe(201);
  });

  it("says both over GraphQL as userErrors at sourceConfig.customUrl", async () => {
    const mutation = `mutation($input: DeploymentCreateInput!) { deploymentCreate(input: $input) { deployment { id } userErrors { field code message } } }`;
    const taken = await gqlOk(t, b.apiKey, mutation, { input: { name: "gql-taken", source: "INTERNAL_CONTAINER", sourceConfig: { customUrl: "https://agent.customer.example" } } });
    expect(taken.deploymentCreate).toEqual({ deployment: null, userErrors: [{ field: ["input", "sourceConfig", "customUrl"], code: "CONFLICT", message: TAKEN.detail }] });
    const under = await gqlOk(t, b.apiKey, mutation, { input: { name: "gql-under", source: "INTERNAL_CONTAINER", sourceConfig: { customUrl: "https://x.apps.example.test" } } });
    expect(under.deploymentCreate).toEqual({
      deployment: null,
      userErrors: [{ field: ["input", "sourceConfig", "customUrl"], code: "INVALID", message: "Value error, custom_url may not be a host under apps.example.test: the service makes the serving URLs there" }],
    });
  });
});
