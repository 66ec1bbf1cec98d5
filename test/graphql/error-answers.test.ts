import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { type Received, subscribeSse, subscribeWs, wsClient } from "./live.js";
import { globalId, gql } from "./support.js";

/**
 * How GraphQL tells and logs what went wrong: a lost database is SERVICE_UNAVAILABLE with
 * Retry-After, as REST's 503 is; a client's mistake is logged at info, without a stack, over HTTP,
 * SSE and graphql-ws (any client could otherwise flood the error log); only a real fault is logged at
 * error level, with its stack.
 */

let t: TestApp;
let ws: NewWorkspace;
let url: string;

beforeAll(async () => {
  t = await startTestApp({ PIPELINE_WORKER: "off", RATE_LIMIT_PER_MINUTE: "0" });
  url = await t.app.start();
  ws = await t.workspace();
});
afterAll(() => t.close());

const lostDatabase = () => Object.assign(new Error("Connection terminated unexpectedly"), { code: "57P01" });

/** The log lines written while fn ran, parsed. */
async function logged(fn: () => Promise<void>): Promise<{ level: number; msg: string; err?: { stack?: string } }[]> {
  const from = t.guard.logLines.length;
  await fn();
  // A stream's last log line may follow its answer by a tick.
  await new Promise((r) => setTimeout(r, 50));
  return t.guard.logLines.slice(from).map((line) => JSON.parse(line));
}

const ERROR = 50;
const WARN = 40;

describe("SERVICE_UNAVAILABLE", () => {
  it("over HTTP: 503 with Retry-After, and retryAfter in the error's extensions", async () => {
    vi.spyOn(t.app.core.batch, "workspace").mockRejectedValueOnce(lostDatabase());
    const res = await gql(t, ws.apiKey, `{ viewer { id } }`);
    expect(res.status).toBe(503);
    expect(res.headers.get("retry-after")).toBe("1");
    expect(res.errors).toEqual([
      expect.objectContaining({ message: expect.stringContaining("retry"), extensions: { code: "SERVICE_UNAVAILABLE", retryAfter: 1 } }),
    ]);
  });

  it("when authentication cannot reach the database: the same", async () => {
    vi.spyOn(t.app.core.auth, "authenticate").mockRejectedValueOnce(lostDatabase());
    const res = await gql(t, ws.apiKey, `{ viewer { id } }`);
    expect(res.status).toBe(503);
    expect(res.headers.get("retry-after")).toBe("1");
    expect(res.errors).toEqual([expect.objectContaining({ extensions: { code: "SERVICE_UNAVAILABLE", retryAfter: 1 } })]);
  });

  it("over graphql-ws: retryAfter in the error's extensions; logged as a warning, not an error", async () => {
    const client = wsClient(url, ws.apiKey);
    try {
      const lines = await logged(async () => {
        vi.spyOn(t.app.core.batch, "workspace").mockRejectedValueOnce(lostDatabase());
        const sub = subscribeWs(client, `{ viewer { id } }`, {});
        await sub.done;
        expect(sub.messages[0]!.errors).toEqual([expect.objectContaining({ extensions: { code: "SERVICE_UNAVAILABLE", retryAfter: 1 } })]);
      });
      expect(lines.filter((l) => l.level >= ERROR)).toEqual([]);
      expect(lines.filter((l) => l.level === WARN)).toHaveLength(1);
    } finally {
      await client.dispose();
    }
  });
});

describe("a client's mistakes are not errors of the service", () => {
  const unknownRevision = () => globalId("Revision", randomUUID());
  const SUBSCRIPTION = `subscription($id: ID!) { revisionStatusChanged(revisionId: $id) { status } }`;

  const expectQuiet = (lines: { level: number; msg: string; err?: { stack?: string } }[], what: string) => {
    expect(lines.filter((l) => l.level >= WARN), what).toEqual([]);
    for (const line of lines) expect(line.err?.stack, `${what}: ${JSON.stringify(line)}`).toBeUndefined();
  };

  it("over HTTP: bad variables, an invalid document, a NOT_FOUND: info at most, no stack", async () => {
    const mistakes: [string, string, Record<string, unknown>][] = [
      ["bad variables", `query($n: Int) { deployments(first: $n) { totalCount } }`, { n: "many" }],
      ["an invalid document", `{ nope }`, {}],
      ["a NOT_FOUND", `mutation($id: ID!) { revisionInterrupt(id: $id) { revision { id } userErrors { code } } }`, { id: "bad" }],
      ["a subscription on POST without SSE", SUBSCRIPTION, { id: unknownRevision() }],
    ];
    for (const [what, query, variables] of mistakes) {
      const lines = await logged(async () => {
        const res = await gql(t, ws.apiKey, query, variables);
        expect(res.status, what).toBeLessThan(500);
      });
      expectQuiet(lines, what);
    }
  });

  it("over SSE: a subscription to a revision that does not exist", async () => {
    const lines = await logged(async () => {
      const sub = subscribeSse(t, ws.apiKey, SUBSCRIPTION, { id: unknownRevision() });
      await sub.done;
      expect(sub.messages[0]!.errors).toEqual([expect.objectContaining({ extensions: expect.objectContaining({ code: "NOT_FOUND" }) })]);
    });
    expectQuiet(lines, "SSE");
    expect(lines.some((l) => l.level === 30 && /NOT_FOUND/.test(JSON.stringify(l)))).toBe(true);
  });

  it("over graphql-ws: a subscription to a revision that does not exist", async () => {
    const client = wsClient(url, ws.apiKey);
    try {
      const lines = await logged(async () => {
        const sub = subscribeWs(client, SUBSCRIPTION, { id: unknownRevision() });
        const outcome = await sub.done.then(
          () => sub.messages,
          (errors: unknown) => errors,
        );
        expect(JSON.stringify(outcome)).toContain("NOT_FOUND");
      });
      expectQuiet(lines, "graphql-ws");
      expect(lines.some((l) => l.level === 30 && /NOT_FOUND/.test(JSON.stringify(l)))).toBe(true);
    } finally {
      await client.dispose();
    }
  });

  it("while a real fault is an error, with its stack", async () => {
    vi.spyOn(t.app.core.batch, "workspace").mockRejectedValueOnce(new Error("boom: a bug"));
    const lines = await logged(async () => {
      const res = await gql(t, ws.apiKey, `{ viewer { id } }`);
      expect(res.errors?.[0]?.extensions?.code).toBe("INTERNAL_SERVER_ERROR");
    });
    const errors = lines.filter((l) => l.level >= ERROR);
    expect(errors).toHaveLength(1);
    expect(errors[0]!.err?.stack).toContain("boom: a bug");
  });
});

describe("a document that does not parse", () => {
  /** Its errors over graphql-ws (the messages of an error, or the data results' errors). */
  async function overWs(query: string): Promise<Received["errors"]> {
    const client = wsClient(url, ws.apiKey);
    try {
      const sub = subscribeWs(client, query, {});
      return await sub.done.then(
        () => sub.messages.flatMap((m) => m.errors ?? []),
        (errors: Received["errors"]) => errors,
      );
    } finally {
      await client.dispose();
    }
  }

  // yoga's parse cache keeps the error of a text once for both faces; yoga marks it over HTTP only.
  it("is GRAPHQL_PARSE_FAILED over graphql-ws and HTTP alike, whichever parsed the text first", async () => {
    const wsFirst = `{ viewer { uuid${randomUUID().replaceAll("-", "")} `;
    expect(await overWs(wsFirst)).toEqual([expect.objectContaining({ message: expect.stringMatching(/^Syntax Error/), extensions: { code: "GRAPHQL_PARSE_FAILED" } })]);
    const http = await gql(t, ws.apiKey, wsFirst);
    expect(http.status).toBe(400);
    expect(http.errors).toEqual([expect.objectContaining({ extensions: { code: "GRAPHQL_PARSE_FAILED" } })]);

    const httpFirst = `{ viewer { uuid${randomUUID().replaceAll("-", "")} `;
    expect((await gql(t, ws.apiKey, httpFirst)).errors).toEqual([expect.objectContaining({ extensions: { code: "GRAPHQL_PARSE_FAILED" } })]);
    expect(await overWs(httpFirst)).toEqual([expect.objectContaining({ extensions: { code: "GRAPHQL_PARSE_FAILED" } })]);
  });

  it("is OPERATION_RESOLUTION_FAILURE over graphql-ws and HTTP alike when which operation to run cannot be told", async () => {
    const two = "query A { viewer { __typename } } query B { viewer { __typename } }";
    const unresolved = { message: "Could not determine what operation to execute.", extensions: { code: "OPERATION_RESOLUTION_FAILURE" } };
    expect(await overWs(two)).toEqual([expect.objectContaining(unresolved)]);
    const http = await gql(t, ws.apiKey, two);
    expect(http.errors).toEqual([expect.objectContaining(unresolved)]);
  });

  // Under the token limit, yet deeper than graphql-js's recursive parser (and every walk after it) can go.
  const deepList = (depth: number) => `{ nodes(ids: ${"[".repeat(depth)}"x"${"]".repeat(depth)}) { id } }`;
  const deepObject = (depth: number) => `{ deployments(filter: ${"{a:".repeat(depth)}1${"}".repeat(depth)}) { totalCount } }`;
  const tooDeep = { message: expect.stringMatching(/^Syntax Error: Document nests brackets more than 128 levels deep\./), extensions: { code: "GRAPHQL_PARSE_FAILED" } };

  it("nests no deeper than 128 brackets: a deeper one is GRAPHQL_PARSE_FAILED over HTTP, a client's mistake", async () => {
    // The selection set's brace and the arguments' parenthesis count too: deepList(n) nests n + 2.
    for (const query of [deepList(2400), deepObject(1600), deepList(127)]) {
      const lines = await logged(async () => {
        const res = await gql(t, ws.apiKey, query);
        expect(res.status).toBe(400);
        expect(res.errors).toEqual([expect.objectContaining(tooDeep)]);
      });
      expect(lines.filter((l) => l.level >= WARN)).toEqual([]);
    }
    // At the limit, the document parses, and is told what is wrong with it.
    const within = await gql(t, ws.apiKey, deepList(126));
    expect(within.status).toBe(400);
    expect(within.errors?.[0]?.extensions?.code).toBe("GRAPHQL_VALIDATION_FAILED");
  });

  it("over graphql-ws refuses that operation alone: the socket and its other operations go on", async () => {
    const client = wsClient(url, ws.apiKey);
    try {
      const sub = subscribeWs(client, deepList(2400), {});
      const errors = await sub.done.then(
        () => sub.messages.flatMap((m) => m.errors ?? []),
        (errs: Received["errors"]) => errs,
      );
      expect(errors).toEqual([expect.objectContaining(tooDeep)]);
      const after = subscribeWs(client, `{ viewer { id } }`, {});
      await after.done;
      expect(after.messages).toEqual([{ data: { viewer: { id: expect.any(String) } } }]);
    } finally {
      await client.dispose();
    }
  });
});
