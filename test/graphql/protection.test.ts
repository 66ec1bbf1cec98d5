import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { waitFor } from "../support/wait.js";
import { type Received, subscribeWs, wsClient } from "./live.js";
import { globalId, gql } from "./support.js";

let dev: TestApp;
let prod: TestApp;
let devWs: NewWorkspace;
let prodWs: NewWorkspace;

beforeAll(async () => {
  [dev, prod] = await Promise.all([
    startTestApp({ PIPELINE_WORKER: "off", RATE_LIMIT_PER_MINUTE: "0" }),
    startTestApp({ PIPELINE_WORKER: "off", RATE_LIMIT_PER_MINUTE: "0", NODE_ENV: "production" }),
  ]);
  [devWs, prodWs] = await Promise.all([dev.workspace(), prod.workspace()]);
});
afterAll(() => Promise.all([dev.close(), prod.close()]));

const nested = (depth: number) => {
  let q = "id";
  for (let i = 0; i < depth; i++) q = `deployment { latestRevision { ${q} } }`;
  return `query($id: ID!) { node(id: $id) { ... on Revision { ${q} } } }`;
};

describe("limits sized for Relay queries", () => {
  it("rejects a query nested deeper than the limit, before running it", async () => {
    const res = await gql(dev, devWs.apiKey, nested(8), { id: "x" });
    expect(res.status).toBe(400);
    // A validation error (of a document that parsed), not a syntax error, though the armor words it so.
    expect(res.errors).toEqual([
      expect.objectContaining({ message: expect.stringMatching(/^Query depth limit of 15 exceeded, found \d+\.$/), extensions: expect.objectContaining({ code: "GRAPHQL_VALIDATION_FAILED" }) }),
    ]);
    const ok = await gql(dev, devWs.apiKey, nested(5), { id: "x" });
    expect(ok.status).toBe(200);
    expect(ok.data).toEqual({ node: null });
  });

  it("rejects too many aliases and too many tokens", async () => {
    const aliases = `{ ${Array.from({ length: 31 }, (_, i) => `a${i}: viewer { id }`).join(" ")} }`;
    const a = await gql(dev, devWs.apiKey, aliases);
    expect(a.status).toBe(400);
    expect(a.errors![0]!.message).toBe("Aliases limit of 30 exceeded, found 31.");
    expect(a.errors![0]!.extensions?.code).toBe("GRAPHQL_VALIDATION_FAILED");

    const tokens = `{ viewer { ${Array.from({ length: 6000 }, () => "id").join(" ")} } }`;
    const b = await gql(dev, devWs.apiKey, tokens);
    expect(b.status).toBe(400);
    expect(b.errors![0]!.message).toMatch(/token/i);
  });

  it("costs a connection by the items it asks for: 100 × 100 revisions with their logs is refused, 100 × 5 is fine", async () => {
    const heavy = `{ deployments(first: 100) { edges { node { revisions(first: 100) { edges { node { id events { at } } } } } } } }`;
    const res = await gql(dev, devWs.apiKey, heavy);
    expect(res.status).toBe(400);
    expect(res.errors).toEqual([
      expect.objectContaining({ message: expect.stringMatching(/too costly/), extensions: expect.objectContaining({ code: "QUERY_TOO_COMPLEX" }) }),
    ]);
    // The cost depends on variables: the same document is judged anew on every request.
    const byVariables = `query($n: Int!) { deployments(first: $n) { edges { node { revisions(first: $n) { edges { node { id events { at } } } } } } } }`;
    for (const [n, status] of [[2, 200], [100, 400], [2, 200], [100, 400]] as const) {
      const r = await gql(dev, devWs.apiKey, byVariables, { n });
      expect(r.status, `first: ${n}`).toBe(status);
    }
    const light = `{ deployments(first: 100) { edges { node { id latestRevision { id status } listener { id } revisions(first: 5) { edges { node { id status } } } } } } }`;
    const ok = await gql(dev, devWs.apiKey, light);
    expect(ok.status).toBe(200);
    expect(ok.errors).toBeUndefined();
  });
});

describe("errors", () => {
  it("carries extensions.code on every error", async () => {
    for (const query of ["{ nope }", "{ viewer { id }", `{ listeners(first: 1000) { totalCount } }`, `query($n: Int!) { listeners(first: $n) { totalCount } }`]) {
      const res = await gql(dev, devWs.apiKey, query, query.includes("$n") ? { n: "ten" } : undefined);
      expect(res.errors?.length, query).toBeGreaterThan(0);
      for (const e of res.errors!) expect(e.extensions?.code, `${query}: ${e.message}`).toEqual(expect.any(String));
    }
  });

  it("hides suggestions in production over graphql-ws too, a subscription's variables included", async () => {
    const url = await prod.app.start();
    const client = wsClient(url, prodWs.apiKey);
    try {
      for (const [query, variables] of [
        [`subscription($k: LogKind!) { revisionLogAppended(revisionId: "x", kind: $k) { message } }`, { k: "BUIL" }],
        [`subscription { revisionLogAppended(revisionId: "x", kind: BUIL) { message } }`, {}],
        [`query($f: DeploymentFilter) { deployments(filter: $f) { totalCount } }`, { f: { status: "READ" } }],
      ] as const) {
        const sub = subscribeWs(client, query, variables);
        const errors = await sub.done.then(
          () => sub.messages.flatMap((m) => m.errors ?? []),
          (errs: Received["errors"]) => errs,
        );
        const messages = (errors ?? []).map((e) => e.message).join("\n");
        expect(messages, query).toMatch(/does not exist in "(LogKind|DeploymentStatus)" enum/);
        expect(messages, query).not.toContain("Did you mean");
      }
    } finally {
      await client.dispose();
    }
  });

  it("tells a request whose operation cannot be chosen OPERATION_RESOLUTION_FAILURE (400), as the README lists", async () => {
    for (const body of [
      { query: "query A { viewer { id } }", operationName: "B" },
      { query: "query A { viewer { id } } query B { viewer { id } }" },
      { query: "{ viewer { id } }", operationName: 5 },
    ]) {
      const res = await dev.request("POST", "/graphql", { key: devWs.apiKey, body });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body, JSON.stringify(body)).toEqual({ errors: [{ message: "Could not determine what operation to execute.", extensions: { code: "OPERATION_RESOLUTION_FAILURE" } }] });
    }
  });

  it("answers variables or extensions that are not JSON, in a GET or a form, as a bad request (400), logging no fault", async () => {
    const query = encodeURIComponent("{ viewer { uuid } }");
    const errorLines = () => prod.guard.logLines.filter((line) => /"level":(50|60)/.test(line)).length;
    const before = errorLines();
    for (const [method, params] of [
      ["GET", `query=${query}&variables=%7Bbad`],
      ["GET", `query=${query}&extensions=%7Bbad`],
      ["POST", `query=${query}&variables=%7Bbad`],
    ] as const) {
      const res = await prod.request(method, method === "GET" ? `/graphql?${params}` : "/graphql", {
        key: prodWs.apiKey,
        ...(method === "POST" && { rawBody: params }),
        headers: { "x-graphql-yoga-csrf": "1", ...(method === "POST" && { "content-type": "application/x-www-form-urlencoded" }) },
      });
      expect(res.status, params).toBe(400);
      expect(res.body.errors, params).toEqual([expect.objectContaining({ message: expect.stringMatching(/not valid JSON/), extensions: expect.objectContaining({ code: "BAD_REQUEST" }) })]);
      expect(res.text, params).not.toMatch(/stack|SyntaxError/);
    }
    expect(errorLines()).toBe(before);
    // Well-formed, the same GET is answered.
    const ok = await prod.request("GET", `/graphql?query=${query}&variables=%7B%7D`, { key: prodWs.apiKey, headers: { "x-graphql-yoga-csrf": "1" } });
    expect(ok.body).toEqual({ data: { viewer: { uuid: prodWs.workspaceId } } });
  });

  it("masks unexpected errors in production and keeps their details out of the answer", async () => {
    vi.spyOn(prod.app.core.batch, "workspace").mockRejectedValueOnce(new Error("boom: internal detail"));
    const res = await gql(prod, prodWs.apiKey, `{ viewer { id } }`);
    expect(res.errors).toEqual([{ message: "Unexpected error.", locations: expect.any(Array), path: ["viewer"], extensions: { code: "INTERNAL_SERVER_ERROR" } }]);
    expect(JSON.stringify(res)).not.toContain("internal detail");

    vi.spyOn(dev.app.core.batch, "workspace").mockRejectedValueOnce(new Error("boom: internal detail"));
    const devRes = await gql(dev, devWs.apiKey, `{ viewer { id } }`);
    expect(devRes.errors![0]!.extensions).toMatchObject({ code: "INTERNAL_SERVER_ERROR", originalError: { message: "boom: internal detail" } });
  });

  it("answers an error of execution itself (a null for a non-null field, a value its scalar cannot show) alike on graphql-js and graphql-jit: masked, logged as a fault", async () => {
    // A query's first run is graphql-js's, its next ones graphql-jit's (jit.ts): every run must answer the same bytes.
    const runs = async (app: TestApp, key: string, query: string, variables?: Record<string, unknown>) => {
      const answers: { text: string; errorLines: number }[] = [];
      for (let run = 0; run < 3; run++) {
        const from = app.guard.logLines.length;
        const res = await app.request("POST", "/graphql", { key, body: { query, variables } });
        expect(res.status).toBe(200);
        // The fault is logged as the answer goes: wait for its line rather than for time.
        const errorLines = (await waitFor(() => app.guard.logLines.slice(from).filter((line) => JSON.parse(line).level >= 50), (lines) => lines.length > 0, { what: "the fault's log line" })).length;
        answers.push({ text: res.text, errorLines });
      }
      expect(answers[1], "the compiled run answers as graphql-js did").toEqual(answers[0]);
      expect(answers[2]).toEqual(answers[0]);
      expect(answers[0]!.errorLines, "logged as a fault").toBe(1);
      return JSON.parse(answers[0]!.text);
    };

    // A null for a non-null field: a workspace without its name.
    const spy = vi.spyOn(prod.app.core.batch, "workspace");
    spy.mockImplementation(async (tenant) => ({ id: tenant.workspaceId, organizationId: tenant.organizationId, name: null as unknown as string, createdAt: new Date() }));
    try {
      const nonNull = await runs(prod, prodWs.apiKey, `query JitNonNull { viewer { uuid name } }`);
      expect(nonNull).toEqual({
        errors: [{ message: "Unexpected error.", locations: [{ line: 1, column: 34 }], path: ["viewer", "name"], extensions: { code: "INTERNAL_SERVER_ERROR" } }],
        data: null,
      });
    } finally {
      spy.mockRestore();
    }

    // A stored integer beyond GraphQL's Int (what input validation refuses now; an older row may hold one).
    const created = await prod.request("POST", "/v2/deployments", {
      key: prodWs.apiKey,
      body: { name: "jit-int", source: "internal_container", source_config: { resource_spec: { autoscaling_behavior: { scale_up: { policies: [{ type: "Pods", value: 1, period_seconds: 60 }] } } } } },
    });
    expect(created.status).toBe(201);
    await prod.app.db.prisma.deployment.update({
      where: { id: created.body.id },
      data: { sourceConfig: { resource_spec: { autoscaling_behavior: { scale_up: { policies: [{ type: "Pods", value: 3_000_000_000, period_seconds: 60 }] } } } } },
    });
    const tooBig = await runs(
      prod,
      prodWs.apiKey,
      `query JitSerialize($id: ID!) { node(id: $id) { ... on Deployment { sourceConfig { resourceSpec { autoscalingBehavior { scaleUp { policies { value } } } } } } } }`,
      { id: globalId("Deployment", created.body.id) },
    );
    expect(tooBig.data).toEqual({ node: { sourceConfig: { resourceSpec: { autoscalingBehavior: { scaleUp: { policies: null } } } } } });
    expect(tooBig.errors).toEqual([
      {
        message: "Unexpected error.",
        locations: [expect.any(Object)],
        path: ["node", "sourceConfig", "resourceSpec", "autoscalingBehavior", "scaleUp", "policies", 0, "value"],
        extensions: { code: "INTERNAL_SERVER_ERROR" },
      },
    ]);
  });

  it("answers a lost database as SERVICE_UNAVAILABLE", async () => {
    const lost = Object.assign(new Error("Connection terminated unexpectedly"), { code: "ECONNRESET" });
    vi.spyOn(dev.app.core.batch, "workspace").mockRejectedValueOnce(lost);
    const res = await gql(dev, devWs.apiKey, `{ viewer { id } }`);
    expect(res.errors).toEqual([expect.objectContaining({ message: expect.stringContaining("retry"), extensions: expect.objectContaining({ code: "SERVICE_UNAVAILABLE" }) })]);
  });

  it("hides field suggestions in production", async () => {
    const res = await gql(prod, prodWs.apiKey, "{ viewr { id } }");
    expect(res.status).toBe(400);
    expect(JSON.stringify(res.errors)).not.toContain("Did you mean");
    const devRes = await gql(dev, devWs.apiKey, "{ viewr { id } }");
    expect(JSON.stringify(devRes.errors)).toContain("Did you mean");
  });

  // With introspection off, a suggestion would tell the schema all the same, one name at a time.
  it("hides every suggestion in production: enum values, input fields and arguments, in documents and in variables", async () => {
    const FILTERED = `query($f: DeploymentFilter) { deployments(filter: $f) { totalCount } }`;
    const mistakes: [string, Record<string, unknown> | undefined, RegExp][] = [
      [`{ deployments(filter: { status: READ }) { totalCount } }`, undefined, /^Value "READ" does not exist in "DeploymentStatus" enum\./],
      [`{ deployments(filter: { nam: "x" }) { totalCount } }`, undefined, /^Field "nam" is not defined by type "DeploymentFilter"\./],
      [`{ deployments(frist: 1) { totalCount } }`, undefined, /^Unknown argument "frist" on field "Query\.deployments"\./],
      [FILTERED, { f: { nam: "x" } }, /^Variable "\$f" got invalid value .*Field "nam" is not defined by type "DeploymentFilter"\./],
      [FILTERED, { f: { status: "READ" } }, /^Variable "\$f" got invalid value "READ" at "f\.status"; Value "READ" does not exist in "DeploymentStatus" enum\./],
    ];
    for (const [query, variables, told] of mistakes) {
      const [hidden, shown] = await Promise.all([gql(prod, prodWs.apiKey, query, variables), gql(dev, devWs.apiKey, query, variables)]);
      expect(hidden.status, query).toBe(400);
      expect(hidden.errors, query).toEqual([expect.objectContaining({ message: expect.stringMatching(told) })]);
      expect(JSON.stringify(hidden.errors), query).not.toContain("Did you mean");
      expect(shown.errors![0]!.message, query).toMatch(/Did you mean/);
    }
  });
});

describe("introspection, GraphiQL and CSRF", () => {
  it("allows introspection in development and refuses it in production", async () => {
    const q = "{ __schema { queryType { name } } }";
    const d = await gql(dev, devWs.apiKey, q);
    expect(d.data).toEqual({ __schema: { queryType: { name: "Query" } } });
    const p = await gql(prod, prodWs.apiKey, q);
    expect(p.status).toBe(400);
    expect(p.errors![0]!.message).toMatch(/introspection/i);
  });

  it("serves GraphiQL to a browser in development only", async () => {
    const html = { accept: "text/html" };
    const d = await dev.request("GET", "/graphql", { headers: html });
    expect(d.status).toBe(200);
    expect(d.headers.get("content-type")).toContain("text/html");
    expect(d.text).toContain("GraphiQL");
    const p = await prod.request("GET", "/graphql", { headers: html });
    expect(p.text).not.toContain("<html");
  });

  it("tells a browser in production why there is no GraphiQL: 406 with a GraphQL error, not an empty body", async () => {
    const browser = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8";
    for (const [accept, path] of [
      ["text/html", "/graphql"],
      [browser, "/graphql"],
      [browser, `/graphql?query=${encodeURIComponent("{viewer{id}}")}`],
    ] as const) {
      const res = await prod.request("GET", path, { headers: { accept } });
      expect(res.status, accept).toBe(406);
      expect(res.headers.get("content-type"), accept).toBe("application/json; charset=utf-8");
      expect(res.body, accept).toEqual({
        errors: [{ message: expect.stringMatching(/^GraphiQL is not served in production \(NODE_ENV=production\)\. .*Accept: application\/graphql-response\+json or application\/json/), extensions: { code: "NOT_ACCEPTABLE" } }],
      });
    }
    // A GraphQL request over GET is answered as before.
    const query = await prod.request("GET", `/graphql?query=${encodeURIComponent("{viewer{uuid}}")}`, { key: prodWs.apiKey, headers: { accept: "application/json" } });
    expect(query.status).toBe(200);
    expect(query.body.data).toEqual({ viewer: { uuid: prodWs.workspaceId } });
  });

  it("refuses browser-simple requests that would skip the CORS preflight", async () => {
    const form = await dev.request("POST", "/graphql", {
      rawBody: "query=%7Bviewer%7Bid%7D%7D",
      headers: { "content-type": "application/x-www-form-urlencoded" },
    });
    expect(form.status).toBe(403);
    expect(form.body.errors).toEqual([{ message: expect.stringMatching(/CSRF/), extensions: { code: "BAD_REQUEST" } }]);
    const get = await dev.request("GET", `/graphql?query=${encodeURIComponent("{viewer{id}}")}`);
    expect(get.status).toBe(403);
    const withKey = await dev.request("GET", `/graphql?query=${encodeURIComponent("{viewer{uuid}}")}`, { key: devWs.apiKey });
    expect(withKey.status).toBe(200);
    expect(withKey.body.data).toEqual({ viewer: { uuid: devWs.workspaceId } });
  });

  it("refuses a body over the size limit", async () => {
    const small = await startTestApp({ PIPELINE_WORKER: "off", MAX_BODY_BYTES: "2048" });
    try {
      const ws = await small.workspace();
      const res = await gql(small, ws.apiKey, `{ viewer { id } }`, { pad: "x".repeat(4096) });
      expect(res.status).toBe(413);
    } finally {
      await small.close();
    }
  });
});
