import { createServer, type ServerResponse } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REVOCATION_CONCURRENCY } from "../../src/core/oauth-tokens.js";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { closeNow, listenLocally } from "../support/local-server.js";
import { tenantOf } from "../support/fixtures.js";
import { OAUTH_ENV, storeToken } from "../support/oauth.js";
import { waitFor } from "../support/wait.js";

/**
 * Deleting a provider forgets its tokens at once and revokes them at the provider a few at a time,
 * for a bounded time: a provider with many tokens, slow or not answering at all, cannot hold the
 * deletion (or the connections it opens) without end.
 */

/** A revocation endpoint that holds every request until the test lets it answer. */
function revocationEndpoint() {
  const held: ServerResponse[] = [];
  let answering = false;
  const state = { arrived: 0, inFlight: 0, maxInFlight: 0 };
  const server = createServer((req, res) => {
    state.arrived++;
    state.inFlight++;
    state.maxInFlight = Math.max(state.maxInFlight, state.inFlight);
    res.on("close", () => state.inFlight--);
    req.resume();
    req.on("end", () => (answering ? res.end() : held.push(res)));
  });
  return {
    state,
    server,
    listen: () => listenLocally(server, "/revoke"),
    /** Answers 200 to every held request and to every later one. */
    answer() {
      answering = true;
      for (const res of held.splice(0)) res.end();
    },
    close: () => closeNow(server),
  };
}

let t: TestApp;
let ws: NewWorkspace;

beforeAll(async () => {
  t = await startTestApp({ ...OAUTH_ENV, PIPELINE_WORKER: "off" });
  ws = await t.workspace();
});
afterAll(async () => {
  await t?.close();
});

/** A provider whose revocation endpoint is `revocationUrl`, holding `count` tokens. */
async function providerWithTokens(providerId: string, revocationUrl: string, count: number) {
  const created = await t.request("POST", "/v2/auth/providers", {
    key: ws.apiKey,
    body: { provider_id: providerId, name: providerId, client_id: "client", auth_url: "http://127.0.0.1:9/auth", token_url: "http://127.0.0.1:9/token", revocation_url: revocationUrl },
  });
  expect(created.status, created.text).toBe(200);
  const tenant = await tenantOf(t, ws.apiKey);
  for (let i = 0; i < count; i++) await storeToken(t, ws.apiKey, { providerId, tenant });
}

const tokensOf = (providerId: string) => t.app.db.prisma.oAuthToken.count({ where: { providerId } });

describe("deleting a provider with many tokens", () => {
  it(`revokes them ${REVOCATION_CONCURRENCY} at a time, all of them, once forgotten here`, async () => {
    const endpoint = revocationEndpoint();
    try {
      await providerWithTokens("many", await endpoint.listen(), 3 * REVOCATION_CONCURRENCY);
      const deleting = t.request("DELETE", "/v2/auth/providers/many", { key: ws.apiKey });
      await waitFor(() => endpoint.state.inFlight, (n) => n === REVOCATION_CONCURRENCY, { what: "a full set of revocations in flight" });
      // Forgotten before any revocation answered.
      expect(await tokensOf("many")).toBe(0);
      endpoint.answer();
      const deleted = await deleting;
      expect(deleted.status, deleted.text).toBe(200);
      expect(deleted.body).toEqual({ provider_id: "many", deleted: true, deleted_tokens: 3 * REVOCATION_CONCURRENCY });
      expect(endpoint.state).toMatchObject({ arrived: 3 * REVOCATION_CONCURRENCY, maxInFlight: REVOCATION_CONCURRENCY });
    } finally {
      await endpoint.close();
    }
  });

  it("answers when the provider never does: no revocation starts after the deadline, and the log says which were left", async () => {
    const endpoint = revocationEndpoint();
    try {
      await providerWithTokens("silent", await endpoint.listen(), 2 * REVOCATION_CONCURRENCY);
      const deleted = await t.request("DELETE", "/v2/auth/providers/silent", { key: ws.apiKey });
      expect(deleted.status, deleted.text).toBe(200);
      expect(deleted.body.deleted_tokens).toBe(2 * REVOCATION_CONCURRENCY);
      expect(await tokensOf("silent")).toBe(0);
      // Only the first set was sent: each of them is still waiting for its answer.
      expect(endpoint.state.arrived).toBe(REVOCATION_CONCURRENCY);
      // Every one of them is said to be unrevoked: those never sent, and those still waiting.
      const said = `${2 * REVOCATION_CONCURRENCY} token(s) not revoked at their providers in time (${REVOCATION_CONCURRENCY} not sent, ${REVOCATION_CONCURRENCY} still waiting for an answer)`;
      expect(t.guard.logLines.filter((l) => l.includes(said) && l.includes('"silent"'))).toHaveLength(1);
    } finally {
      await endpoint.close();
    }
  });
});

describe("two deletions of the same tokens at once", () => {
  // Only PostgreSQL runs two transactions at once (PGlite has one connection).
  it.skipIf(!process.env.TEST_DATABASE_URL)("count and revoke each token once: the second finds them deleted by the first", async () => {
    const endpoint = revocationEndpoint();
    endpoint.answer();
    const pool = t.app.db.pool!;
    const blocker = await pool.connect();
    try {
      await providerWithTokens("twice", await endpoint.listen(), 3);
      // A session holds the tokens' rows, so that both deletions read them, then wait at their DELETE.
      await blocker.query("BEGIN");
      await blocker.query("SELECT id FROM oauth_tokens WHERE provider_id = 'twice' FOR UPDATE");
      const deleting = [0, 1].map(() => t.request("DELETE", "/v2/auth/tokens?provider_id=twice", { key: ws.apiKey }));
      const waiting = async () =>
        (await pool.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'DELETE%'")).rows[0]!.n;
      await waitFor(waiting, (n) => n === 2, { what: "both deletions to wait at their DELETE" });
      await blocker.query("COMMIT");
      const answers = await Promise.all(deleting);
      for (const answer of answers) expect(answer.status, answer.text).toBe(200);
      expect(answers.map((a) => a.body.deleted).sort()).toEqual([0, 3]);
      expect(await tokensOf("twice")).toBe(0);
      // Each deletion revoked what it took before it answered.
      expect(endpoint.state.arrived).toBe(3);
    } finally {
      await blocker.query("ROLLBACK").catch(() => {});
      blocker.release();
      await endpoint.close();
    }
  });
});
