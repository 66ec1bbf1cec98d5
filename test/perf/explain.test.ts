import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { DeletionSweeper } from "../../src/core/deletion-sweep.js";
import { Leases } from "../../src/core/revision-leases.js";
import { inFlightAhead } from "../../src/core/revision-steps.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { storeToken } from "../support/oauth.js";
import { LIST_QUERY, NESTED_QUERY } from "../../bench/lib/queries.js";

/** Tables that grow with tenants: none of them may be read whole by a listing or a filter. */
const TENANT_TABLES = [
  "deployments", "revisions", "revision_events", "listeners", "codehost_installations", "agent_connections", "api_keys", "idempotency_keys",
  "codehost_repositories", "oauth_providers", "oauth_tokens", "oauth_flows",
];

interface PlanNode {
  "Node Type": string;
  "Relation Name"?: string;
  "Index Name"?: string;
  Plans?: PlanNode[];
}

interface Scans {
  indexes: string[];
  /** Tenant tables read by a sequential scan. */
  sequential: string[];
}

function scans(node: PlanNode, out: Scans = { indexes: [], sequential: [] }): Scans {
  if (node["Index Name"]) out.indexes.push(node["Index Name"]);
  else if (node["Node Type"] === "Seq Scan" && TENANT_TABLES.includes(node["Relation Name"] ?? "")) out.sequential.push(node["Relation Name"]!);
  for (const child of node.Plans ?? []) scans(child, out);
  return out;
}

type Statement = { text: string; values: unknown[]; name?: string };

/** Records the SQL the app's pg clients send (Prisma's driver adapter goes through pg.Client#query). */
function recordSql() {
  const statements: Statement[] = [];
  const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
  const original = proto.query;
  proto.query = function (this: unknown, ...args: unknown[]) {
    const [config, values] = args;
    if (typeof config === "string") statements.push({ text: config, values: Array.isArray(values) ? values : [] });
    else if (config && typeof config === "object" && "text" in config) {
      const c = config as { text: string; values?: unknown[]; name?: string };
      statements.push({ text: c.text, values: c.values ?? [], name: c.name });
    }
    return original.apply(this, args);
  };
  return { statements, restore: () => (proto.query = original) };
}

/**
 * PostgreSQL only: every listing and filter the service runs (REST and GraphQL), the worker's claim,
 * and a subscription's read of a revision's log, EXPLAINed as they were sent, with sequential scans
 * priced out (enable_seqscan = off): a statement that still reads a tenant table whole has no index
 * it can use. With a handful of rows the planner would rightly scan whole tables; priced out, it
 * shows which index it would take once the tables are large.
 */
describe.skipIf(!process.env.TEST_DATABASE_URL)("query plans", () => {
  let t: TestApp;
  let ws: NewWorkspace;
  let explainer: pg.Client;
  const ids = { deployment: "", revision: "", listener: "", other: "", installation: "" };

  beforeAll(async () => {
    t = await startTestApp({ PIPELINE_WORKER: "off", RATE_LIMIT_PER_MINUTE: "0" });
    ws = await t.workspace();
    const created = [];
    for (const name of ["plan-a", "plan-b", "plan-c"]) {
      const res = await t.request("POST", "/v2/deployments", {
        key: ws.apiKey,
        body: {
          name,
          source: "internal_container",
          source_config: { deployment_type: "dev" },
          source_revision_config: { image_uri: `registry.example.com/a/${name}:1` },
          agent: { agent_id: "planner", environment: "staging" },
        },
      });
      expect(res.status).toBe(201);
      created.push(res.body as { id: string; latest_revision_id: string });
    }
    ids.deployment = created[0]!.id;
    ids.revision = created[0]!.latest_revision_id;
    ids.other = created[1]!.id;
    const listener = await t.request("POST", "/v2/listeners", {
      key: ws.apiKey,
      body: { compute_type: "k8s", compute_id: "plan-cluster", compute_config: { k8s_namespaces: ["a"] }, version: "1" },
    });
    expect(listener.status).toBe(201);
    ids.listener = listener.body.id;
    const installation = await t.request("POST", "/v2/integrations/forge-codehost/installations", {
      key: ws.apiKey,
      body: { installation_id: 4242, name: "plan-org", repositories: [{ id: 1, owner: "plan-org", name: "agent", url: "https://github.com/plan-org/agent" }] },
    });
    expect(installation.status).toBe(201);
    ids.installation = installation.body.id;
    const token = await storeToken(t, ws.apiKey);
    expect((await t.request("POST", "/v2/auth/agents/planner/connections", { key: ws.apiKey, body: { oauth_token_id: token.id } })).status).toBe(201);

    const database = t.app.config.database;
    if (database.kind !== "postgres") throw new Error("expected PostgreSQL");
    explainer = new pg.Client({ connectionString: database.url });
    await explainer.connect();
    await explainer.query("ANALYZE");
    await explainer.query("SET enable_seqscan = off");
  });
  afterAll(async () => {
    await explainer?.end();
    await t?.close();
  });

  async function explain(statements: Statement[]): Promise<Scans[]> {
    const plans: Scans[] = [];
    for (const s of statements) {
      if (!/^\s*(SELECT|WITH|UPDATE)/i.test(s.text)) continue;
      const { rows } = await explainer.query<{ "QUERY PLAN": { Plan: PlanNode }[] }>(`EXPLAIN (FORMAT JSON) ${s.text}`, s.values);
      plans.push(scans(rows[0]!["QUERY PLAN"][0]!.Plan));
    }
    return plans;
  }

  /** The plans of the statements one request runs (after a first call, so that the key is cached). */
  async function plansOf(method: string, path: string, body?: unknown): Promise<Scans[]> {
    const options = { key: ws.apiKey, ...(body !== undefined && { body }) };
    expect((await t.request(method, path, options)).status).toBeLessThan(300);
    const sql = recordSql();
    try {
      const res = await t.request(method, path, options);
      expect(res.status, JSON.stringify(res.body).slice(0, 300)).toBeLessThan(300);
      if (path === "/graphql") expect(res.body.errors).toBeUndefined();
    } finally {
      sql.restore();
    }
    return explain(sql.statements);
  }

  function expectIndexed(plans: Scans[], what: string) {
    expect(plans.length, `${what}: statements read`).toBeGreaterThan(0);
    for (const plan of plans) {
      expect(plan.sequential, `${what}: tenant tables read whole`).toEqual([]);
      expect(plan.indexes.length, `${what}: an index used`).toBeGreaterThan(0);
    }
  }

  const gqlBody = (query: string, variables: Record<string, unknown> = {}) => ({ query, variables });

  it("REST deployment listings, with each filter", async () => {
    const queries = [
      "limit=100",
      "limit=10&offset=1",
      "name=plan-a",
      "name_contains=plan",
      "status=AWAITING_DATABASE",
      "deployment_type=dev",
      "image_version=0.4.0",
      () => `deployment_ids=${ids.deployment},${ids.other}`,
      "url=https%3A%2F%2Fexample.com",
      "remote_reconciled=false",
      "tag_value_ids=0b5c2a4e-8f0e-4d8a-9d3e-1f2a3b4c5d6e",
      "agent_id=planner",
      "agent_environment=staging",
    ];
    for (const q of queries) {
      const query = typeof q === "function" ? q() : q;
      expectIndexed(await plansOf("GET", `/v2/deployments?${query}`), `GET /v2/deployments?${query}`);
    }
    expectIndexed(await plansOf("GET", `/v2/deployments/${ids.deployment}`), "GET /v2/deployments/{id}");
  });

  it("REST revisions, listeners, installations, repositories, connections, providers and tokens", async () => {
    const paths = [
      `/v2/deployments/${ids.deployment}/revisions?limit=20`,
      `/v2/deployments/${ids.deployment}/revisions?status=CREATING,SKIPPED`,
      `/v2/deployments/${ids.deployment}/revisions/${ids.revision}`,
      "/v2/listeners?limit=100",
      `/v2/listeners/${ids.listener}`,
      "/v2/integrations/forge-codehost/installations?page_size=100",
      "/v1/integrations/codehost/install",
      "/v2/auth/agents/planner/connections",
      "/v2/auth/providers",
      "/v2/auth/tokens",
      "/v2/auth/tokens?provider_id=github",
      "/v2/auth/tokens/exists?provider_id=github",
      `/v1/integrations/codehost/${ids.installation}/repos`,
    ];
    for (const path of paths) expectIndexed(await plansOf("GET", path), `GET ${path}`);
  });

  it("GraphQL listings, filters and nested connections", async () => {
    const filters = [
      { name: "plan-a" },
      { nameContains: "plan" },
      { status: "AWAITING_DATABASE" },
      { deploymentType: "DEV" },
      { agentId: "planner", agentEnvironment: "STAGING" },
      { remoteReconciled: false },
      { imageVersion: "0.4.0" },
      { url: "https://example.com" },
    ];
    for (const filter of filters) {
      const query = `query($f: DeploymentFilter) { deployments(first: 10, filter: $f) { totalCount edges { node { uuid } } } }`;
      expectIndexed(await plansOf("POST", "/graphql", gqlBody(query, { f: filter })), `GraphQL deployments(filter: ${JSON.stringify(filter)})`);
    }
    expectIndexed(await plansOf("POST", "/graphql", gqlBody(LIST_QUERY, { first: 100 })), "GraphQL deployments(first: 100)");
    const nested = await plansOf("POST", "/graphql", gqlBody(NESTED_QUERY, { first: 100 }));
    expectIndexed(nested, "GraphQL nested revisions");
    // Each deployment's first revisions come from its own (deployment_id, created_at, id) index.
    expect(nested.flatMap((p) => p.indexes)).toContain("revisions_deployment_id_created_at_id_idx");
    const others = `{ listeners(first: 10) { totalCount edges { node { id } } } codehostInstallations(first: 10) { totalCount edges { node { id } } }
      agentConnections(agentId: "planner", first: 10) { totalCount edges { node { id } } } }`;
    expectIndexed(await plansOf("POST", "/graphql", gqlBody(others)), "GraphQL listeners, installations, connections");
    const withEvents = `query($id: ID!) { node(id: $id) { ... on Deployment { revisions(first: 5, status: [CREATING]) { totalCount edges { node { events { to } } } } } } }`;
    const globalId = Buffer.from(`Deployment:${ids.deployment}`).toString("base64");
    expectIndexed(await plansOf("POST", "/graphql", gqlBody(withEvents, { id: globalId })), "GraphQL revisions by status with their events");
  });

  /** A parameter as an SQL literal, for EXECUTE (arrays in PostgreSQL's text form: their elements here are uuids and names). */
  const literal = (v: unknown): string =>
    v === null || v === undefined
      ? "NULL"
      : Array.isArray(v)
        ? explainer.escapeLiteral(`{${v.join(",")}}`)
        : typeof v === "number"
          ? String(v)
          : explainer.escapeLiteral(v instanceof Date ? v.toISOString() : String(v));

  /**
   * Each named statement's generic plan (the one PostgreSQL settles on for any parameters after a few
   * runs), with the statistics saying what they must not be trusted to: here a workspace's id looks
   * more selective to the planner than a deployment's (as with thousands of small workspaces, while
   * one customer's holds thousands of revisions), which is when a generic plan took the workspace's index.
   */
  async function genericPlans(statements: Statement[]): Promise<[string, Scans][]> {
    await explainer.query("ALTER TABLE revisions ALTER COLUMN workspace_id SET (n_distinct = -1)");
    await explainer.query("ALTER TABLE revisions ALTER COLUMN deployment_id SET (n_distinct = 1)");
    await explainer.query("ANALYZE revisions");
    await explainer.query("SET plan_cache_mode = force_generic_plan");
    const plans: [string, Scans][] = [];
    try {
      for (const s of statements) {
        await explainer.query(`PREPARE generic AS ${s.text}`);
        try {
          const { rows } = await explainer.query<{ "QUERY PLAN": { Plan: PlanNode }[] }>(`EXPLAIN (FORMAT JSON) EXECUTE generic(${s.values.map(literal).join(", ")})`);
          plans.push([s.name ?? s.text, scans(rows[0]!["QUERY PLAN"][0]!.Plan)]);
        } finally {
          await explainer.query("DEALLOCATE generic");
        }
      }
    } finally {
      await explainer.query("RESET plan_cache_mode");
      await explainer.query("ALTER TABLE revisions ALTER COLUMN workspace_id RESET (n_distinct)");
      await explainer.query("ALTER TABLE revisions ALTER COLUMN deployment_id RESET (n_distinct)");
      await explainer.query("ANALYZE revisions");
    }
    return plans;
  }

  it("the hot reads' prepared statements keep to their rows' indexes under a generic plan", async () => {
    // A named statement is planned once per connection for any parameters (a generic plan) after a few
    // runs; a workspace's id is then a value the planner does not know. The revision pages of a
    // dashboard ANDed each deployment's index with the whole workspace's (every revision of it, for
    // each of 100 deployments): 16 ms of PostgreSQL per page at 6,000 revisions.
    const sql = recordSql();
    try {
      for (const body of [gqlBody(NESTED_QUERY, { first: 100 }), gqlBody(LIST_QUERY, { first: 100 })]) {
        const res = await t.request("POST", "/graphql", { key: ws.apiKey, body });
        expect(res.body.errors).toBeUndefined();
      }
      expect((await t.request("GET", "/v2/deployments?limit=100", { key: ws.apiKey })).status).toBe(200);
      expect((await t.request("GET", `/v2/deployments/${ids.deployment}`, { key: ws.apiKey })).status).toBe(200);
    } finally {
      sql.restore();
    }
    const prepared = [...new Map(sql.statements.filter((s) => s.name).map((s) => [s.name!, s])).values()];
    expect(prepared.map((s) => s.name)).toEqual(expect.arrayContaining(["revision_pages_desc", "deployments_with_latest_summary_first", "deployments_with_latest_page"]));
    for (const [name, plan] of await genericPlans(prepared)) {
      expect(plan.sequential, `${name}: tenant tables read whole`).toEqual([]);
      expect(plan.indexes, `${name}: a whole workspace's revisions read`).not.toContain("revisions_workspace_id_idx");
    }
  });

  // Per deployment, not per revision: a feed's every step (each change of any of its revisions, and a
  // re-check every 10 s) read through all of the deployment's revisions, thousands for a busy one.
  it("a deployment's revisions' feed reads the deployment's event log by its index, under a generic plan too", async () => {
    const tenant = { organizationId: "", workspaceId: ws.workspaceId, actor: "" };
    const sql = recordSql();
    try {
      await t.app.core.batch.lastDeploymentEntryId(tenant, ids.deployment);
      await t.app.core.batch.deploymentEntriesSince(tenant, ids.deployment, 0n, 500);
    } finally {
      sql.restore();
    }
    const statements = sql.statements.filter((s) => s.name);
    expect(statements.map((s) => s.name)).toEqual(["deployment_last_revision_event", "deployment_revision_events_since"]);
    for (const plan of await explain(statements)) {
      expect(plan.sequential).toEqual([]);
      expect(plan.indexes).toContain("revision_events_deployment_id_id_idx");
      expect(plan.indexes, "the deployment's revisions walked").not.toContain("revisions_deployment_id_created_at_id_idx");
    }
    for (const [name, plan] of await genericPlans(statements)) {
      expect(plan.sequential, `${name}: tenant tables read whole`).toEqual([]);
      expect(plan.indexes, `${name}: a whole workspace's revisions read`).not.toContain("revisions_workspace_id_idx");
      expect(plan.indexes, `${name}: the log's index`).toContain("revision_events_deployment_id_id_idx");
    }
  });

  it("a deployment's unfinished revisions are found by their status, not by reading all its history", async () => {
    // Whether a deployment's log may still grow (every poll of its deploy logs), which older revisions
    // a new one supersedes, and whether one is in flight ahead of a queued one: each asks after the few
    // revisions still moving, of a deployment that may hold thousands that ended (and the log poll
    // read every revision of every workspace, correlated per row).
    const logs = await plansOf("POST", `/v1/projects/${ids.deployment}/deploy_logs`, {});
    expectIndexed(logs, "the deploy logs of a deployment");
    expect(logs.flatMap((p) => p.indexes)).toContain("revisions_deployment_id_status_idx");

    const unfinished = /"status" (= ANY|IN)|status = ANY/;
    const created = recordSql();
    try {
      const body = { source_revision_config: { image_uri: "registry.example.com/a/plan-b:2" } };
      const res = await t.request("POST", `/v2/deployments/${ids.other}/revisions`, { key: ws.apiKey, body });
      expect(res.status, res.text).toBe(201);
    } finally {
      created.restore();
    }
    const superseding = await explain(created.statements.filter((s) => unfinished.test(s.text)));
    expect(superseding.flatMap((p) => p.indexes)).toContain("revisions_deployment_id_status_idx");

    const gate = recordSql();
    try {
      const queued = await t.app.db.prisma.revision.findFirstOrThrow({ where: { deploymentId: ids.other }, orderBy: { createdAt: "desc" } });
      await t.app.db.prisma.$transaction((tx) => inFlightAhead(tx, queued));
    } finally {
      gate.restore();
    }
    const blocker = await explain(gate.statements.filter((s) => unfinished.test(s.text)));
    expect(blocker.flatMap((p) => p.indexes)).toContain("revisions_deployment_id_status_idx");
  });

  it("the pipeline worker's claim of due steps, its sweep of deletions left half done, and a subscription's read of a revision's log", async () => {
    const sql = recordSql();
    try {
      await new Leases(t.app.db.prisma, "planner", 10_000).claim(16);
      await new DeletionSweeper(t.app.deps, t.app.logger).run();
      await t.app.core.batch.eventsSince({ organizationId: "", workspaceId: ws.workspaceId, actor: "" }, ids.revision, 0n);
    } finally {
      sql.restore();
    }
    const plans = await explain(sql.statements);
    expect(plans).toHaveLength(3);
    expectIndexed(plans, "claim, sweep and log");
    expect(plans[0]!.indexes).toContain("revisions_next_step_at_idx");
    expect(plans[1]!.indexes).toContain("deployments_status_updated_at_idx");
    expect(plans[2]!.indexes).toContain("revision_events_revision_id_id_idx");
  });
});
