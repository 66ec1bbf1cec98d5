import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { Loaders, REPOSITORIES_PER_OPERATION } from "../../src/graphql/loaders.js";
import { tenantOf } from "../support/fixtures.js";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { gql, globalId, gqlOk } from "../graphql/support.js";

let t: TestApp;
let ws: NewWorkspace;

beforeAll(async () => {
  t = await startTestApp({ PIPELINE_WORKER: "off" });
  ws = await t.workspace();
});
afterAll(() => t.close());

const FORGE = "/v2/integrations/forge-codehost/installations";
const repo = (id: number, owner: string, name: string, extra: Record<string, unknown> = {}) => ({
  id, owner, name, url: `https://github.com/${owner}/${name}`, ...extra,
});

describe("an installation's repositories", () => {
  it("are registered with the installation, replaced with PUT, and listed by every variant", async () => {
    const created = await t.request("POST", FORGE, {
      key: ws.apiKey,
      body: { installation_id: 31, name: "acme", repository_selection: "selected", repositories: [repo(2, "acme", "web", { default_branch: "trunk" }), repo(1, "acme", "api")] },
    });
    expect(created.status, created.text).toBe(201);
    const id = created.body.id as string;
    const expected = [
      { host_integration_id: id, id: 1, name: "api", owner: "acme", url: "https://github.com/acme/api", default_branch: "main" },
      { host_integration_id: id, id: 2, name: "web", owner: "acme", url: "https://github.com/acme/web", default_branch: "trunk" },
    ];
    for (const path of [`/v1/integrations/codehost/${id}/repos`, `/v1/integrations/forge/codehost/${id}/repos`]) {
      const res = await t.request("GET", path, { key: ws.apiKey });
      expect(res.status, path).toBe(200);
      expect(res.body, path).toEqual(expected);
    }
    expect((await t.request("GET", "/v1/integrations/forge/codehost/install", { key: ws.apiKey })).body).toEqual([{ id, installation_id: 31, name: "acme" }]);

    const replaced = await t.request("PUT", `${FORGE}/${id}/repositories`, { key: ws.apiKey, body: { repositories: [repo(3, "acme", "docs"), repo(1, "acme", "api")] } });
    expect(replaced.status, replaced.text).toBe(200);
    expect(replaced.body.map((r: { id: number }) => r.id)).toEqual([1, 3]);
    expect((await t.request("GET", `/v1/integrations/codehost/${id}/repos`, { key: ws.apiKey })).body).toEqual(replaced.body);

    const gql = await gqlOk(t, ws.apiKey, `{ codehostInstallations { edges { node { uuid repositories { repositoryId owner name defaultBranch } } } } }`);
    expect(gql.codehostInstallations.edges[0].node.repositories).toEqual([
      { repositoryId: 1, owner: "acme", name: "api", defaultBranch: "main" },
      { repositoryId: 3, owner: "acme", name: "docs", defaultBranch: "main" },
    ]);
    const set = await gqlOk(
      t,
      ws.apiKey,
      `mutation($id: ID!, $input: CodehostRepositoriesSetInput!) { codehostInstallationRepositoriesSet(id: $id, input: $input) { codehostInstallation { repositories { repositoryId } } userErrors { field message code } } }`,
      { id: gql.codehostInstallations.edges[0].node.uuid && Buffer.from(`CodehostInstallation:${id}`).toString("base64"), input: { repositories: [] } },
    );
    expect(set.codehostInstallationRepositoriesSet).toEqual({ codehostInstallation: { repositories: [] }, userErrors: [] });
    expect((await t.request("GET", `/v1/integrations/codehost/${id}/repos`, { key: ws.apiKey })).body).toEqual([]);
  });

  // Installations may hold 5,000 repositories each, and GraphQL's cost counts a list as 10 items: an
  // operation reading the repositories of a page of installations is bounded by what it reads.
  it("are read by GraphQL at most REPOSITORIES_PER_OPERATION an operation, refused beyond, never cut short", async () => {
    const mine = await t.workspace();
    const ids: string[] = [];
    for (const [n, count] of [[41, 2], [42, 3]] as const) {
      const repositories = Array.from({ length: count }, (_, i) => repo(i + 1, `org${n}`, `r${i}`));
      const res = await t.request("POST", FORGE, { key: mine.apiKey, body: { installation_id: n, name: `org${n}`, repositories } });
      expect(res.status, res.text).toBe(201);
      ids.push(res.body.id);
    }
    const tenant = await tenantOf(t, mine.apiKey);
    const lists = await t.app.core.repositories.byInstallations(tenant, ids, 5);
    expect(lists?.map((l) => l.map((r) => r.name))).toEqual([["r0", "r1"], ["r0", "r1", "r2"]]);
    expect(await t.app.core.repositories.byInstallations(tenant, ids, 4)).toBeNull();

    const original = t.app.core.repositories.byInstallations.bind(t.app.core.repositories);
    const read = vi.spyOn(t.app.core.repositories, "byInstallations");
    try {
      // Two batches of one operation's loader (aliased pages, say), the second asked for while the
      // first is still reading: it reads within what the first left, not the whole allowance again.
      let release = () => {};
      const held = new Promise<void>((resolve) => (release = resolve));
      read.mockImplementationOnce(async (tn, wanted, atMost) => {
        await held;
        return original(tn, wanted, atMost);
      });
      const loaders = new Loaders(t.app.core, tenant);
      const firstLists = loaders.repositories.load(ids[0]!);
      await new Promise((resolve) => setImmediate(resolve));
      const secondLists = loaders.repositories.load(ids[1]!);
      await new Promise((resolve) => setImmediate(resolve));
      release();
      expect((await firstLists).length).toBe(2);
      expect((await secondLists).length).toBe(3);
      expect(read.mock.calls.map(([, , atMost]) => atMost)).toEqual([REPOSITORIES_PER_OPERATION, REPOSITORIES_PER_OPERATION - 2]);

      // As if the ceiling were 4: the page is refused, with what to do, never cut short.
      read.mockImplementation((tn, wanted) => original(tn, wanted, 4));
      const refused = await gql(t, mine.apiKey, `{ codehostInstallations(first: 10) { edges { node { name repositories { name } } } } }`);
      expect(refused.data).toBeNull();
      expect(refused.errors?.[0]).toMatchObject({ message: expect.stringMatching(/more than 25,000 repositories.*fewer installations/), extensions: { code: "BAD_REQUEST" } });
    } finally {
      read.mockRestore();
    }
  });

  it("validates the list at once, and answers 404 for an installation that is not the workspace's", async () => {
    const id = (await t.request("POST", FORGE, { key: ws.apiKey, body: { installation_id: 32, name: "b", repositories: [repo(5, "b", "x")] } })).body.id;
    const bad = await t.request("PUT", `${FORGE}/${id}/repositories`, {
      key: ws.apiKey,
      body: { repositories: [repo(1, "o", "a"), repo(1, "o", "b"), { id: 0, owner: "o/p", name: "", url: "ftp://x" }] },
    });
    expect(bad.status).toBe(422);
    expect(bad.body.detail.map((d: { loc: (string | number)[] }) => d.loc.join("."))).toEqual([
      "body.repositories.2.id",
      "body.repositories.2.name",
      "body.repositories.2.owner",
      "body.repositories.2.url",
    ]);
    const dup = await t.request("PUT", `${FORGE}/${id}/repositories`, { key: ws.apiKey, body: { repositories: [repo(1, "o", "a"), repo(1, "o", "b")] } });
    expect(dup.body.detail).toEqual([expect.objectContaining({ loc: ["body", "repositories", 1, "id"], msg: "Value error, repository id 1 is listed twice" })]);
    expect((await t.request("GET", `/v1/integrations/codehost/${id}/repos`, { key: ws.apiKey })).body.map((r: { id: number }) => r.id)).toEqual([5]);

    const other = await t.workspace();
    for (const [method, path] of [["GET", `/v1/integrations/codehost/${id}/repos`], ["GET", `/v1/integrations/forge/codehost/${id}/repos`], ["PUT", `${FORGE}/${id}/repositories`]] as const) {
      const res = await t.request(method, path, { key: other.apiKey, body: method === "PUT" ? { repositories: [] } : undefined });
      expect(res.status, path).toBe(404);
      expect(res.body).toEqual({ detail: `Integration ID ${id} not found.` });
    }
    const notUuid = await t.request("GET", "/v1/integrations/codehost/abc/repos", { key: ws.apiKey });
    expect(notUuid.status).toBe(422);
    expect(notUuid.body.detail).toEqual([expect.objectContaining({ loc: ["path", "integration_id"], type: "uuid_parsing" })]);
  });

  // On PostgreSQL concurrent replaces once raced (delete then insert under READ COMMITTED): some
  // answered 500 (a unique violation) and two bodies could leave their union. They run one after another now.
  // The race needs transactions that overlap: on PostgreSQL (TEST_DATABASE_URL) these fail without the
  // installation's row lock; embedded PGlite runs one statement at a time, so there they only check the answers.
  describe("replaced concurrently", () => {
    const ids = (rows: { id: number }[]) => rows.map((r) => r.id).sort((a, b) => a - b);
    const stored = async (id: string) => ids((await t.request("GET", `/v1/integrations/codehost/${id}/repos`, { key: ws.apiKey })).body);
    const body = (from: number, to: number) => ({
      repositories: Array.from({ length: to - from + 1 }, (_, i) => repo(from + i, "acme", `r${from + i}`)),
    });
    let installationId = 40;
    const install = async () => {
      const created = await t.request("POST", FORGE, { key: ws.apiKey, body: { installation_id: installationId++, name: "race", repositories: [repo(99, "acme", "old")] } });
      expect(created.status, created.text).toBe(201);
      return created.body.id as string;
    };

    it("8 identical PUTs all answer 200 and leave exactly the body", async () => {
      for (let round = 0; round < 3; round++) {
        const id = await install();
        const answers = await Promise.all(Array.from({ length: 8 }, () => t.request("PUT", `${FORGE}/${id}/repositories`, { key: ws.apiKey, body: body(1, 5) })));
        expect(answers.map((a) => a.status), answers.map((a) => a.text).join("\n")).toEqual(Array(8).fill(200));
        for (const a of answers) expect(ids(a.body)).toEqual([1, 2, 3, 4, 5]);
        expect(await stored(id)).toEqual([1, 2, 3, 4, 5]);
      }
    });

    it("two different bodies at once leave exactly one of them, never their union", async () => {
      const a = body(1, 5);
      const b = body(11, 13);
      for (let round = 0; round < 3; round++) {
        const id = await install();
        const sent = Array.from({ length: 8 }, (_, i) => (i % 2 === 0 ? a : b));
        const answers = await Promise.all(sent.map((s) => t.request("PUT", `${FORGE}/${id}/repositories`, { key: ws.apiKey, body: s })));
        expect(answers.map((r) => r.status), answers.map((r) => r.text).join("\n")).toEqual(Array(8).fill(200));
        // Each answer is the set its own request left.
        answers.forEach((r, i) => expect(ids(r.body)).toEqual(ids(sent[i]!.repositories)));
        expect([[1, 2, 3, 4, 5], [11, 12, 13]]).toContainEqual(await stored(id));
      }
    });

    it("through codehostInstallationRepositoriesSet too: no INTERNAL_SERVER_ERROR, one body whole", async () => {
      const toInput = (s: ReturnType<typeof body>) => ({ repositories: s.repositories.map((r) => ({ id: r.id, owner: r.owner, name: r.name, url: r.url })) });
      const id = await install();
      const sent = Array.from({ length: 8 }, (_, i) => (i % 2 === 0 ? body(1, 5) : body(11, 13)));
      const answers = await Promise.all(
        sent.map((s) =>
          gql(
            t,
            ws.apiKey,
            `mutation($id: ID!, $input: CodehostRepositoriesSetInput!) { codehostInstallationRepositoriesSet(id: $id, input: $input) { userErrors { code } } }`,
            { id: globalId("CodehostInstallation", id), input: toInput(s) },
          ),
        ),
      );
      for (const r of answers) {
        expect(r.errors, JSON.stringify(r.errors)).toBeUndefined();
        expect(r.data.codehostInstallationRepositoriesSet.userErrors).toEqual([]);
      }
      expect([[1, 2, 3, 4, 5], [11, 12, 13]]).toContainEqual(await stored(id));
    });
  });
});
