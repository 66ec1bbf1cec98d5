import { runInNewContext } from "node:vm";
import v8 from "node:v8";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/app.js";
import { subscribeWs, wsClient } from "./live.js";
import { gql } from "./support.js";

// What a stream of requests that differ each time leaves behind in the server must be bounded: a
// client (even without credentials: anonymous introspection) chooses every name and variable.

v8.setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;
const heapAfterCollection = () => {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
};

let t: TestApp;

beforeAll(async () => {
  t = await startTestApp({ PIPELINE_WORKER: "off", RATE_LIMIT_PER_MINUTE: "0" });
});
afterAll(() => t.close());

describe("what distinct requests leave behind", { timeout: 300_000 }, () => {
  it("keeps none of an operation's variables for its cost (100 anonymous requests × 1 MB of unused variables)", async () => {
    const pad = "x".repeat(1_000_000);
    // A first round of the same shape, so that what is kept for good (compiled code) is kept before measuring.
    const send = (document: string, set: number) => gql(t, null, `query Q${document} { __typename }`, { pad: `${document}-${set}-${pad}` });
    for (let i = 0; i < 4; i++) expect((await send("Warm", i)).status).toBe(200);
    const before = heapAfterCollection();
    for (let i = 0; i < 100; i++) expect((await send(String(Math.floor(i / 10)), i % 10)).status).toBe(200);
    const retainedMb = (heapAfterCollection() - before) / 1e6;
    // 100 MB of variables went through; the parse cache keeps only the documents (a few KB).
    expect(retainedMb).toBeLessThan(20);
  });

  it("labels operations in the metrics by a bounded set of names: past it, as (other)", async () => {
    const series = async () => (await t.app.metrics.graphqlOperations.get()).values;
    const names = async () => new Set((await series()).map((v) => v.labels.operation));
    // Without a key (introspection is open to anyone here): one label, whatever the names.
    for (let i = 0; i < 50; i++) expect((await gql(t, null, `query Anon${i}x${Date.now()} { __typename }`)).status).toBe(200);
    expect([...(await names())].filter((name) => String(name).startsWith("Anon"))).toEqual([]);
    expect(await names()).toContain("(anonymous introspection)");
    const before = (await series()).length;
    const { apiKey } = await t.workspace();
    for (let i = 0; i < 600; i++) expect((await gql(t, apiKey, `query Op${i}x${Date.now()} { __typename }`)).status).toBe(200);
    const after = await series();
    expect(after.length - before).toBeLessThanOrEqual(500);
    expect(await names()).toContain("(other)");
    // Every operation is still counted, under its name or (other).
    const total = after.reduce((sum, v) => sum + v.value, 0);
    expect(total).toBeGreaterThanOrEqual(600);

    // graphql-ws operations are labelled the same way (the bound is the replica's, shared).
    const client = wsClient(await t.app.start(), apiKey);
    try {
      for (let i = 0; i < 20; i++) {
        const op = subscribeWs(client, `query Ws${i}x${Date.now()} { __typename }`, {});
        await op.done;
      }
    } finally {
      await client.dispose();
    }
    const labelled = await series();
    expect(labelled.filter((v) => String(v.labels.operation).startsWith("Ws"))).toEqual([]);
    expect(labelled.reduce((sum, v) => sum + v.value, 0)).toBeGreaterThanOrEqual(670);
  });
});
