import { randomUUID } from "node:crypto";
import { SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { addWorkspace, type NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, TEST_JWT_SECRET, type TestApp } from "../support/app.js";
import { listenerBody } from "../support/fixtures.js";

let t: TestApp;
let bound: NewWorkspace;
let orgWide: NewWorkspace;
/** A second workspace of orgWide's organisation. */
let sibling: string;
let stranger: NewWorkspace;

const listener = (computeId: string) => listenerBody({ compute_id: computeId });
const computeIds = (body: { resources: { compute_id: string }[] }) => body.resources.map((l) => l.compute_id);
const list = (headers: Record<string, string>) => t.request("GET", "/v2/listeners", { headers });

beforeAll(async () => {
  t = await startTestApp();
  bound = await t.workspace();
  orgWide = await t.workspace({ orgWide: true });
  sibling = await addWorkspace(t.app.db.prisma, orgWide.organizationId, "sibling");
  stranger = await t.workspace();
  await t.request("POST", "/v2/listeners", { key: bound.apiKey, body: listener("bound-only") });
  await t.request("POST", "/v2/listeners", { key: stranger.apiKey, body: listener("stranger-only") });
  await t.request("POST", "/v2/listeners", {
    key: orgWide.apiKey,
    headers: { "x-tenant-id": sibling },
    body: listener("sibling-only"),
  });
});
afterAll(() => t.close());

const sign = (claims: Record<string, unknown>, options: { secret?: string; expires?: string | number; alg?: string } = {}) => {
  let jwt = new SignJWT(claims).setProtectedHeader({ alg: options.alg ?? "HS256" }).setIssuedAt();
  if (options.expires !== undefined) jwt = jwt.setExpirationTime(options.expires);
  return jwt.sign(new TextEncoder().encode(options.secret ?? TEST_JWT_SECRET));
};

describe("X-Api-Key", () => {
  it("a key bound to a workspace sees that workspace only", async () => {
    const res = await list({ "x-api-key": bound.apiKey });
    expect(res.status).toBe(200);
    expect(computeIds(res.body)).toEqual(["bound-only"]);
  });

  it("a bound key accepts X-Tenant-Id (either spelling, any case) naming its own workspace", async () => {
    for (const name of ["X-Tenant-Id", "X-Tenant-ID", "x-tenant-id"]) {
      for (const id of [bound.workspaceId, bound.workspaceId.toUpperCase()]) {
        const res = await list({ "x-api-key": bound.apiKey, [name]: id });
        expect(res.status, `${name}: ${id}`).toBe(200);
        expect(computeIds(res.body)).toEqual(["bound-only"]);
      }
    }
  });

  it("a bound key with X-Tenant-Id of another workspace is 403", async () => {
    for (const other of [stranger.workspaceId, sibling, randomUUID(), "not-a-uuid"]) {
      const res = await list({ "x-api-key": bound.apiKey, "X-Tenant-Id": other });
      expect(res.status, other).toBe(403);
      expect(res.body).toEqual({ detail: expect.any(String) });
    }
  });

  it("an organisation-wide key needs X-Tenant-Id: 403 'requires workspace specification' without it", async () => {
    const res = await list({ "x-api-key": orgWide.apiKey });
    expect(res.status).toBe(403);
    expect(res.body.detail).toContain("requires workspace specification");
  });

  it("an organisation-wide key works in each workspace of its organisation, scoped to the one named", async () => {
    const own = await list({ "x-api-key": orgWide.apiKey, "X-Tenant-ID": orgWide.workspaceId });
    expect(own.status).toBe(200);
    expect(computeIds(own.body)).toEqual([]);
    const sib = await list({ "x-api-key": orgWide.apiKey, "X-Tenant-Id": sibling });
    expect(sib.status).toBe(200);
    expect(computeIds(sib.body)).toEqual(["sibling-only"]);
  });

  it("an organisation-wide key is 403 for a workspace of another organisation or one that does not exist", async () => {
    for (const other of [stranger.workspaceId, bound.workspaceId, randomUUID(), "nope"]) {
      const res = await list({ "x-api-key": orgWide.apiKey, "X-Tenant-Id": other });
      expect(res.status, other).toBe(403);
      expect(res.body).toEqual({ detail: expect.any(String) });
    }
  });

  it("missing or unknown credentials are 401 with a detail", async () => {
    const cases: Record<string, string>[] = [
      {},
      { "x-api-key": "dcp_not-a-real-key" },
      { "x-api-key": "" },
      { "X-Tenant-Id": bound.workspaceId },
      { authorization: `Basic ${Buffer.from("a:b").toString("base64")}` },
      { authorization: "Bearer" },
    ];
    for (const headers of cases) {
      const res = await list(headers);
      expect(res.status, JSON.stringify(headers)).toBe(401);
      expect(res.body).toEqual({ detail: expect.any(String) });
    }
  });
});

describe("Authorization: Bearer", () => {
  it("an HS256 token with tenant_id and sub selects that workspace", async () => {
    const token = await sign({ tenant_id: sibling, sub: "dash-user" }, { expires: "5m" });
    const res = await list({ authorization: `Bearer ${token}` });
    expect(res.status).toBe(200);
    expect(computeIds(res.body)).toEqual(["sibling-only"]);
    const same = await list({ authorization: `bearer ${token}`, "X-Tenant-Id": sibling });
    expect(same.status).toBe(200);
  });

  it("a tenant_id in capitals names the same workspace, and writes through it work (a fuzzer found a 500)", async () => {
    const token = await sign({ tenant_id: bound.workspaceId.toUpperCase(), sub: "caps" }, { expires: "5m" });
    const headers = { authorization: `Bearer ${token}` };
    expect(computeIds((await list(headers)).body)).toEqual(["bound-only"]);
    const created = await t.request("POST", "/v2/deployments", {
      headers,
      body: { name: "caps-tenant", source: "internal_container", source_revision_config: { image_uri: "r.example/caps:1" } },
    });
    expect(created.status, created.text).toBe(201);
    const patched = await t.request("PATCH", `/v2/deployments/${created.body.id}`, { headers, body: { source_revision_config: { image_uri: "r.example/caps:2" } } });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.body.latest_revision_id).not.toBe(created.body.latest_revision_id);
  });

  it("a token with X-Tenant-Id of another workspace is 403", async () => {
    const token = await sign({ tenant_id: sibling, sub: "u" }, { expires: "5m" });
    const res = await list({ authorization: `Bearer ${token}`, "X-Tenant-Id": orgWide.workspaceId });
    expect(res.status).toBe(403);
  });

  it("expired, wrongly signed, non-HS256 or claim-less tokens are 401", async () => {
    const now = Math.floor(Date.now() / 1000);
    const tokens = {
      expired: await sign({ tenant_id: bound.workspaceId, sub: "u" }, { expires: now - 60 }),
      "wrong secret": await sign({ tenant_id: bound.workspaceId, sub: "u" }, { secret: "another-secret-of-at-least-32-characters!!" }),
      HS512: await sign({ tenant_id: bound.workspaceId, sub: "u" }, { alg: "HS512" }),
      "no tenant_id": await sign({ sub: "u" }),
      "tenant_id not a uuid": await sign({ tenant_id: "acme", sub: "u" }),
      "unknown workspace": await sign({ tenant_id: randomUUID(), sub: "u" }),
      "no exp (tokens must expire)": await sign({ tenant_id: bound.workspaceId, sub: "u" }),
      // Every such token would be one caller, the owner of one another's OAuth tokens and idempotency keys.
      "no sub (tokens name their user)": await sign({ tenant_id: bound.workspaceId }, { expires: "5m" }),
      garbage: "a.b.c",
    };
    const valid = await sign({ tenant_id: bound.workspaceId, sub: "u" }, { expires: "5m" });
    const [h, p] = valid.split(".");
    const unsigned = `${Buffer.from(JSON.stringify({ alg: "none" })).toString("base64url")}.${p}.`;
    const tampered = `${h}.${Buffer.from(JSON.stringify({ tenant_id: stranger.workspaceId, sub: "u" })).toString("base64url")}.${valid.split(".")[2]}`;
    for (const [what, token] of Object.entries({ ...tokens, unsigned, tampered })) {
      const res = await list({ authorization: `Bearer ${token}` });
      expect(res.status, what).toBe(401);
      expect(res.body, what).toEqual({ detail: expect.any(String) });
    }
    expect((await list({ authorization: `Bearer ${valid}` })).status).toBe(200);
  });

  it("is refused with 401 when the server has no JWT_SECRET", async () => {
    const noJwt = await startTestApp({ JWT_SECRET: undefined });
    try {
      const ws = await noJwt.workspace();
      const token = await sign({ tenant_id: ws.workspaceId, sub: "u" });
      const res = await noJwt.request("GET", "/v2/listeners", { headers: { authorization: `Bearer ${token}` } });
      expect(res.status).toBe(401);
      expect(res.body.detail).toContain("JWT_SECRET");
      expect((await noJwt.request("GET", "/v2/listeners", { key: ws.apiKey })).status).toBe(200);
    } finally {
      await noJwt.close();
    }
  });
});
