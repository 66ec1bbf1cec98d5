import { parseBenchArgs, params } from "./lib/args.js";
import type { BenchDatabase } from "./lib/database.js";
import { runMain } from "./lib/main.js";
import { LIST_QUERY, NESTED_QUERY } from "./lib/queries.js";
import { type Cell, Report } from "./lib/report.js";
import { type RestDeployment, seedDeployments, seedRevisions } from "./lib/seed.js";
import { withServer } from "./lib/session.js";

/**
 * explain (PostgreSQL): every listing and filter the API offers, with the SQL it actually ran
 * (recorded by the server when BENCH_COUNT_SQL=1) EXPLAINed on a database whose tables hold many
 * workspaces' rows, so that the planner chooses as it would in production. A sequential scan of a
 * tenant table is flagged.
 */
const args = parseBenchArgs();
if (!args.dbs.includes("postgres")) {
  process.stdout.write("explain runs on PostgreSQL only; nothing to do for --db pglite\n");
  process.exit(0);
}
const p = params(args, {
  full: { deployments: 200, revisionsEach: 3, otherWorkspaces: 20, copies: 10 },
  small: { deployments: 50, revisionsEach: 3, otherWorkspaces: 5, copies: 4 },
});

/** Tables that grow with tenants: a sequential scan over them is what must not happen. */
const TENANT_TABLES = ["deployments", "revisions", "revision_events", "listeners", "codehost_installations", "agent_connections", "api_keys", "idempotency_keys"];

/** Copies the benchmark workspace's rows into other workspaces, whatever the columns are. */
async function fillOtherWorkspaces(db: BenchDatabase, workspaceId: string) {
  await db.query(
    `INSERT INTO workspaces (id, organization_id, name)
     SELECT gen_random_uuid(), organization_id, 'other-' || g FROM workspaces, generate_series(1, $2::int) g WHERE id = $1::uuid`,
    [workspaceId, p.otherWorkspaces],
  );
  await db.query(
    `WITH src AS (
       SELECT d.*, w.id AS new_ws, g, gen_random_uuid() AS new_id
       FROM deployments d CROSS JOIN workspaces w CROSS JOIN generate_series(1, $2::int) g
       WHERE d.workspace_id = $1::uuid AND w.id <> $1::uuid
     ), ins AS (
       INSERT INTO deployments
       SELECT (jsonb_populate_record(NULL::deployments, to_jsonb(src) || jsonb_build_object('id', new_id, 'workspace_id', new_ws, 'name', name || '-' || g))).*
       FROM src RETURNING id
     )
     INSERT INTO revisions
     SELECT (jsonb_populate_record(NULL::revisions, to_jsonb(r) || jsonb_build_object('id', gen_random_uuid(), 'deployment_id', src.new_id, 'workspace_id', src.new_ws))).*
     FROM src JOIN revisions r ON r.deployment_id = src.id`,
    [workspaceId, p.copies],
  );
  // The other tenant tables, each row copied many times into every other workspace, with its unique
  // column (per workspace) made unique.
  const copy = (table: string, unique: Record<string, string>) =>
    db.query(
      `INSERT INTO ${table}
       SELECT (jsonb_populate_record(NULL::${table}, to_jsonb(t) || jsonb_build_object('id', gen_random_uuid(), 'workspace_id', w.id,
         ${Object.entries(unique).map(([col, expr]) => `'${col}', ${expr}`).join(", ")}))).*
       FROM ${table} t CROSS JOIN workspaces w CROSS JOIN generate_series(1, $2::int) g
       WHERE t.workspace_id = $1::uuid AND w.id <> $1::uuid`,
      [workspaceId, p.copies * 50],
    );
  await copy("listeners", { compute_id: "t.compute_id || '-' || g" });
  await copy("codehost_installations", { installation_id: "t.installation_id + g" });
  // Each copy names the same token (the key to oauth_tokens holds), for another agent.
  await copy("agent_connections", { agent_id: "t.agent_id || '-' || g" });
  await db.query("ANALYZE");
}

/** Rows per table as the planner sees them (after ANALYZE). */
async function tableRows(db: BenchDatabase): Promise<Map<string, number>> {
  const rows = await db.query<{ relname: string; n: number }>(
    `SELECT relname, reltuples::float8 AS n FROM pg_class WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace`,
  );
  return new Map(rows.map((r) => [r.relname, Number(r.n)]));
}

interface PlanNode {
  "Node Type": string;
  "Relation Name"?: string;
  "Index Name"?: string;
  Plans?: PlanNode[];
}

/** The scans of a plan: each index used, and each table read whole (flagged when it is a big tenant table). */
function scans(node: PlanNode, rows: Map<string, number>, out: string[] = []): string[] {
  const table = node["Relation Name"];
  if (node["Index Name"]) out.push(`${node["Node Type"]} ${node["Index Name"]}`);
  else if (node["Node Type"] === "Seq Scan" && table) {
    const big = TENANT_TABLES.includes(table) && (rows.get(table) ?? 0) >= 1000;
    out.push(`Seq Scan ${table}${big ? " (SEQUENTIAL)" : ` (${rows.get(table) ?? 0} rows)`}`);
  }
  for (const child of node.Plans ?? []) scans(child, rows, out);
  return out;
}

runMain(async () => {
  const report = new Report("explain", args.scale, p);
  const rows: Cell[][] = [];
  let sequential = 0;
  await withServer("postgres", { PIPELINE_WORKER: "off", BENCH_COUNT_SQL: "1" }, async ({ server, client, db }) => {
    const deployments: RestDeployment[] = await seedDeployments(client, p.deployments);
    await seedRevisions(client, deployments.slice(0, 20), p.revisionsEach - 1);
    const listener = await client.expect<{ id: string }>(201, "POST", "/v2/listeners", {
      compute_type: "k8s",
      compute_id: "bench-cluster",
      compute_config: { k8s_namespaces: ["agents"] },
      version: "1.0.0",
    });
    await client.expect(201, "POST", "/v2/integrations/forge-codehost/installations", { installation_id: 1000, name: "bench-org" });
    const [ws] = await db.query<{ workspace_id: string }>("SELECT workspace_id FROM deployments LIMIT 1");
    // A connection needs a token of the caller's: one as a flow would have stored it (the plans do
    // not depend on the sealed values, which no request here opens).
    const [token] = await db.query<{ id: string }>(
      `WITH p AS (
         INSERT INTO oauth_providers (id, workspace_id, organization_id, provider_id, name, client_id, auth_url, token_url, updated_at)
         SELECT gen_random_uuid(), w.id, w.organization_id, 'github', 'GitHub', 'bench', 'https://github.example/a', 'https://github.example/t', now()
         FROM workspaces w WHERE w.id = $1::uuid RETURNING id, workspace_id
       )
       INSERT INTO oauth_tokens (id, workspace_id, oauth_provider_id, provider_id, owner, access_token, token_url, updated_at)
       SELECT gen_random_uuid(), p.workspace_id, p.id, 'github', 'api_key:' || k.id, 'v1.00000000.AAAA', 'https://github.example/t', now()
       FROM p JOIN api_keys k ON k.workspace_id = p.workspace_id RETURNING id`,
      [ws!.workspace_id],
    );
    await client.expect(201, "POST", "/v2/auth/agents/agent-1/connections", { oauth_token_id: token!.id });
    await fillOtherWorkspaces(db, ws!.workspace_id);
    const rowsByTable = await tableRows(db);
    report.note(
      `Tables (planner's estimate after ANALYZE), over ${p.otherWorkspaces + 1} workspaces: ` +
        TENANT_TABLES.filter((t) => rowsByTable.has(t)).map((t) => `${t} ${Math.round(rowsByTable.get(t)!)}`).join(", "),
    );

    const d = deployments[0]!;
    const requests: { name: string; method: string; path: string; body?: unknown }[] = [
      ...[
        "limit=100",
        "limit=100&offset=20",
        `name=${d.name}`,
        "name_contains=bench",
        "status=READY",
        "deployment_type=dev",
        "image_version=0.4.0",
        `deployment_ids=${deployments[1]!.id},${deployments[2]!.id}`,
        `url=${encodeURIComponent(String(d.url))}`,
        "remote_reconciled=true",
        "tag_value_ids=0b5c2a4e-8f0e-4d8a-9d3e-1f2a3b4c5d6e",
      ].map((q) => ({ name: `GET /v2/deployments?${q.length > 30 ? `${q.slice(0, 30)}…` : q}`, method: "GET", path: `/v2/deployments?${q}` })),
      { name: "GET /v2/deployments/{id}", method: "GET", path: `/v2/deployments/${d.id}` },
      { name: "GET …/revisions", method: "GET", path: `/v2/deployments/${d.id}/revisions?limit=20` },
      { name: "GET …/revisions?status", method: "GET", path: `/v2/deployments/${d.id}/revisions?status=CREATING,SKIPPED` },
      { name: "GET …/revisions/{rid}", method: "GET", path: `/v2/deployments/${d.id}/revisions/${d.latest_revision_id}` },
      { name: "GET /v2/listeners", method: "GET", path: "/v2/listeners?limit=100" },
      { name: "GET /v2/listeners/{id}", method: "GET", path: `/v2/listeners/${listener.id}` },
      { name: "GET forge installations", method: "GET", path: "/v2/integrations/forge-codehost/installations?page_size=100" },
      { name: "GET /v1 codehost install", method: "GET", path: "/v1/integrations/codehost/install" },
      { name: "GET agent connections", method: "GET", path: "/v2/auth/agents/agent-1/connections" },
      { name: "GraphQL deployments(first: 100)", method: "POST", path: "/graphql", body: { query: LIST_QUERY, variables: { first: 100 } } },
      { name: "GraphQL nested (revisions first: 5)", method: "POST", path: "/graphql", body: { query: NESTED_QUERY, variables: { first: 100 } } },
    ];
    for (const r of requests) {
      await client.call(r.method, r.path, r.body); // warm: auth cache, so that only the request's own SQL is seen
      const since = await server.statements();
      const answer = await client.call(r.method, r.path, r.body);
      if (answer.status >= 300) throw new Error(`${r.method} ${r.path}: ${answer.status} ${JSON.stringify(answer.body).slice(0, 300)}`);
      const statements = await server.recentStatements(since);
      const found: string[] = [];
      for (const s of statements) {
        if (!/^\s*(SELECT|WITH)/i.test(s.sql)) continue;
        const [plan] = await db.query<{ "QUERY PLAN": { Plan: PlanNode }[] }>(`EXPLAIN (FORMAT JSON) ${s.sql}`, JSON.parse(s.params) as unknown[]);
        found.push(...scans(plan!["QUERY PLAN"][0]!.Plan, rowsByTable));
      }
      const seq = found.filter((f) => f.endsWith("(SEQUENTIAL)")).length;
      sequential += seq;
      rows.push([r.name, statements.length, [...new Set(found)].join("; ") || "(no table read)"]);
    }
  });
  report.table("the plan of every statement each request ran", ["request", "statements", "scans (index or table)"], rows);
  report.note(`Sequential scans of tenant tables: ${sequential}${sequential === 0 ? " (every listing and filter uses an index)" : ""}.`);
  report.finish(args.record);
});
