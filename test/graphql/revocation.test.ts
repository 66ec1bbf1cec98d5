import { SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { createGraphQLServer } from "../../src/graphql/server.js";
import { createLogger } from "../../src/logger.js";
import { startTestApp, TEST_JWT_SECRET, type TestApp } from "../support/app.js";
import { waitFor } from "../support/wait.js";
import { endOf, subscribeSse, subscribeWs, wsClient } from "./live.js";
import { createDeployment, DEPLOYMENT_CREATE } from "./support.js";

// Credentials that stop being valid while a graphql-ws socket or an SSE stream is open: a key revoked,
// a bearer token past its exp. Over HTTP every request is authenticated again; a socket and a stream
// must not outlive their credentials either.

/** Stays open (the current status first, then changes) until the deployment is deleted. */
const DEPLOYMENT_STATUS = /* GraphQL */ `
  subscription($id: ID!) { deploymentStatusChanged(deploymentId: $id) { status } }`;
const VIEWER = /* GraphQL */ `{ viewer { uuid } }`;
const REVOKED = "This API key has been revoked.";

let t: TestApp;
let url: string;
let ws: NewWorkspace;
let deploymentId: string;

beforeAll(async () => {
  t = await startTestApp({ PIPELINE_WORKER: "off", RATE_LIMIT_PER_MINUTE: "0" });
  url = await t.app.start();
  ws = await t.workspace();
  deploymentId = (await createDeployment(t, ws.apiKey)).id;
});
afterAll(() => t.close());

/** A key of the test workspace's own, to revoke. */
const newKey = () => t.app.core.apiKeys.create({ workspaceId: ws.workspaceId });

/** A live subscription on the client's socket, once its first message (the current status) is in. */
async function liveSubscription(client: ReturnType<typeof wsClient>) {
  const sub = subscribeWs(client, DEPLOYMENT_STATUS, { id: deploymentId });
  // Awaited by the test; should it fail first, the socket's close must not be an unhandled rejection.
  sub.done.catch(() => {});
  await waitFor(() => sub.messages.length, (n) => n === 1, { what: "the subscription's current status" });
  return sub;
}

/**
 * Holds the next subscription's first read (watch.deploymentStatus) until released: its request is
 * authenticated, its stream not open yet. restore() puts the read back and lets a held one go.
 */
function holdFirstRead() {
  let arrived = false;
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  const watch = t.app.core.watch;
  const original = watch.deploymentStatus.bind(watch);
  const spy = vi.spyOn(watch, "deploymentStatus").mockImplementationOnce(async (...args) => {
    arrived = true;
    await released;
    return original(...args);
  });
  return {
    arrived: () => waitFor(() => arrived, Boolean, { what: "the subscription's first read" }),
    release,
    restore: () => {
      spy.mockRestore();
      release();
    },
  };
}

/** The viewer's workspace, asked on the client's socket. */
async function viewer(client: ReturnType<typeof wsClient>) {
  const query = subscribeWs(client, VIEWER, {});
  expect(await endOf(query.done, "the viewer query")).toBe("completed");
  return query.messages;
}

describe("a revoked API key", { timeout: 90_000 }, () => {
  it("closes the graphql-ws sockets it authenticated (4401): live subscriptions end, nothing more runs", async () => {
    const { key, summary } = await newKey();
    const client = wsClient(url, key);
    const other = wsClient(url, ws.apiKey);
    try {
      const sub = await liveSubscription(client);
      const untouched = await liveSubscription(other);
      expect(await viewer(client)).toEqual([{ data: { viewer: { uuid: ws.workspaceId } } }]);

      await t.app.core.apiKeys.revoke(summary.id);
      expect(await endOf(sub.done, "the revoked key's socket closing")).toEqual({ code: 4401, reason: REVOKED });

      // Another key's socket and subscription are left alone.
      expect(await viewer(other)).toEqual([{ data: { viewer: { uuid: ws.workspaceId } } }]);
      expect(untouched.messages).toHaveLength(1);
      untouched.dispose();
    } finally {
      await client.dispose();
      await other.dispose();
    }
  });

  it("is refused on a socket it opened, operation by operation, even without the revocation's event", async () => {
    // As on a replica that missed the event: the key is revoked in the database and has left the cache.
    const { key, summary } = await newKey();
    const client = wsClient(url, key);
    try {
      const sub = await liveSubscription(client);
      await t.app.db.prisma.apiKey.update({ where: { id: summary.id }, data: { revokedAt: new Date() } });
      t.app.core.auth.forgetKey(summary.id);

      const name = `revoked-${summary.id.slice(0, 8)}`;
      const mutation = subscribeWs(client, DEPLOYMENT_CREATE, {
        input: { name, source: "INTERNAL_CONTAINER", sourceRevisionConfig: { imageUri: "registry.example/agent:1" } },
      });
      // Refused as a connection with that key is refused: the socket closes with 4401 and HTTP's words.
      expect(await endOf(mutation.done, "the mutation's refusal")).toEqual({ code: 4401, reason: REVOKED });
      expect(await endOf(sub.done, "the socket's subscription ending")).toEqual({ code: 4401, reason: REVOKED });
      expect(mutation.messages).toEqual([]);
      expect(await t.app.db.prisma.deployment.count({ where: { name } })).toBe(0);
    } finally {
      await client.dispose();
    }
  });

  it("ends the SSE streams it started, with a last result saying why", async () => {
    const [revoked, other] = [await newKey(), await newKey()];
    const sse = subscribeSse(t, revoked.key, DEPLOYMENT_STATUS, { id: deploymentId });
    const untouched = subscribeSse(t, other.key, DEPLOYMENT_STATUS, { id: deploymentId });
    let untouchedEnded = false;
    void untouched.done.finally(() => (untouchedEnded = true));
    await waitFor(() => sse.messages.length === 1 && untouched.messages.length === 1, Boolean, { what: "the current status over SSE" });

    await t.app.core.apiKeys.revoke(revoked.summary.id);
    expect(await endOf(sse.done, "the revoked key's stream ending")).toBe("completed");
    expect(sse.messages).toEqual([
      { data: { deploymentStatusChanged: { status: "AWAITING_DATABASE" } } },
      { errors: [expect.objectContaining({ message: REVOKED, extensions: { code: "UNAUTHENTICATED" } })] },
    ]);
    // Another key's stream goes on (had the revocation reached it, it would have ended with the first)...
    expect(untouchedEnded).toBe(false);
    expect(untouched.messages).toHaveLength(1);
    // ...until that key is revoked in turn.
    await t.app.core.apiKeys.revoke(other.summary.id);
    expect(await endOf(untouched.done, "the other key's stream ending")).toBe("completed");
    expect(untouched.messages.at(-1)).toEqual({ errors: [expect.objectContaining({ message: REVOKED })] });
  });

  it("ends an SSE stream whose key is revoked after it was authenticated and before its stream opened", async () => {
    const key = await newKey();
    // The subscription's first read is held: the request is authenticated, its stream not yet open.
    const held = holdFirstRead();
    try {
      const sse = subscribeSse(t, key.key, DEPLOYMENT_STATUS, { id: deploymentId });
      await held.arrived();
      await t.app.core.apiKeys.revoke(key.summary.id);
      held.release();
      expect(await endOf(sse.done, "the stream of a key revoked while it opened")).toBe("completed");
      expect(sse.messages.at(-1)).toEqual({ errors: [expect.objectContaining({ message: REVOKED, extensions: { code: "UNAUTHENTICATED" } })] });
    } finally {
      held.restore();
    }
  });
});

/** A bearer token of the test workspace, expiring at `exp` (a jose time: "1h", or seconds since the epoch). */
const bearerToken = (exp: string | number) =>
  new SignJWT({ tenant_id: ws.workspaceId, sub: "dash-user" })
    .setProtectedHeader({ alg: "HS256" })
    .setIssuedAt()
    .setExpirationTime(exp)
    .sign(new TextEncoder().encode(TEST_JWT_SECRET));

describe("a bearer token past its exp", { timeout: 90_000 }, () => {
  it("is refused on the socket it opened (4401), as over HTTP", async () => {
    const token = await bearerToken("1h");
    const client = wsClient(url, null, { Authorization: `Bearer ${token}` });
    try {
      const sub = await liveSubscription(client);
      expect(await viewer(client)).toEqual([{ data: { viewer: { uuid: ws.workspaceId } } }]);
      // Two hours on, for Date only (timers keep real time); Date stands still meanwhile, and with it
      // waitFor's deadline: the promises below are awaited bare, under the test's timeout.
      vi.setSystemTime(Date.now() + 2 * 3600_000);
      try {
        const after = subscribeWs(client, VIEWER, {});
        const closed = await after.done.then(
          () => "completed",
          (e: { code?: number; reason?: string }) => ({ code: e.code, reason: e.reason }),
        );
        expect(closed).toEqual({ code: 4401, reason: expect.stringMatching(/expired bearer token/) });
        expect(after.messages).toEqual([]);
        // The socket is closed: its live subscription ended with it.
        await expect(sub.done).rejects.toMatchObject({ code: 4401 });
      } finally {
        vi.useRealTimers();
      }
    } finally {
      await client.dispose();
    }
  });
});

describe("a revocation whose event never came (its publish failed after the revocation committed)", { timeout: 90_000 }, () => {
  it("still closes the key's sockets and ends its SSE streams, at the next re-check of the keys in use", async () => {
    // Its own app: the keys in use are re-checked every 200 ms here (every 30 s by default).
    const other = await startTestApp({ PIPELINE_WORKER: "off", RATE_LIMIT_PER_MINUTE: "0" }, undefined, { keyRecheckMs: 200 });
    const otherUrl = await other.app.start();
    try {
      const workspace = await other.workspace();
      const id = (await createDeployment(other, workspace.apiKey)).id;
      const { key, summary } = await other.app.core.apiKeys.create({ workspaceId: workspace.workspaceId });
      const client = wsClient(otherUrl, key);
      try {
        const sub = subscribeWs(client, DEPLOYMENT_STATUS, { id });
        sub.done.catch(() => {});
        const sse = subscribeSse(other, key, DEPLOYMENT_STATUS, { id });
        await waitFor(() => sub.messages.length === 1 && sse.messages.length === 1, Boolean, { what: "both subscriptions' current status" });
        // Revoked in the database only: no event is published.
        await other.app.db.prisma.apiKey.update({ where: { id: summary.id }, data: { revokedAt: new Date() } });
        expect(await endOf(sub.done, "the socket closing")).toEqual({ code: 4401, reason: REVOKED });
        expect(await endOf(sse.done, "the stream ending")).toBe("completed");
        expect(sse.messages.at(-1)).toEqual({ errors: [expect.objectContaining({ message: REVOKED, extensions: { code: "UNAUTHENTICATED" } })] });
        expect((await other.request("GET", "/v2/deployments", { key })).status).toBe(401);
      } finally {
        await client.dispose();
      }
      // A key deleted outright (by hand: npm run keys revokes) ends what it has open the same way.
      const deleted = await other.app.core.apiKeys.create({ workspaceId: workspace.workspaceId });
      const third = wsClient(otherUrl, deleted.key);
      try {
        const sub = subscribeWs(third, DEPLOYMENT_STATUS, { id });
        sub.done.catch(() => {});
        await waitFor(() => sub.messages.length, (n) => n === 1, { what: "the subscription's current status" });
        await other.app.db.prisma.apiKey.delete({ where: { id: deleted.summary.id } });
        expect(await endOf(sub.done, "the deleted key's socket closing")).toEqual({ code: 4401, reason: REVOKED });
      } finally {
        await third.dispose();
      }
    } finally {
      await other.close();
    }
  });
});

describe("a bearer token reaching its exp", { timeout: 90_000 }, () => {
  it("closes its graphql-ws socket (4401) and ends its SSE streams then, without waiting for another operation", async () => {
    // Long enough for both subscriptions to be live first on a loaded machine; the test waits it out.
    const exp = Math.floor(Date.now() / 1000) + 8;
    const token = await bearerToken(exp);
    const client = wsClient(url, null, { Authorization: `Bearer ${token}` });
    const other = wsClient(url, ws.apiKey);
    try {
      const sub = await liveSubscription(client);
      const untouched = await liveSubscription(other);
      const sse = subscribeSse(t, { authorization: `Bearer ${token}` }, DEPLOYMENT_STATUS, { id: deploymentId });
      await waitFor(() => sse.messages.length, (n) => n === 1, { what: "the current status over SSE" });

      const expired = "The bearer token has expired.";
      expect(await endOf(sub.done, "the socket closing at the token's exp")).toEqual({ code: 4401, reason: expired });
      expect(await endOf(sse.done, "the stream ending at the token's exp")).toBe("completed");
      // Not before its exp (a second's rounding aside: exp is in whole seconds).
      expect(Date.now()).toBeGreaterThanOrEqual(exp * 1000 - 1000);
      // The current status, then why it ended (only why, on a machine so slow that exp came first).
      expect(sse.messages.at(-1)).toEqual({ errors: [expect.objectContaining({ message: expired, extensions: { code: "UNAUTHENTICATED" } })] });
      expect(sse.messages.slice(0, -1)).toEqual(sse.messages.length === 2 ? [{ data: { deploymentStatusChanged: { status: "AWAITING_DATABASE" } } }] : []);
      // A key's socket is left alone.
      expect(await viewer(other)).toEqual([{ data: { viewer: { uuid: ws.workspaceId } } }]);
      expect(untouched.messages).toHaveLength(1);
      untouched.dispose();
    } finally {
      await client.dispose();
      await other.dispose();
    }
  });
});

describe("a bearer token expiring before its SSE stream opens", { timeout: 90_000 }, () => {
  it("ends that stream at once with why, and leaves no feed behind (not a 500)", async () => {
    const exp = Math.floor(Date.now() / 1000) + 2;
    const token = await bearerToken(exp);
    // The subscription's first read is held past the token's exp: authenticated in time, opened too late.
    const held = holdFirstRead();
    try {
      const sse = subscribeSse(t, { authorization: `Bearer ${token}` }, DEPLOYMENT_STATUS, { id: deploymentId });
      await held.arrived();
      await waitFor(() => Date.now(), (now) => now > exp * 1000, { what: "the token's exp to pass", intervalMs: 50 });
      held.release();
      expect(await endOf(sse.done, "the stream of a token expired while it opened")).toBe("completed");
      expect(sse.status()).toBe(200);
      expect(sse.messages.at(-1)).toEqual({ errors: [expect.objectContaining({ message: "The bearer token has expired.", extensions: { code: "UNAUTHENTICATED" } })] });
      await waitFor(() => t.app.core.watch.feedCount, (n) => n === 0, { what: "the stream's feed released" });
    } finally {
      held.restore();
    }
  });
});

describe("a GraphQL server disposed of (the app stopping)", () => {
  it("no longer listens for revocations", async () => {
    // Each registration's stop, recorded (the handlers themselves are not needed here).
    const stops: ReturnType<typeof vi.fn>[] = [];
    const listen = vi.spyOn(t.app.core.auth, "onKeyRevoked").mockImplementation(() => {
      const stop = vi.fn();
      stops.push(stop);
      return stop;
    });
    try {
      const yoga = createGraphQLServer(t.app.core, createLogger("silent"), { production: true, introspection: false, graphiql: false });
      expect(stops).toHaveLength(1);
      expect(stops[0]).not.toHaveBeenCalled();
      await yoga.dispose();
      expect(stops[0]).toHaveBeenCalledOnce();
    } finally {
      listen.mockRestore();
    }
  });
});

describe("a graphql-ws authentication that fails other than by its credentials", { timeout: 90_000 }, () => {
  it("closes the socket as one to retry (1013), not as a fault clients give up on (4500), and logs it as the service logs", async () => {
    const lost = Object.assign(new Error("Connection terminated unexpectedly"), { code: "ECONNRESET" });
    const authenticate = vi.spyOn(t.app.core.auth, "authenticate").mockRejectedValueOnce(lost);
    const consoleError = vi.spyOn(console, "error");
    const client = wsClient(url, ws.apiKey);
    try {
      expect(await endOf(subscribeWs(client, VIEWER, {}).done, "the refused connection")).toEqual({
        code: 1013,
        reason: "The database is unavailable; retry shortly.",
      });
      expect(consoleError).not.toHaveBeenCalled();
    } finally {
      authenticate.mockRestore();
      consoleError.mockRestore();
      await client.dispose();
    }
    // What a client does on 1013: connect again, which works once the database is back.
    const again = wsClient(url, ws.apiKey);
    try {
      expect(await viewer(again)).toEqual([{ data: { viewer: { uuid: ws.workspaceId } } }]);
    } finally {
      await again.dispose();
    }
  });

  it.each(["the connection", "an operation"])("closes the socket as a fault (4500, its details logged, not written to stderr) when %s's authentication fails otherwise", async (failing) => {
    const consoleError = vi.spyOn(console, "error");
    const client = wsClient(url, ws.apiKey);
    // The operation's authentication is the second: the connection's has passed.
    if (failing === "an operation") expect(await viewer(client)).toEqual([{ data: { viewer: { uuid: ws.workspaceId } } }]);
    const authenticate = vi.spyOn(t.app.core.auth, "authenticate").mockRejectedValueOnce(new TypeError("a bug"));
    try {
      expect(await endOf(subscribeWs(client, VIEWER, {}).done, `the end of ${failing}`)).toEqual({ code: 4500, reason: "Internal server error" });
      expect(consoleError).not.toHaveBeenCalled();
    } finally {
      authenticate.mockRestore();
      consoleError.mockRestore();
      await client.dispose();
    }
  });
});

describe("a database lost while an operation is authenticated", { timeout: 90_000 }, () => {
  it("refuses that operation only (SERVICE_UNAVAILABLE, to retry): the socket stays open", async () => {
    const client = wsClient(url, ws.apiKey);
    try {
      const sub = await liveSubscription(client);
      const lost = Object.assign(new Error("Connection terminated unexpectedly"), { code: "ECONNRESET" });
      const authenticate = vi.spyOn(t.app.core.auth, "authenticate").mockRejectedValueOnce(lost);
      try {
        const refused = subscribeWs(client, VIEWER, {});
        expect(await endOf(refused.done, "the refusal")).toEqual({
          errors: [expect.objectContaining({ extensions: { code: "SERVICE_UNAVAILABLE", retryAfter: 1 } })],
        });
        expect(refused.messages).toEqual([]);
      } finally {
        authenticate.mockRestore();
      }
      expect(await viewer(client)).toEqual([{ data: { viewer: { uuid: ws.workspaceId } } }]);
      expect(sub.messages).toHaveLength(1);
      sub.dispose();
    } finally {
      await client.dispose();
    }
  });
});
