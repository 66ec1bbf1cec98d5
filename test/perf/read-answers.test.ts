import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { LIST_QUERY, NESTED_QUERY } from "../../bench/lib/queries.js";
import { startTestApp, type TestApp } from "../support/app.js";

/**
 * The hot reads' answers, byte for byte: REST GET by id, the REST listing, and the GraphQL list and
 * dashboard pages (the benchmarks' own queries) over deterministic data made through the public API.
 * Every optimisation of these reads (prepared statements, JSON built by PostgreSQL, GraphQL planned
 * from the selection) must leave the answers' text exactly as it was: only what differs from run to
 * run is replaced: each distinct id by the same numbered placeholder everywhere (so equal ids stay
 * equal), every timestamp by one placeholder (whether created_at and updated_at fall in the same
 * millisecond varies), signed cursors by one placeholder; the order of keys, the escaping, the
 * numbers and everything else are kept.
 *
 * The expected text is test/perf/read-answers.golden.json; UPDATE_GOLDEN=1 rewrites it (only when an
 * answer is meant to change).
 */
const GOLDEN = new URL("./read-answers.golden.json", import.meta.url);

let t: TestApp;
let ws: NewWorkspace;
let other: NewWorkspace;

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g;
const TIMESTAMP = /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/g;
const CURSOR = /"(endCursor|startCursor|cursor)":"[^"]*"/g;

/** Replaces run-dependent values with numbered placeholders, in order of first appearance. */
class Normaliser {
  private readonly ids = new Map<string, string>();

  text(raw: string): string {
    const withIds = raw.replace(UUID, (id) => this.idOf(id));
    // Serving URLs carry the first 8 characters of the deployment id: https://<name>-<8 hex>.<domain>.
    const withUrls = withIds.replace(/-([0-9a-f]{8})\.deployments\.localhost/g, (_, prefix: string) => `-${this.prefixOf(prefix)}.deployments.localhost`);
    return withUrls
      .replace(TIMESTAMP, "<timestamp>")
      .replace(CURSOR, (_, name: string) => `"${name}":"<cursor>"`);
  }

  private idOf(id: string): string {
    let name = this.ids.get(id);
    if (!name) this.ids.set(id, (name = `<id-${this.ids.size + 1}>`));
    return name;
  }

  private prefixOf(prefix: string): string {
    for (const [id, name] of this.ids) if (id.startsWith(prefix)) return `${name}-prefix`;
    return `<unknown-prefix>`;
  }

}

/** Deployments unlike each other: every optional part of the answer is set somewhere and absent elsewhere. */
const DEPLOYMENTS = [
  { name: "plain", source: "internal_container", source_revision_config: { image_uri: "registry.example.com/a/plain:1" } },
  {
    name: "full-config",
    source: "internal_container",
    source_config: {
      deployment_type: "prod",
      resource_spec: { min_scale: 2, max_scale: 5, cpu: 1, memory_mb: 2048, labels: { team: "core", "x\"q": "é ü \u2028" } },
      install_command: "pip install -e .",
    },
    source_revision_config: { image_uri: "registry.example.com/a/full:1", repo_ref: "main" },
    secrets: [{ name: "TOKEN", value: "golden-secret-value-1" }, { name: "OTHER", value: "golden-secret-value-2" }],
    secret_references: [{ name: "DB_URL", secret_name: "db", secret_key: "url" }],
    agent: { agent_id: "agent-golden", environment: "staging" },
    shareable: true,
    route_through_gateway: true,
  },
  { name: "custom-url", source: "internal_container", source_config: { deployment_type: "dev", custom_url: "https://agent.example.com" } },
  { name: "Ünïcode Name with spaces", source: "internal_container", source_revision_config: { image_uri: "registry.example.com/a/u:1" } },
  { name: "many-revisions", source: "internal_container", source_config: { deployment_type: "dev" }, source_revision_config: { image_uri: "registry.example.com/a/many:1" } },
  { name: "interrupted", source: "internal_container", source_revision_config: { image_uri: "registry.example.com/a/int:1" } },
];

let ids: string[] = [];

beforeAll(async () => {
  t = await startTestApp({ PIPELINE_WORKER: "off", RATE_LIMIT_PER_MINUTE: "0" });
  ws = await t.workspace();
  other = await t.workspace();
  // Another workspace's deployment, which no answer below may show.
  const theirs = await t.request("POST", "/v2/deployments", { key: other.apiKey, body: { name: "plain", source: "internal_container" } });
  expect(theirs.status).toBe(201);
  // One at a time: creation order is the listings' order.
  for (const body of DEPLOYMENTS) {
    const res = await t.request("POST", "/v2/deployments", { key: ws.apiKey, body });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    ids.push(res.body.id as string);
  }
  const [, full, , , many, interrupted] = ids;
  for (let i = 2; i <= 6; i++) {
    const res = await t.request("POST", `/v2/deployments/${many}/revisions`, {
      key: ws.apiKey,
      body: { source_revision_config: { image_uri: `registry.example.com/a/many:${i}`, repo_ref: `v${i}` } },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
  }
  const patched = await t.request("PATCH", `/v2/deployments/${full}`, { key: ws.apiKey, body: { source_revision_config: { image_uri: "registry.example.com/a/full:2" } } });
  expect(patched.status, JSON.stringify(patched.body)).toBe(200);
  const revisions = await t.request("GET", `/v2/deployments/${interrupted}/revisions`, { key: ws.apiKey });
  const stopped = await t.request("POST", `/v2/deployments/${interrupted}/revisions/${revisions.body.resources[0].id}/interrupt`, { key: ws.apiKey });
  expect(stopped.status, JSON.stringify(stopped.body)).toBe(200);
});
afterAll(() => t.close());

/** Every answer's status and exact text, normalised with one Normaliser so that ids match across answers. */
async function capture(): Promise<Record<string, string>> {
  const n = new Normaliser();
  const out: Record<string, string> = {};
  const take = async (label: string, method: string, path: string, body?: unknown) => {
    const res = await t.request(method, path, { key: ws.apiKey, body });
    expect(res.status, `${label}: ${res.text.slice(0, 500)}`).toBe(200);
    out[label] = `${res.status} ${res.headers.get("content-type")}\n${n.text(res.text)}`;
  };
  await take("REST list", "GET", "/v2/deployments?limit=100");
  await take("REST list, page 2 of 2", "GET", "/v2/deployments?limit=4&offset=4");
  await take("REST list, filtered", "GET", "/v2/deployments?name_contains=RE");
  for (const [i, id] of ids.entries()) await take(`REST get ${i}`, "GET", `/v2/deployments/${id}`);
  await take("REST list, limit 1", "GET", "/v2/deployments?limit=1");
  await take("GraphQL list", "POST", "/graphql", { query: LIST_QUERY, variables: { first: 100 } });
  await take("GraphQL list, first 4", "POST", "/graphql", { query: LIST_QUERY, variables: { first: 4 } });
  await take("GraphQL dashboard", "POST", "/graphql", { query: NESTED_QUERY, variables: { first: 100 } });
  await take("GraphQL dashboard, first 2", "POST", "/graphql", { query: NESTED_QUERY, variables: { first: 2 } });
  return out;
}

describe("hot read answers", () => {
  it("are byte for byte the golden answers (ids, timestamps and cursors aside), and the same on a second run", async () => {
    const first = await capture();
    // Run twice: GraphQL documents are compiled on their second run (src/graphql/jit.ts), and caches warm.
    const second = await capture();
    expect(second).toEqual(first);
    if (process.env.UPDATE_GOLDEN === "1" || !existsSync(GOLDEN)) {
      writeFileSync(GOLDEN, `${JSON.stringify(first, null, 2)}\n`);
    }
    const golden = JSON.parse(readFileSync(GOLDEN, "utf8")) as Record<string, string>;
    for (const label of Object.keys(golden)) expect(first[label], label).toBe(golden[label]);
    expect(Object.keys(first)).toEqual(Object.keys(golden));
  });

  it("never show another workspace's deployment", async () => {
    const theirs = await t.request("GET", "/v2/deployments?limit=100", { key: other.apiKey });
    expect(theirs.status).toBe(200);
    expect(theirs.body.resources).toHaveLength(1);
    for (const id of ids) expect((await t.request("GET", `/v2/deployments/${id}`, { key: other.apiKey })).status).toBe(404);
    const graph = await t.request("POST", "/graphql", { key: other.apiKey, body: { query: NESTED_QUERY, variables: { first: 100 } } });
    expect(graph.status).toBe(200);
    expect(graph.body.data.deployments.edges.map((e: { node: { name: string } }) => e.node.name)).toEqual(["plain"]);
    expect(graph.body.data.deployments.edges[0].node.uuid).not.toBe(ids[0]);
  });

  it("answer a revision's fields outside its summary (read as whole rows on demand) as the whole row does", async () => {
    const WHOLE = `uuid status sourceConfig { deploymentType installCommand resourceSpec { minScale labels } } secrets { name }
      secretReferences { name secretName secretKey } shareable routeThroughGateway remoteReconciled imageDigest buildReport`;
    const listed = await t.request("POST", "/graphql", { key: ws.apiKey, body: { query: `{ deployments(first: 10, filter: { name: "full-config" }) { edges { node { id } } } }` } });
    const globalId = listed.body.data.deployments.edges[0].node.id as string;
    // The mutation answers from the whole row it wrote.
    const created = await t.request("POST", "/graphql", {
      key: ws.apiKey,
      body: {
        query: `mutation($d: ID!) { revisionCreate(deploymentId: $d, input: { sourceRevisionConfig: { imageUri: "registry.example.com/a/full:3" } }) { revision { ${WHOLE} } userErrors { message } } }`,
        variables: { d: globalId },
      },
    });
    expect(created.status).toBe(200);
    expect(created.body.data.revisionCreate.userErrors, created.text).toEqual([]);
    const written = created.body.data.revisionCreate.revision;
    expect(written).toMatchObject({ secrets: [{ name: "TOKEN" }, { name: "OTHER" }], shareable: true, routeThroughGateway: true });
    // Pages and loaders read summaries; these fields then load the whole rows, batched.
    const read = await t.request("POST", "/graphql", {
      key: ws.apiKey,
      body: { query: `{ deployments(first: 10) { edges { node { name latestRevision { ${WHOLE} } revisions(first: 1) { edges { node { ${WHOLE} } } } } } } }` },
    });
    expect(read.status, read.text).toBe(200);
    const full = read.body.data.deployments.edges.find((e: { node: { name: string } }) => e.node.name === "full-config").node;
    expect(full.latestRevision).toEqual(written);
    expect(full.revisions.edges[0].node).toEqual(written);
  });
});
