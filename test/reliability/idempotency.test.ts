import { createHash } from "node:crypto";
import { Hono } from "hono";
import { SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { Tenant } from "../../src/core/auth.js";
import { type HeldKey, IdempotencyService } from "../../src/core/idempotency.js";
import { commitThenPublish } from "../../src/core/publish.js";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { toErrorAnswer } from "../../src/rest/errors.js";
import { idempotency } from "../../src/middleware/idempotency.js";
import { TEST_JWT_SECRET, type TestApp, startTestApp, THIS_RUNS_BACKEND } from "../support/app.js";

let t: TestApp;
let ws: NewWorkspace;

beforeAll(async () => {
  t = await startTestApp();
  ws = await t.workspace();
});
afterAll(async () => {
  await t.close();
});

const listener = (computeId: string, version = "1.0.0") => ({
  compute_type: "k8s",
  compute_id: computeId,
  compute_config: { k8s_namespaces: ["agents"] },
  version,
});

const post = (key: string, body: unknown, idempotencyKey?: string) =>
  t.request("POST", "/v2/listeners", {
    key,
    body,
    headers: idempotencyKey === undefined ? {} : { "idempotency-key": idempotencyKey },
  });

async function listenerIds(key: string): Promise<string[]> {
  const res = await t.request("GET", "/v2/listeners?limit=100", { key });
  return res.body.resources.map((l: { id: string }) => l.id);
}

describe("Idempotency-Key on POST", () => {
  it("without a key, a retried create creates twice (the baseline the key prevents)", async () => {
    const mine = await t.workspace();
    expect((await post(mine.apiKey, listener("twice"))).status).toBe(201);
    expect((await post(mine.apiKey, listener("twice"))).status).toBe(409);
    expect((await post(mine.apiKey, listener("twice-b"))).status).toBe(201);
    expect(await listenerIds(mine.apiKey)).toHaveLength(2);
  });

  it("replays the first answer, status and body, and creates nothing new", async () => {
    const first = await post(ws.apiKey, listener("once"), "key-once");
    expect(first.status).toBe(201);
    expect(first.headers.get("idempotent-replayed")).toBeNull();
    for (let i = 0; i < 3; i++) {
      const again = await post(ws.apiKey, listener("once"), "key-once");
      expect(again.status).toBe(201);
      expect(again.text).toBe(first.text);
      expect(again.headers.get("content-type")).toBe(first.headers.get("content-type"));
      expect(again.headers.get("idempotent-replayed")).toBe("true");
    }
    expect(await listenerIds(ws.apiKey)).toEqual([first.body.id]);
  });

  it("names the caller in the access log of the answers it gives itself: a replay and a mismatch", async () => {
    const keyId = (await t.app.db.prisma.apiKey.findFirstOrThrow({ where: { workspaceId: ws.workspaceId } })).id;
    expect((await post(ws.apiKey, listener("logged"), "key-logged")).status).toBe(201);
    const accessLine = (requestId: string) =>
      t.guard.logLines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.msg === "request" && l.request_id === requestId);
    for (const [requestId, body, status] of [["replayed-1", listener("logged"), 201], ["mismatched-1", listener("other"), 422]] as const) {
      const res = await t.request("POST", "/v2/listeners", { key: ws.apiKey, body, headers: { "idempotency-key": "key-logged", "x-request-id": requestId } });
      expect(res.status).toBe(status);
      expect(accessLine(requestId)).toMatchObject({ status, workspace_id: ws.workspaceId, key_id: keyId });
    }
  });

  it("treats the same JSON with other key order and spacing as the same request", async () => {
    const mine = await t.workspace();
    const first = await post(mine.apiKey, listener("order"), "k-order");
    const body = listener("order");
    const reordered = JSON.stringify({ version: body.version, compute_config: body.compute_config, compute_id: body.compute_id, compute_type: body.compute_type }, null, 2);
    const again = await t.request("POST", "/v2/listeners", { key: mine.apiKey, rawBody: reordered, headers: { "idempotency-key": "k-order" } });
    expect(again.status).toBe(201);
    expect(again.body).toEqual(first.body);
    expect(await listenerIds(mine.apiKey)).toHaveLength(1);
  });

  it("answers 422 for the same key with a different body, and changes nothing", async () => {
    const mine = await t.workspace();
    const first = await post(mine.apiKey, listener("first"), "k-reused");
    expect(first.status).toBe(201);
    const other = await post(mine.apiKey, listener("second"), "k-reused");
    expect(other.status).toBe(422);
    expect(other.body).toEqual({
      detail: [
        {
          loc: ["header", "idempotency-key"],
          msg: "Value error, this Idempotency-Key was already used with a different request",
          type: "value_error",
          input: "k-reused",
        },
      ],
    });
    // The same key on another POST path is another request too.
    const path = await t.request("POST", `/v2/auth/agents/agent-1/connections`, {
      key: mine.apiKey,
      body: listener("first"),
      headers: { "idempotency-key": "k-reused" },
    });
    expect(path.status).toBe(422);
    expect(path.body.detail[0].loc).toEqual(["header", "idempotency-key"]);
    expect(await listenerIds(mine.apiKey)).toEqual([first.body.id]);
    // The first answer is still what a true retry gets.
    expect((await post(mine.apiKey, listener("first"), "k-reused")).body).toEqual(first.body);
  });

  it("never replays one caller's answer to another caller of the workspace", async () => {
    const mine = await t.workspace();
    const as = async (sub: string) => ({
      authorization: `Bearer ${await new SignJWT({ tenant_id: mine.workspaceId, sub }).setProtectedHeader({ alg: "HS256" }).setExpirationTime("5m").sign(new TextEncoder().encode(TEST_JWT_SECRET))}`,
      "idempotency-key": "k-caller",
    });
    const alice = await t.request("POST", "/v2/listeners", { body: listener("callers"), headers: await as("alice") });
    expect(alice.status).toBe(201);
    const bob = await t.request("POST", "/v2/listeners", { body: listener("callers"), headers: await as("bob") });
    expect(bob.status).toBe(422);
    expect(bob.headers.get("idempotent-replayed")).toBeNull();
    expect(bob.body.detail[0]).toMatchObject({ loc: ["header", "idempotency-key"], type: "value_error" });
    expect(await listenerIds(mine.apiKey)).toEqual([alice.body.id]);
    // Alice's own retry still gets her answer.
    const retry = await t.request("POST", "/v2/listeners", { body: listener("callers"), headers: await as("alice") });
    expect(retry.headers.get("idempotent-replayed")).toBe("true");
    expect(retry.body).toEqual(alice.body);
  });

  it("keeps keys per workspace", async () => {
    const a = await t.workspace();
    const b = await t.workspace();
    const inA = await post(a.apiKey, listener("shared-key"), "same-key");
    const inB = await post(b.apiKey, listener("shared-key"), "same-key");
    expect(inA.status).toBe(201);
    expect(inB.status).toBe(201);
    expect(inB.headers.get("idempotent-replayed")).toBeNull();
    expect(inB.body.id).not.toBe(inA.body.id);
    // And a different body in b does not collide with a's key.
    expect((await post(b.apiKey, listener("other"), "a-only")).status).toBe(201);
    expect((await post(a.apiKey, listener("different"), "a-only")).status).toBe(201);
  });

  it("replays client errors too: a retried invalid or conflicting create gets the same answer", async () => {
    const mine = await t.workspace();
    const bad = await post(mine.apiKey, { compute_type: "ecs" }, "k-bad");
    expect(bad.status).toBe(422);
    const again = await post(mine.apiKey, { compute_type: "ecs" }, "k-bad");
    expect(again.status).toBe(422);
    expect(again.text).toBe(bad.text);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
  });

  it("validates the key: 1 to 255 visible ASCII characters", async () => {
    const long = await post(ws.apiKey, listener("long-key"), "k".repeat(256));
    expect(long.status).toBe(422);
    expect(long.body.detail[0]).toMatchObject({ loc: ["header", "idempotency-key"], type: "string_too_long" });
    const spaced = await post(ws.apiKey, listener("spaced-key"), "has space");
    expect(spaced.status).toBe(422);
    expect(spaced.body.detail[0]).toMatchObject({ loc: ["header", "idempotency-key"], type: "string_pattern_mismatch" });
    const ids = await listenerIds(ws.apiKey);
    const created = await Promise.all(ids.map((id) => t.request("GET", `/v2/listeners/${id}`, { key: ws.apiKey })));
    expect(created.map((r) => r.body.compute_id)).not.toContain("long-key");
  });

  it("leaves unauthenticated requests to authentication, and ignores the key on other methods", async () => {
    const res = await post("not-a-key", listener("x"), "k-unauth");
    expect(res.status).toBe(401);
    const mine = await t.workspace();
    const created = await post(mine.apiKey, listener("patched"));
    const patch = (version: string) =>
      t.request("PATCH", `/v2/listeners/${created.body.id}`, { key: mine.apiKey, body: { version }, headers: { "idempotency-key": "k-patch" } });
    expect((await patch("2.0.0")).body.version).toBe("2.0.0");
    expect((await patch("3.0.0")).body.version).toBe("3.0.0");
  });

  it("lets concurrent duplicates create once: every one gets the winner's answer", async () => {
    const mine = await t.workspace();
    const answers = await Promise.all(Array.from({ length: 20 }, () => post(mine.apiKey, listener("race"), "k-race")));
    const ids = await listenerIds(mine.apiKey);
    expect(ids).toHaveLength(1);
    for (const a of answers) {
      expect(a.status).toBe(201);
      expect(a.body.id).toBe(ids[0]);
    }
    expect(answers.filter((a) => a.headers.get("idempotent-replayed") === null)).toHaveLength(1);
  });

  it("forgets a key once it expires (24 h)", async () => {
    const mine = await t.workspace();
    const first = await post(mine.apiKey, listener("expiring"), "k-expire");
    const [row] = await t.app.db.sql.query<{ ttl_hours: number }>(
      `SELECT EXTRACT(EPOCH FROM expires_at - created_at) / 3600 AS ttl_hours FROM idempotency_keys WHERE workspace_id = $1 AND key = 'k-expire'`,
      [mine.workspaceId],
    );
    expect(Number(row!.ttl_hours)).toBeCloseTo(24, 3);
    await t.app.db.sql.query(`UPDATE idempotency_keys SET expires_at = now() - interval '1 second' WHERE workspace_id = $1`, [mine.workspaceId]);
    const later = await post(mine.apiKey, listener("expiring-2"), "k-expire");
    expect(later.status).toBe(201);
    expect(later.headers.get("idempotent-replayed")).toBeNull();
    expect(later.body.id).not.toBe(first.body.id);
  });

  it("stores no request body: only a keyed fingerprint", async () => {
    const mine = await t.workspace();
    const secret = t.guard.secret();
    // Unknown fields are ignored by the route; the stored row must not carry them either.
    await post(mine.apiKey, { ...listener("fingerprint"), tracked_packages: [secret] }, "k-fp");
    const rows = await t.app.db.sql.query<{ fingerprint: string }>(`SELECT fingerprint FROM idempotency_keys WHERE workspace_id = $1`, [mine.workspaceId]);
    expect(rows).toHaveLength(1);
    expect(rows[0]!.fingerprint).toMatch(/^[0-9a-f]{64}$/);
    const plainHash = createHash("sha256").update(JSON.stringify({ ...listener("fingerprint"), tracked_packages: [secret] })).digest("hex");
    expect(rows[0]!.fingerprint).not.toBe(plainHash);
    await t.assertNoLeaks();
  });
});

describe("a request whose change was made but whose answer was never kept (its server stopped in between)", () => {
  const LOST = {
    detail:
      "The request with this Idempotency-Key was carried out, but its answer was lost (its server stopped or failed before answering); it is not run again. Look its result up instead.",
  };

  /** A deployment, and the keyed create-revision a CI script retries. */
  async function keyedRevision(name: string, idempotencyKey: string) {
    const created = await t.request("POST", "/v2/deployments", {
      key: ws.apiKey,
      body: { name, source: "internal_container", source_revision_config: { image_uri: "r.example/a:1" } },
    });
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    const body = { source_revision_config: { image_uri: "r.example/a:2" } };
    const send = () => t.request("POST", `/v2/deployments/${id}/revisions`, { key: ws.apiKey, body, headers: { "idempotency-key": idempotencyKey } });
    const revisionCount = async () => (await t.request("GET", `/v2/deployments/${id}/revisions?limit=100`, { key: ws.apiKey })).body.resources.length;
    return { id, body, send, revisionCount };
  }

  it("is not run again by a retry once its claim is stale: 409 says so, and nothing more is made", async () => {
    const { send, revisionCount } = await keyedRevision("idem-lost", "answer-lost");
    expect((await send()).status).toBe(201);
    // As a replica killed after the change committed and before it kept the answer leaves the key,
    // once the claim is past its staleness (60 s).
    await t.app.db.sql.query(
      `UPDATE idempotency_keys SET status = NULL, content_type = NULL, response_body = NULL, created_at = now() - interval '2 minutes' WHERE key = 'answer-lost'`,
    );
    for (let i = 0; i < 2; i++) {
      const retry = await send();
      expect(retry.status).toBe(409);
      expect(retry.body).toEqual(LOST);
    }
    expect(await revisionCount()).toBe(2);
  });

  it("is not run again when it failed (5xx) after its change was made: retries are told at once", async () => {
    const app = new Hono();
    let calls = 0;
    app.use("*", idempotency(t.app.core.idempotency, t.app.core.auth, t.app.logger));
    app.post("/v2/made-then-failed", async (c) => {
      calls++;
      await commitThenPublish(t.app.deps, async () => ({ events: [] }));
      return c.json({ detail: "failed after the change" }, 500);
    });
    const send = () =>
      app.fetch(new Request("http://test/v2/made-then-failed", { method: "POST", headers: { "x-api-key": ws.apiKey, "idempotency-key": "made-then-failed" }, body: "{}" }));
    expect((await send()).status).toBe(500);
    const retry = await send();
    expect(retry.status).toBe(409);
    expect(retry.headers.get("idempotent-replayed")).toBe("true");
    expect(await retry.json()).toEqual(LOST);
    expect(calls).toBe(1);
  });

  it("makes no change when a retry took its stale key over before the change: the retry's run is the one", async () => {
    const app = new Hono();
    let made = 0;
    app.use("*", idempotency(t.app.core.idempotency, t.app.core.auth, t.app.logger));
    // Core's refusals answered as the service answers them.
    app.onError((err, c) => {
      const answer = toErrorAnswer(err);
      if (!answer) throw err;
      return c.json(answer.body, answer.status, answer.headers);
    });
    app.post("/v2/slow-change", async (c) => {
      if (c.req.header("x-first") === "yes") {
        // This request stalls past its claim's staleness, and a retry takes the key over meanwhile.
        await t.app.db.sql.query(`UPDATE idempotency_keys SET created_at = now() - interval '2 minutes' WHERE key = 'slow-change'`);
        const retry = await send();
        expect(retry.status).toBe(201);
        expect(await retry.json()).toEqual({ made: 1 });
      }
      await commitThenPublish(t.app.deps, async () => ({ events: [] }));
      return c.json({ made: ++made }, 201);
    });
    const send = (first = false) =>
      app.fetch(
        new Request("http://test/v2/slow-change", {
          method: "POST",
          headers: { "x-api-key": ws.apiKey, "idempotency-key": "slow-change", ...(first && { "x-first": "yes" }) },
          body: "{}",
        }),
      );
    const first = await send(true);
    expect(first.status).toBe(409);
    expect(await first.json()).toEqual({ detail: expect.stringContaining("took the request over") });
    expect(made).toBe(1);
    // The retry's answer stands, and is what later retries get.
    const later = await send();
    expect(later.headers.get("idempotent-replayed")).toBe("true");
    expect(await later.json()).toEqual({ made: 1 });
  });

  it("runs again when its server stopped before the change was made", async () => {
    const { id, body, send, revisionCount } = await keyedRevision("idem-unmade", "never-made");
    // A claim whose request died before its change: stale, and nothing applied.
    const tenant = { organizationId: ws.organizationId, workspaceId: ws.workspaceId, actor: `api_key:${(await t.app.db.prisma.apiKey.findFirstOrThrow({ where: { workspaceId: ws.workspaceId } })).id}` };
    const claimed = await t.app.core.idempotency.claim(tenant, "never-made", { method: "POST", path: `/v2/deployments/${id}/revisions`, body: JSON.stringify(body) });
    expect(claimed.kind).toBe("fresh");
    await t.app.db.sql.query(`UPDATE idempotency_keys SET created_at = now() - interval '2 minutes' WHERE key = 'never-made'`);
    const retry = await send();
    expect(retry.status, retry.text).toBe(201);
    expect(await revisionCount()).toBe(2);
  });
});

describe("IdempotencyService", () => {
  const req = { method: "POST", path: "/v2/things", body: '{"a":1}' };
  let service: IdempotencyService;
  let tenant: Tenant;
  beforeAll(async () => {
    const w = await t.workspace();
    tenant = { organizationId: w.organizationId, workspaceId: w.workspaceId, actor: "test" };
    service = new IdempotencyService(t.app.deps, Buffer.alloc(32, 3), { waitMs: 300, staleMs: 60_000 });
  });

  it("makes a duplicate wait for the first request, then replay its answer", async () => {
    const held = await service.claim(tenant, "wait-1", req);
    expect(held).toEqual({ kind: "fresh", key: "wait-1", claimedAt: expect.any(Date) });
    // Patient: on a loaded machine the first request's answer may come later than 300 ms after.
    const patient = new IdempotencyService(t.app.deps, Buffer.alloc(32, 3), { waitMs: 30_000, staleMs: 60_000 });
    const waiting = patient.claim(tenant, "wait-1", req);
    setTimeout(() => void service.complete(tenant, held as HeldKey, { status: 201, contentType: "application/json", body: '{"id":1}' }), 100);
    expect(await waiting).toEqual({ kind: "replay", status: 201, contentType: "application/json", body: '{"id":1}' });
  });

  it("answers 409 when the first request is still running after the wait", async () => {
    expect(await service.claim(tenant, "wait-2", req)).toMatchObject({ kind: "fresh" });
    const err = await service.claim(tenant, "wait-2", req).catch((e: unknown) => e);
    // With when to retry, as a 503 says it.
    expect(toErrorAnswer(err)).toEqual({ status: 409, body: { detail: expect.stringContaining("still being processed") }, headers: { "Retry-After": "5" } });
  });

  it("takes over a key whose first request died unfinished", async () => {
    expect(await service.claim(tenant, "stale", req)).toMatchObject({ kind: "fresh" });
    await t.app.db.sql.query(`UPDATE idempotency_keys SET created_at = now() - interval '2 minutes' WHERE key = 'stale'`);
    expect(await service.claim(tenant, "stale", req)).toMatchObject({ kind: "fresh" });
  });

  it("does not take over a stale claim whose change commits as it looks: the answer was lost, and nothing runs twice", async () => {
    expect(await service.claim(tenant, "racing", req)).toMatchObject({ kind: "fresh" });
    // The first request stalled past the claim's staleness; its change commits (applied) just after
    // the retry read the claim as unapplied, before the retry could take it over.
    await t.app.db.sql.query(`UPDATE idempotency_keys SET created_at = now() - interval '2 minutes' WHERE key = 'racing'`);
    let committed = false;
    const commitAfterRead = (read: Promise<unknown>) =>
      read.then(async (rows) => {
        committed = true;
        await t.app.db.sql.query(`UPDATE idempotency_keys SET applied_at = now() WHERE key = 'racing'`);
        return rows;
      });
    const prisma = new Proxy(t.app.deps.prisma, {
      get(target, prop) {
        const value: unknown = Reflect.get(target, prop);
        if (prop !== "$queryRaw" || typeof value !== "function") return value;
        return (strings: TemplateStringsArray, ...values: unknown[]) => {
          const result = value.call(target, strings, ...values) as Promise<unknown>;
          return committed || !strings.join("").trimStart().startsWith("SELECT") ? result : commitAfterRead(result);
        };
      },
    });
    const retrying = new IdempotencyService({ prisma, data: t.app.deps.data }, Buffer.alloc(32, 3), { waitMs: 300, staleMs: 60_000 });
    const err = await retrying.claim(tenant, "racing", req).catch((e: unknown) => e);
    expect(committed).toBe(true);
    expect(toErrorAnswer(err)).toMatchObject({ status: 409, body: { detail: expect.stringContaining("its answer was lost") } });
  });

  // On PostgreSQL only: embedded PGlite reads the clock of the process it runs in, so it runs ahead with it.
  it.runIf(THIS_RUNS_BACKEND === "PostgreSQL")("dates claims by the database's clock: a replica whose clock runs 2 minutes ahead waits for a running claim, not take it over", async () => {
    expect(await service.claim(tenant, "skewed", req)).toMatchObject({ kind: "fresh" });
    vi.useFakeTimers({ toFake: ["Date"], shouldAdvanceTime: true });
    try {
      vi.setSystemTime(Date.now() + 120_000);
      const err = await service.claim(tenant, "skewed", req).catch((e: unknown) => e);
      expect(toErrorAnswer(err)).toMatchObject({ status: 409, body: { detail: expect.stringContaining("still being processed") } });
    } finally {
      vi.useRealTimers();
    }
  });

  it("stores the answer once the database is back when storing it met a lost connection: a retry replays it, and runs nothing", async () => {
    const app = new Hono();
    let calls = 0;
    // Patient enough for a retry to wait out the first try's pause.
    const patient = new IdempotencyService(t.app.deps, Buffer.alloc(32, 3), { waitMs: 10_000, staleMs: 60_000 });
    app.use("*", idempotency(patient, t.app.core.auth, t.app.logger));
    app.post("/v2/made", (c) => c.json({ call: ++calls }, 201));
    const lost = Object.assign(new Error("Connection terminated unexpectedly"), { code: "ECONNRESET" });
    const complete = vi.spyOn(patient, "complete").mockRejectedValueOnce(lost);
    const send = () =>
      app.fetch(new Request("http://test/v2/made", { method: "POST", headers: { "x-api-key": ws.apiKey, "idempotency-key": "made" }, body: "{}" }));
    try {
      expect((await send()).status).toBe(201);
      const retry = await send();
      expect(retry.status).toBe(201);
      expect(retry.headers.get("idempotent-replayed")).toBe("true");
      expect(await retry.json()).toEqual({ call: 1 });
      expect(calls).toBe(1);
      expect(complete).toHaveBeenCalledTimes(2);
    } finally {
      complete.mockRestore();
    }
  });

  it("releases a key when the server failed, so that a retry runs again", async () => {
    const app = new Hono();
    let calls = 0;
    app.use("*", idempotency(service, t.app.core.auth, t.app.logger));
    app.post("/v2/flaky", (c) => {
      calls++;
      return calls === 1 ? c.json({ detail: "boom" }, 500) : c.json({ call: calls }, 201);
    });
    const send = () =>
      app.fetch(new Request("http://test/v2/flaky", { method: "POST", headers: { "x-api-key": ws.apiKey, "idempotency-key": "flaky" }, body: "{}" }));
    expect((await send()).status).toBe(500);
    const second = await send();
    expect(second.status).toBe(201);
    expect(await second.json()).toEqual({ call: 2 });
    const third = await send();
    expect(third.headers.get("idempotent-replayed")).toBe("true");
    expect(await third.json()).toEqual({ call: 2 });
    expect(calls).toBe(2);
  });
});
