import { randomUUID } from "node:crypto";
import { SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, TEST_JWT_SECRET, type TestApp } from "../support/app.js";
import { storeToken } from "../support/oauth.js";

let t: TestApp;
let ws: NewWorkspace;

beforeAll(async () => {
  t = await startTestApp();
  ws = await t.workspace();
});
afterAll(() => t.close());

const path = (agentId: string) => `/v2/auth/agents/${agentId}/connections`;
const connect = (key: string, agentId: string, oauthTokenId: unknown) =>
  t.request("POST", path(agentId), { key, body: { oauth_token_id: oauthTokenId } });

describe("agent connections", () => {
  it("connects a token, lists it, and deletes it", async () => {
    const token = await storeToken(t, ws.apiKey, { scopes: ["repo", "read:org"] });
    const created = await connect(ws.apiKey, "support-bot", token.id);
    expect(created.status).toBe(201);
    const key = await t.app.db.prisma.apiKey.findFirstOrThrow({ where: { workspaceId: ws.workspaceId } });
    expect(created.body).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      agent_id: "support-bot",
      oauth_token_id: token.id,
      provider_id: "github",
      provider_account_label: "acme-bot",
      scopes: ["repo", "read:org"],
      expires_at: token.expiresAt!.toISOString(),
      created_by: `api_key:${key.id}`,
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT[\d:.]+Z$/),
    });

    const list = await t.request("GET", path("support-bot"), { key: ws.apiKey });
    expect(list.status).toBe(200);
    expect(list.body).toEqual({ data: [created.body] });

    const deleted = await t.request("DELETE", `${path("support-bot")}/${created.body.id}`, { key: ws.apiKey });
    expect(deleted.status).toBe(204);
    expect(deleted.text).toBe("");
    expect((await t.request("GET", path("support-bot"), { key: ws.apiKey })).body).toEqual({ data: [] });

    const again = await t.request("DELETE", `${path("support-bot")}/${created.body.id}`, { key: ws.apiKey });
    expect(again.status).toBe(404);
    expect(again.body).toEqual({ detail: `Connection ID ${created.body.id} not found.` });
  });

  it("takes provider, label, scopes and expiry from the token, follows its relabelling, and refuses a token not the caller's", async () => {
    const mine = await t.workspace();
    const token = await storeToken(t, mine.apiKey, { providerId: "gitlab", scopes: [], label: null, expiresAt: null });
    const created = await connect(mine.apiKey, "describer", token.id);
    expect(created.status, created.text).toBe(201);
    expect(created.body).toMatchObject({ oauth_token_id: token.id, provider_id: "gitlab", provider_account_label: null, scopes: [], expires_at: null });
    const relabelled = await t.request("PATCH", `/v2/auth/tokens/${token.id}/metadata`, { key: mine.apiKey, body: { provider_account_label: "team-ops" } });
    expect(relabelled.status, relabelled.text).toBe(200);
    expect((await t.request("GET", path("describer"), { key: mine.apiKey })).body.data[0].provider_account_label).toBe("team-ops");

    const theirs = await storeToken(t, (await t.workspace()).apiKey);
    for (const tokenId of [randomUUID(), "github:acme-bot", theirs.id, theirs.id.toUpperCase()]) {
      const res = await connect(mine.apiKey, "describer", tokenId);
      expect(res.status, tokenId).toBe(404);
      expect(res.body).toEqual({ detail: `OAuth token ID ${tokenId} not found.` });
    }
    // Deleting the token ends the connections that used it.
    expect((await t.request("DELETE", `/v2/auth/tokens/${token.id}`, { key: mine.apiKey })).status).toBe(204);
    expect((await t.request("GET", path("describer"), { key: mine.apiKey })).body).toEqual({ data: [] });
  });

  it("records the token's subject as created_by for a bearer caller", async () => {
    const token = await new SignJWT({ tenant_id: ws.workspaceId })
      .setProtectedHeader({ alg: "HS256" })
      .setSubject("user-77")
      .setExpirationTime("5m")
      .sign(new TextEncoder().encode(TEST_JWT_SECRET));
    const authorization = `Bearer ${token}`;
    const mine = await storeToken(t, "", { providerId: "slack", tenant: await t.app.core.auth.authenticate({ authorization }) });
    const res = await t.request("POST", path("jwt-agent"), { headers: { authorization }, body: { oauth_token_id: mine.id } });
    expect(res.status, res.text).toBe(201);
    expect(res.body.created_by).toBe("user:user-77");
    // A token of the workspace's API key is not this user's.
    const keys = await storeToken(t, ws.apiKey, { providerId: "slack" });
    const other = await t.request("POST", path("jwt-agent"), { headers: { authorization }, body: { oauth_token_id: keys.id } });
    expect(other.status).toBe(404);
  });

  it("lists one agent's connections, newest first", async () => {
    const mine = await t.workspace();
    const [one, two, three] = [await storeToken(t, mine.apiKey), await storeToken(t, mine.apiKey), await storeToken(t, mine.apiKey)];
    const a = await connect(mine.apiKey, "agent-a", one.id);
    const b = await connect(mine.apiKey, "agent-a", two.id);
    const c = await connect(mine.apiKey, "agent-a", three.id);
    await connect(mine.apiKey, "agent-b", one.id);
    const list = await t.request("GET", path("agent-a"), { key: mine.apiKey });
    const rows = [a.body, b.body, c.body].sort((x, y) =>
      y.created_at.localeCompare(x.created_at) || (x.id < y.id ? 1 : -1),
    );
    expect(list.body.data).toEqual(rows);
  });

  it("refuses the same token twice on one agent with 409, and allows it elsewhere", async () => {
    const mine = await t.workspace();
    const token = await storeToken(t, mine.apiKey);
    expect((await connect(mine.apiKey, "dup-agent", token.id)).status).toBe(201);
    const again = await connect(mine.apiKey, "dup-agent", token.id);
    expect(again.status).toBe(409);
    expect(again.body).toEqual({ detail: expect.stringContaining(token.id) });
    expect((await connect(mine.apiKey, "other-agent", token.id)).status).toBe(201);
    const other = await t.workspace();
    expect((await connect(other.apiKey, "dup-agent", (await storeToken(t, other.apiKey)).id)).status).toBe(201);
    expect((await t.request("GET", path("dup-agent"), { key: mine.apiKey })).body.data).toHaveLength(1);
  });

  it("validates agent_id, connection_id and the body, all at once, and changes nothing", async () => {
    const mine = await t.workspace();
    const tooLong = `a${"b".repeat(63)}`;
    for (const bad of ["Agent", "1agent", "agent-", "a_b", tooLong]) {
      for (const [method, suffix] of [["GET", ""], ["POST", ""], ["DELETE", `/${randomUUID()}`]] as const) {
        const res = await t.request(method, `${path(bad)}${suffix}`, { key: mine.apiKey, body: method === "POST" ? { oauth_token_id: "x:y" } : undefined });
        expect(res.status, `${method} ${bad}`).toBe(422);
        expect(res.body.detail, `${method} ${bad}`).toEqual([
          expect.objectContaining({ loc: ["path", "agent_id"], input: bad, type: bad === tooLong ? "string_too_long" : "string_pattern_mismatch" }),
        ]);
      }
    }
    const pattern = await t.request("GET", path("Agent"), { key: mine.apiKey });
    expect(pattern.body.detail[0]).toEqual({
      loc: ["path", "agent_id"],
      type: "string_pattern_mismatch",
      msg: "String should match pattern '^[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?$'",
      input: "Agent",
      ctx: { pattern: "^[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?$" },
    });
    const token = await storeToken(t, mine.apiKey);
    expect((await connect(mine.apiKey, "a", token.id)).status).toBe(201);
    expect((await connect(mine.apiKey, `a${"b".repeat(62)}`, token.id)).status).toBe(201);

    // connection_id is a plain string in the reference (not documented as a UUID): one that names no
    // connection, whatever its form, is a 404, as a token_id is.
    for (const id of ["not-a-uuid", "abc", "x".repeat(100)]) {
      const res = await t.request("DELETE", `${path("a")}/${id}`, { key: mine.apiKey });
      expect(res.status, id).toBe(404);
      expect(res.body).toEqual({ detail: `Connection ID ${id} not found.` });
    }
    expect((await t.request("DELETE", `${path("a")}/${"x".repeat(101)}`, { key: mine.apiKey })).body.detail).toEqual([
      expect.objectContaining({ loc: ["path", "connection_id"], type: "string_too_long" }),
    ]);
    const bad = await t.request("DELETE", `${path("Bad")}/not-a-uuid`, { key: mine.apiKey });
    expect(bad.status).toBe(422);
    expect(bad.body.detail.map((d: { loc: unknown }) => d.loc)).toEqual([["path", "agent_id"]]);
    expect((await t.request("GET", path("a"), { key: mine.apiKey })).body.data).toHaveLength(1);

    for (const [value, type] of [
      [undefined, "missing"],
      [42, "string_type"],
      ["", "string_too_short"],
      ["has space", "string_pattern_mismatch"],
      ["nul\u0000byte", "string_pattern_mismatch"],
      ["x".repeat(256), "string_too_long"],
    ] as const) {
      const res = await connect(mine.apiKey, "validated", value);
      expect(res.status, String(value)).toBe(422);
      expect(res.body.detail).toEqual([expect.objectContaining({ loc: ["body", "oauth_token_id"], type })]);
    }
    const noBody = await t.request("POST", path("validated"), { key: mine.apiKey });
    expect(noBody.status).toBe(422);
    const json = await t.request("POST", path("validated"), { key: mine.apiKey, rawBody: "[" });
    expect(json.body.detail[0]).toMatchObject({ type: "json_invalid" });
    expect((await t.request("GET", path("validated"), { key: mine.apiKey })).body).toEqual({ data: [] });
  });

  it("answers 404 for a connection of another agent or another workspace, and hides their lists", async () => {
    const a = await t.workspace();
    const b = await t.workspace();
    const created = await connect(a.apiKey, "private-agent", (await storeToken(t, a.apiKey)).id);
    const id = created.body.id;
    const wrongAgent = await t.request("DELETE", `${path("someone-else")}/${id}`, { key: a.apiKey });
    expect(wrongAgent.status).toBe(404);
    const wrongWorkspace = await t.request("DELETE", `${path("private-agent")}/${id}`, { key: b.apiKey });
    expect(wrongWorkspace.status).toBe(404);
    expect(wrongWorkspace.body).toEqual({ detail: `Connection ID ${id} not found.` });
    expect((await t.request("GET", path("private-agent"), { key: b.apiKey })).body).toEqual({ data: [] });
    // b connecting a token of its own to its own agent of that name does not touch a's.
    expect((await connect(b.apiKey, "private-agent", (await storeToken(t, b.apiKey)).id)).status).toBe(201);
    expect((await t.request("GET", path("private-agent"), { key: a.apiKey })).body.data).toEqual([created.body]);

    for (const [method, suffix] of [["GET", ""], ["POST", ""], ["DELETE", `/${id}`]] as const) {
      const res = await t.request(method, `${path("private-agent")}${suffix}`, { body: method === "POST" ? { oauth_token_id: "x" } : undefined });
      expect(res.status, method).toBe(401);
    }
  });
});

describe("a token deleted while it is being connected", () => {
  const tokenGone = (tokenId: string) => ({ detail: `OAuth token ID ${tokenId} not found.` });

  it("answers 404 when the deletion commits between the token's check and the insert, and leaves no connection", async () => {
    const mine = await t.workspace();
    const token = await storeToken(t, mine.apiKey);
    // The create has found the token; its DELETE (revoking it at the provider) commits before the insert.
    const byIds = t.app.core.oauthTokens.byIds.bind(t.app.core.oauthTokens);
    const spy = vi.spyOn(t.app.core.oauthTokens, "byIds").mockImplementationOnce(async (tenant, ids) => {
      const found = await byIds(tenant, ids);
      expect((await t.request("DELETE", `/v2/auth/tokens/${token.id}`, { key: mine.apiKey })).status).toBe(204);
      return found;
    });
    try {
      const res = await connect(mine.apiKey, "late-agent", token.id);
      expect(res.status, res.text).toBe(404);
      expect(res.body).toEqual(tokenGone(token.id));
    } finally {
      spy.mockRestore();
    }
    expect((await t.request("GET", path("late-agent"), { key: mine.apiKey })).body).toEqual({ data: [] });
    expect(await t.app.db.prisma.agentConnection.count({ where: { oauthTokenId: token.id } })).toBe(0);
  });

  it("leaves no connection whichever commits first, when both run at once", async () => {
    const mine = await t.workspace();
    const token = await storeToken(t, mine.apiKey);
    const [deleted, connected] = await Promise.all([
      t.request("DELETE", `/v2/auth/tokens/${token.id}`, { key: mine.apiKey }),
      connect(mine.apiKey, "racing-agent", token.id),
    ]);
    expect(deleted.status).toBe(204);
    // Created first (and then taken by the deletion), or refused: the token is gone.
    if (connected.status === 404) expect(connected.body).toEqual(tokenGone(token.id));
    else expect(connected.status, connected.text).toBe(201);
    expect((await t.request("GET", path("racing-agent"), { key: mine.apiKey })).body).toEqual({ data: [] });
  });

  it("goes with its token whatever deletes the token: the database's key, not only the deletion's own sweep", async () => {
    const mine = await t.workspace();
    const token = await storeToken(t, mine.apiKey);
    expect((await connect(mine.apiKey, "keyed-agent", token.id)).status).toBe(201);
    // As a connection committed after TokenVault.take swept the token's connections, before it deleted the token.
    await t.app.db.prisma.oAuthToken.delete({ where: { id: token.id } });
    expect((await t.request("GET", path("keyed-agent"), { key: mine.apiKey })).body).toEqual({ data: [] });
  });
});
