import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { type Received, subscribeSse, subscribeWs, wsClient } from "../graphql/live.js";
import { countSql, QUIET_TIMERS } from "../graphql/sql-count.js";
import { globalId } from "../graphql/support.js";
import { newDeployment, stored, type Target, write } from "./support.js";
import { waitFor } from "../support/wait.js";
import { Watcher } from "../../src/core/watch.js";
import { LOG_BACKLOG_LIMIT, lineWeight } from "../../src/core/log-feed.js";
import { MAX_MESSAGE_LENGTH } from "../../src/core/log-writer.js";

/** revisionLogAppended: the tail of a log, then every new line, live, over graphql-ws and SSE. */

const LOG = /* GraphQL */ `subscription($id: ID!, $kind: LogKind!, $tail: Int) { revisionLogAppended(revisionId: $id, kind: $kind, tail: $tail) { id timestamp level message } }`;

let t: TestApp;
let url: string;
let ws: NewWorkspace;

beforeAll(async () => {
  t = await startTestApp({ PIPELINE_STEP_MS: "15", RATE_LIMIT_PER_MINUTE: "0" }, undefined, QUIET_TIMERS);
  url = await t.app.start();
  ws = await t.workspace();
});
afterAll(() => t.close());

const ids = (messages: Received[]) => messages.map((m) => m.data?.revisionLogAppended?.id);
const texts = (messages: Received[]) => messages.map((m) => m.data?.revisionLogAppended?.message);
const vars = (x: Target, kind: "BUILD" | "DEPLOY", tail?: number) => ({ id: globalId("Revision", x.revisionId), kind, ...(tail !== undefined && { tail }) });

/** A managed revision whose pipeline waits until the test lets the worker go. */
async function pausedRevision(): Promise<Target> {
  await t.app.worker!.stop();
  return newDeployment(t, ws.apiKey, { source: "internal_container", source_revision_config: { image_uri: "r.example/agent:1" } });
}

describe("while the pipeline works", () => {
  it("over graphql-ws: every line of both logs in order, then completes after the final status line", async () => {
    const x = await pausedRevision();
    const client = wsClient(url, ws.apiKey);
    try {
      const build = subscribeWs(client, LOG, vars(x, "BUILD"));
      const deploy = subscribeWs(client, LOG, vars(x, "DEPLOY"));
      await waitFor(() => build.messages.length === 1, Boolean, { what: "the build log's tail" });
      t.app.worker!.start();
      await Promise.all([build.done, deploy.done]);
      expect(ids(build.messages)).toEqual((await stored(t, x.revisionId, "build")).map((l) => l.id));
      expect(ids(deploy.messages)).toEqual((await stored(t, x.revisionId, "deploy")).map((l) => l.id));
      expect(texts(build.messages)[0]).toBe("[CREATING] Revision created");
      expect(texts(build.messages)).toContain("[BUILDING] Building the image");
      expect(texts(deploy.messages).at(-1)).toBe("[DEPLOYED] Deployed");
      expect(build.messages.length).toBeGreaterThan(10);
    } finally {
      await client.dispose();
    }
  });

  it("over SSE: the same, line for line", async () => {
    const x = await pausedRevision();
    const sse = subscribeSse(t, ws.apiKey, LOG, vars(x, "DEPLOY", 0));
    const build = subscribeSse(t, ws.apiKey, LOG, vars(x, "BUILD"));
    await waitFor(() => build.messages.length === 1, Boolean, { what: "the build log's tail" });
    t.app.worker!.start();
    await Promise.all([sse.done, build.done]);
    expect(ids(sse.messages)).toEqual((await stored(t, x.revisionId, "deploy")).map((l) => l.id));
    expect(ids(build.messages)).toEqual((await stored(t, x.revisionId, "build")).map((l) => l.id));
    expect(texts(sse.messages).at(-1)).toBe("[DEPLOYED] Deployed");
  });
});

describe("the tail", () => {
  it("is the last `tail` lines (100 by default), then new lines; a finished revision's ends there", async () => {
    await t.app.worker!.stop();
    const x = await newDeployment(t, ws.apiKey);
    await write(t, x, Array.from({ length: 149 }, (_, i) => ({ message: `old ${i}` })));
    const all = await stored(t, x.revisionId);
    const client = wsClient(url, ws.apiKey);
    try {
      const five = subscribeWs(client, LOG, vars(x, "BUILD", 5));
      const none = subscribeWs(client, LOG, vars(x, "BUILD", 0));
      const standard = subscribeWs(client, LOG, vars(x, "BUILD"));
      await waitFor(() => five.messages.length === 5 && standard.messages.length === 100, Boolean, { what: "the tails" });
      expect(ids(five.messages)).toEqual(all.slice(-5).map((l) => l.id));
      expect(ids(standard.messages)).toEqual(all.slice(-100).map((l) => l.id));
      expect(none.messages).toEqual([]);
      await write(t, x, [{ message: "new" }]);
      const interrupt = await t.request("POST", `/v2/deployments/${x.deploymentId}/revisions/${x.revisionId}/interrupt`, { key: ws.apiKey });
      expect(interrupt.status).toBe(200);
      await Promise.all([five.done, none.done, standard.done]);
      expect(texts(none.messages)).toEqual(["new", "[INTERRUPTED] Interrupted by a user"]);
      expect(texts(five.messages).slice(5)).toEqual(["new", "[INTERRUPTED] Interrupted by a user"]);

      // The revision has ended: a new subscriber gets the tail, and the stream completes.
      const late = subscribeWs(client, LOG, vars(x, "BUILD", 2));
      await late.done;
      expect(texts(late.messages)).toEqual(["new", "[INTERRUPTED] Interrupted by a user"]);
    } finally {
      await client.dispose();
    }
  });

  it("is refused outside 0 to 1000, as is a revision that is not there", async () => {
    const x = await newDeployment(t, ws.apiKey);
    const client = wsClient(url, ws.apiKey);
    try {
      const big = subscribeWs(client, LOG, vars(x, "BUILD", 1001));
      await big.done;
      expect(big.messages).toEqual([{ errors: [expect.objectContaining({ extensions: expect.objectContaining({ code: "BAD_USER_INPUT" }) })] }]);
      const missing = subscribeWs(client, LOG, { id: globalId("Revision", "00000000-0000-4000-8000-000000000001"), kind: "BUILD" });
      await missing.done;
      expect(missing.messages).toEqual([{ errors: [expect.objectContaining({ extensions: { code: "NOT_FOUND" } })] }]);
    } finally {
      await client.dispose();
    }
  });
});

describe("subscribers of one log share one feed", () => {
  /** Subscribes `n` times to one log, writes one batch of lines, and counts the SQL of the write and its delivery. */
  async function statementsForOneBatch(n: number): Promise<number> {
    await t.app.worker!.stop(); // its polling would be counted too
    const x = await newDeployment(t, ws.apiKey);
    const client = wsClient(url, ws.apiKey);
    try {
      const subs = Array.from({ length: n }, () => subscribeWs(client, LOG, vars(x, "BUILD")));
      await waitFor(() => subs.every((s) => s.messages.length === 1), Boolean, { what: `${n} subscribers' tails` });
      const sql = countSql();
      try {
        await write(t, x, [{ message: "one" }, { message: "two" }, { message: "three" }]);
        await waitFor(() => subs.every((s) => s.messages.length === 4), Boolean, { what: "every subscriber's new lines" });
        for (const s of subs) expect(texts(s.messages).slice(1)).toEqual(["one", "two", "three"]);
        return sql.count;
      } finally {
        sql.restore();
      }
    } finally {
      await client.dispose();
    }
  }

  it("a batch of new lines costs the same SQL statements for 40 subscribers as for one: one read", async () => {
    const none = await statementsForOneBatch(0); // the write alone (and its NOTIFY on PostgreSQL)
    const one = await statementsForOneBatch(1);
    const many = await statementsForOneBatch(40);
    expect(one - none).toBe(1);
    expect(many).toBe(one);
  });
});

describe("a subscriber that stops reading", () => {
  it("is ended with SLOW_CONSUMER once it is LOG_BACKLOG_LIMIT behind, not followed for ever; the log's other subscribers go on", { timeout: 120_000 }, async () => {
    const x = await pausedRevision();
    try {
      await write(t, x, [{ message: "first" }]);
      // Over SSE, read through the app as a browser's fetch would, until it stops reading; and one
      // that reads at once, on the same feed (same workspace and log).
      const slow = subscribeSse(t, ws.apiKey, LOG, vars(x, "BUILD", 1));
      const tenant = await t.app.core.auth.authenticate({ apiKey: ws.apiKey });
      const steady: string[] = [];
      const steadyDone = (async () => {
        for await (const line of await t.app.core.watch.revisionLogs(tenant, x.revisionId, "build", 1)) steady.push(line.message);
      })();
      await waitFor(() => slow.messages.length === 1 && steady.length === 1, Boolean, { what: "both tails" });
      slow.pause();

      // Lines as long as lines get, until past the limit.
      const long = "x".repeat(MAX_MESSAGE_LENGTH - 10);
      const count = Math.ceil(LOG_BACKLOG_LIMIT / lineWeight({ message: long })) + 50;
      for (let n = 0; n < count; n += 500) {
        await write(t, x, Array.from({ length: Math.min(500, count - n) }, (_, i) => ({ message: `${n + i} ${long}` })));
      }
      await waitFor(() => steady.length, (length) => length === count + 1, { what: "every line, to the subscriber that reads" });

      slow.resume();
      // Until it is told it fell behind, or has every line after all (then it was held for ever).
      const outcome = () => ({ received: slow.messages.length, toldBehind: slow.messages.at(-1)?.errors !== undefined });
      await waitFor(outcome, (o) => o.toldBehind || o.received === count + 1, { what: "the slow subscriber's end" });
      expect(slow.messages.at(-1)).toEqual({
        errors: [expect.objectContaining({ message: expect.stringContaining("fell behind"), extensions: { code: "SLOW_CONSUMER" } })],
      });
      await slow.done;
      // What it did receive is the log's start, in order, none skipped; far from all of it.
      const received = texts(slow.messages.slice(0, -1));
      expect(received).toEqual(steady.slice(0, received.length));
      expect(received.length).toBeLessThan(100);

      await write(t, x, [{ message: "after" }]);
      expect((await t.request("POST", `/v2/deployments/${x.deploymentId}/revisions/${x.revisionId}/interrupt`, { key: ws.apiKey })).status).toBe(200);
      await steadyDone;
      expect(steady.slice(-2)).toEqual(["after", "[INTERRUPTED] Interrupted by a user"]);
    } finally {
      t.app.worker!.start();
    }
  });
});

describe("a deployment being deleted", () => {
  it("ends its revisions' live logs at the deletion, not at the next re-check", { timeout: 60_000 }, async () => {
    const x = await pausedRevision();
    try {
      // A re-check ten minutes away: only the deletion itself can end the feed within the wait.
      const watch = new Watcher(t.app.deps, { recheckMs: 600_000 });
      const tenant = await t.app.core.auth.authenticate({ apiKey: ws.apiKey });
      const lines = await watch.revisionLogs(tenant, x.revisionId, "build", 0);
      let ended = false;
      const drained = (async () => {
        for await (const _ of lines);
        ended = true;
      })();
      expect((await t.request("DELETE", `/v2/deployments/${x.deploymentId}`, { key: ws.apiKey })).status).toBe(204);
      await waitFor(() => ended, Boolean, { what: "the end of the deleted revision's live log" });
      await drained;
      expect(watch.feedCount).toBe(0);
    } finally {
      t.app.worker!.start();
    }
  });
});
