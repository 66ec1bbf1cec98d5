import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/app.js";
import { OAUTH_ENV, storeToken } from "../support/oauth.js";
import { holdNextTransaction, type TransactionHold } from "../support/transaction-hold.js";
import { waitFor } from "../support/wait.js";

/**
 * A request that has read a token or a provider and is about to change it, while another request
 * deletes it: the request is held between its reads and its transaction (holdNextTransaction) until
 * the deletion has answered. The object is gone by then: the documented 404, never a 500 or a second
 * success, and nothing changed.
 */

let t: TestApp;
const holds: TransactionHold[] = [];

beforeAll(async () => {
  t = await startTestApp({ ...OAUTH_ENV, PIPELINE_WORKER: "off" });
});
// A test that failed half-way must not leave the next test's transactions held.
afterEach(() => {
  for (const hold of holds.splice(0)) hold.release();
});
afterAll(async () => {
  await t?.close();
});

/** Starts `request` and holds it at its transaction: it has read what it reads first. */
async function heldAtItsTransaction<T>(request: () => Promise<T>): Promise<{ answer: Promise<T>; hold: TransactionHold }> {
  const hold = holdNextTransaction(t);
  holds.push(hold);
  const answer = request();
  await waitFor(() => hold.arrived, (n) => n >= 1, { what: "the request to reach its transaction" });
  return { answer, hold };
}

const tokensOf = async (key: string) =>
  (await t.request("GET", "/v2/auth/tokens?provider_id=github", { key })).body.map((x: { id: string; is_default: boolean }) => [x.id, x.is_default]);

describe("a token deleted while its metadata is patched", () => {
  it("answers 404 to the PATCH, and its transaction changes nothing (the other token stays the default)", async () => {
    const mine = await t.workspace();
    const doomed = await storeToken(t, mine.apiKey);
    const other = await storeToken(t, mine.apiKey, { label: "other" });
    expect(await tokensOf(mine.apiKey)).toEqual([[other.id, true], [doomed.id, false]]);

    const patch = await heldAtItsTransaction(() =>
      t.request("PATCH", `/v2/auth/tokens/${doomed.id}/metadata`, { key: mine.apiKey, body: { provider_account_label: "relabelled", is_default: true } }),
    );
    const deleted = await t.request("DELETE", `/v2/auth/tokens/${doomed.id}`, { key: mine.apiKey });
    expect(deleted.status, deleted.text).toBe(204);
    patch.hold.release();

    const patched = await patch.answer;
    expect(patched.status, patched.text).toBe(404);
    expect(patched.body).toEqual({ detail: `OAuth token ID ${doomed.id} not found.` });
    // Making it the default cleared the other's flag first: rolled back with the rest.
    expect(await tokensOf(mine.apiKey)).toEqual([[other.id, true]]);
  });
});

describe("one object deleted by two requests at once", () => {
  it("token: the first deletion answers 204, the other 404, and the token is revoked once", async () => {
    const mine = await t.workspace();
    const token = await storeToken(t, mine.apiKey);

    const late = await heldAtItsTransaction(() => t.request("DELETE", `/v2/auth/tokens/${token.id}`, { key: mine.apiKey }));
    const first = await t.request("DELETE", `/v2/auth/tokens/${token.id}`, { key: mine.apiKey });
    expect(first.status, first.text).toBe(204);
    late.hold.release();

    const second = await late.answer;
    expect(second.status, second.text).toBe(404);
    expect(second.body).toEqual({ detail: `OAuth token ID ${token.id} not found.` });
    // Its provider has no revocation endpoint: the one deletion that took it says so, once.
    expect(t.guard.logLines.filter((l) => l.includes(token.id) && l.includes("no revocation endpoint"))).toHaveLength(1);
  });

  it("provider: the first deletion answers 200 with the tokens it took, the other 404", async () => {
    const mine = await t.workspace();
    await storeToken(t, mine.apiKey, { providerId: "gh" });

    const late = await heldAtItsTransaction(() => t.request("DELETE", "/v2/auth/providers/gh", { key: mine.apiKey }));
    const first = await t.request("DELETE", "/v2/auth/providers/gh", { key: mine.apiKey });
    expect(first.status, first.text).toBe(200);
    expect(first.body).toEqual({ provider_id: "gh", deleted: true, deleted_tokens: 1 });
    late.hold.release();

    const second = await late.answer;
    expect(second.status, second.text).toBe(404);
    expect(second.body).toEqual({ detail: "Provider ID gh not found." });
  });
});
