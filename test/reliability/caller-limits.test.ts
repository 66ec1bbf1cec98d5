import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { type TestApp, startTestApp } from "../support/app.js";
import { subscribeWs, wsClient } from "../graphql/live.js";
import { waitFor } from "../support/wait.js";

/**
 * The limits hold over every face: a graphql-ws socket's operations draw on the caller's bucket, the
 * same one its HTTP requests do; and an address whose authentications keep failing (made-up keys,
 * a new one each time) is refused with 429 before the next lookup.
 */

describe("graphql-ws operations count against the caller's rate limit", () => {
  let t: TestApp;
  let url: string;
  beforeAll(async () => {
    t = await startTestApp({ RATE_LIMIT_PER_MINUTE: "6", PIPELINE_WORKER: "off" });
    url = await t.app.start();
  });
  afterAll(() => t.close());

  it("each subscribe message takes a token: past the limit, RATE_LIMITED with retryAfter, and HTTP shares the bucket", async () => {
    const ws: NewWorkspace = await t.workspace();
    // Verified here, as by a first request (which would count against the address).
    await t.app.core.auth.authenticate({ apiKey: ws.apiKey });
    // Two of the six go over HTTP.
    for (let i = 0; i < 2; i++) expect((await t.request("GET", "/v2/listeners", { key: ws.apiKey })).status).toBe(200);
    const client = wsClient(url, ws.apiKey);
    try {
      const outcomes: string[] = [];
      for (let i = 0; i < 8; i++) {
        const op = subscribeWs(client, i % 2 ? `mutation { listenerDelete(id: "${Buffer.from(`Listener:${randomUUID()}`).toString("base64")}") { userErrors { code } } }` : `{ viewer { id } }`, {});
        const result = await op.done.then(
          () => (op.messages[0]?.errors ? JSON.stringify(op.messages[0].errors) : "ok"),
          (errors: unknown) => JSON.stringify(errors),
        );
        outcomes.push(result);
      }
      expect(outcomes.slice(0, 4)).toEqual(["ok", "ok", "ok", "ok"]);
      for (const refused of outcomes.slice(4)) {
        const [error] = JSON.parse(refused);
        expect(error.extensions).toEqual({ code: "RATE_LIMITED", retryAfter: expect.any(Number) });
        expect(error.extensions.retryAfter).toBeGreaterThanOrEqual(1);
        expect(error.message).toMatch(/rate limit/i);
      }
      // The socket stays open, and its bucket is the caller's: HTTP is refused too.
      expect((await t.request("GET", "/v2/listeners", { key: ws.apiKey })).status).toBe(429);
    } finally {
      await client.dispose();
    }
  });

  it("a key first used over graphql-ws: verified as its socket opens, the socket draws on the key's own bucket, not its address's", async () => {
    const ws: NewWorkspace = await t.workspace();
    const client = wsClient(url, ws.apiKey);
    try {
      const outcomes: string[] = [];
      for (let i = 0; i < 7; i++) {
        const op = subscribeWs(client, `{ viewer { id } }`, {});
        type Errors = { extensions?: { code?: string } }[] | undefined;
        const errors = await op.done.then(() => op.messages[0]?.errors as Errors, (refused: Errors) => refused);
        outcomes.push(errors ? errors.map((e) => e.extensions?.code).join() : "ok");
      }
      expect(outcomes).toEqual(["ok", "ok", "ok", "ok", "ok", "ok", "RATE_LIMITED"]);
    } finally {
      await client.dispose();
    }
    // The key's bucket is spent, over HTTP too; its address (the socket's, 127.0.0.1) has all of its own.
    expect((await t.request("GET", "/v2/listeners", { key: ws.apiKey })).status).toBe(429);
    expect((await fetch(`${url}/v2/listeners`)).status).toBe(401);
  });
});

describe("failed authentications are limited per client address", () => {
  let t: TestApp;
  let url: string;
  beforeAll(async () => {
    t = await startTestApp({ AUTH_FAILURES_PER_MINUTE: "10", PIPELINE_WORKER: "off" });
    url = await t.app.start();
  });
  afterAll(() => t.close());

  it("rotating made-up X-Api-Key values from one address: 401 ten times, then 429 with Retry-After, without looking them up", async () => {
    const authenticate = vi.spyOn(t.app.core.auth, "authenticate");
    const statuses: number[] = [];
    for (let i = 0; i < 40; i++) {
      const path = i % 2 ? "/v2/listeners" : "/graphql";
      const res = await fetch(`${url}${path}`, {
        method: i % 2 ? "GET" : "POST",
        headers: { "x-api-key": `dcp_made-up-${randomUUID()}`, "content-type": "application/json" },
        body: i % 2 ? undefined : JSON.stringify({ query: "{ viewer { id } }" }),
      });
      statuses.push(res.status);
      if (res.status === 429) {
        expect(res.headers.get("retry-after")).toMatch(/^[1-9]\d*$/);
        const message = expect.stringMatching(/failed authentications/);
        // Each face in its own shape: GraphQL's errors, REST's detail.
        expect(await res.json()).toEqual(
          path === "/graphql" ? { errors: [{ message, extensions: { code: "RATE_LIMITED", retryAfter: Number(res.headers.get("retry-after")) } }] } : { detail: message },
        );
      }
    }
    expect(statuses.slice(0, 10)).toEqual(Array(10).fill(401));
    expect(statuses.slice(10)).toEqual(Array(30).fill(429));
    // Each of the ten failures was a lookup; none after.
    expect(authenticate).toHaveBeenCalledTimes(10);
    authenticate.mockRestore();
  });

  it("over graphql-ws too: the address is refused (4429) once its failures are spent", async () => {
    const codes: number[] = [];
    for (let i = 0; i < 3; i++) {
      const client = wsClient(url, `dcp_made-up-${randomUUID()}`);
      const op = subscribeWs(client, `{ viewer { id } }`, {});
      codes.push(await op.done.then(() => 0, (event: { code?: number }) => event.code ?? -1));
      await client.dispose();
    }
    expect(codes).toEqual([4429, 4429, 4429]);
  });

  it("leaves other addresses alone, and probes", async () => {
    const ws = await t.workspace();
    // app.fetch carries no socket: another address than the real one above.
    expect((await t.request("GET", "/v2/listeners", { key: ws.apiKey })).status).toBe(200);
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
  });
});

describe("failed authentications over graphql-ws count as HTTP ones do", () => {
  let t: TestApp;
  let url: string;
  beforeAll(async () => {
    t = await startTestApp({ AUTH_FAILURES_PER_MINUTE: "3", PIPELINE_WORKER: "off" });
    url = await t.app.start();
  });
  afterAll(() => t.close());

  it("three bad keys close with 4401, the fourth attempt with 4429, and HTTP from that address is refused", async () => {
    const codes: number[] = [];
    for (let i = 0; i < 4; i++) {
      const client = wsClient(url, `dcp_made-up-${randomUUID()}`);
      const op = subscribeWs(client, `{ viewer { id } }`, {});
      codes.push(await op.done.then(() => 0, (event: { code?: number }) => event.code ?? -1));
      await client.dispose();
    }
    expect(codes).toEqual([4401, 4401, 4401, 4429]);
    expect((await fetch(`${url}/v2/listeners`, { headers: { "x-api-key": "dcp_another" } })).status).toBe(429);
  });

  it("an operation refused on an open socket (its key revoked) counts as a failed authentication too", async () => {
    // Another app: the address above has spent its failures.
    const u = await startTestApp({ AUTH_FAILURES_PER_MINUTE: "1", PIPELINE_WORKER: "off" });
    try {
      const base = await u.app.start();
      const ws = await u.workspace();
      const { key, summary } = await u.app.core.apiKeys.create({ workspaceId: ws.workspaceId });
      const deployment = await u.request("POST", "/v2/deployments", { key, body: { name: "held-open", source: "internal_container", source_revision_config: { image_uri: "r.example/a:1" } } });
      expect(deployment.status).toBe(201);
      const client = wsClient(base, key);
      try {
        // A live subscription holds the socket open (a lazy client closes an idle one).
        const live = subscribeWs(client, `subscription($id: ID!) { deploymentStatusChanged(deploymentId: $id) { status } }`, { id: Buffer.from(`Deployment:${deployment.body.id}`).toString("base64") });
        live.done.catch(() => {});
        await waitFor(() => live.messages.length, (n) => n === 1, { what: "the live subscription's current status" });
        // Revoked in the database and dropped from the cache, as a replica that missed the event has it.
        await u.app.db.prisma.apiKey.update({ where: { id: summary.id }, data: { revokedAt: new Date() } });
        u.app.core.auth.forgetKey(summary.id);
        const refused = subscribeWs(client, `{ viewer { id } }`, {});
        expect(await refused.done.then(() => 0, (event: { code?: number }) => event.code ?? -1)).toBe(4401);
      } finally {
        await client.dispose();
      }
      // That was the address's one failure of the minute: its next connection is refused before any lookup.
      const next = wsClient(base, `dcp_made-up-${randomUUID()}`);
      const op = subscribeWs(next, `{ viewer { id } }`, {});
      expect(await op.done.then(() => 0, (event: { code?: number }) => event.code ?? -1)).toBe(4429);
      await next.dispose();
    } finally {
      await u.close();
    }
  });
});
