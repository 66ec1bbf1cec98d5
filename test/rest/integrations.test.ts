import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, type TestApp } from "../support/app.js";

let t: TestApp;
let ws: NewWorkspace;

beforeAll(async () => {
  t = await startTestApp();
  ws = await t.workspace();
});
afterAll(() => t.close());

const FORGE = "/v2/integrations/forge-codehost/installations";
const V1 = "/v1/integrations/codehost/install";

const register = (key: string, body: unknown) => t.request("POST", FORGE, { key, body });

/** Seeds installations straight into the database with chosen timestamps, several sharing one. */
async function seed(workspaceId: string, count: number): Promise<string[]> {
  const base = Date.UTC(2026, 0, 1);
  const rows = Array.from({ length: count }, (_, n) => ({
    id: randomUUID(),
    workspaceId,
    installationId: 1000 + n,
    name: `acct-${n}`,
    // Groups of three share a millisecond, so the id decides their order.
    createdAt: new Date(base + Math.floor(n / 3) * 1000),
  }));
  await t.app.db.prisma.codehostInstallation.createMany({ data: rows });
  return rows
    .sort((a, b) => b.createdAt.getTime() - a.createdAt.getTime() || (a.id < b.id ? 1 : -1))
    .map((r) => r.id);
}

async function walk(key: string, pageSize: number): Promise<{ ids: string[]; pages: number[] }> {
  const ids: string[] = [];
  const pages: number[] = [];
  let cursor: string | null = null;
  do {
    const query: string = `page_size=${pageSize}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`;
    const res = await t.request("GET", `${FORGE}?${query}`, { key });
    expect(res.status).toBe(200);
    ids.push(...res.body.items.map((i: { id: string }) => i.id));
    pages.push(res.body.items.length);
    cursor = res.body.next_cursor;
  } while (cursor !== null);
  return { ids, pages };
}

describe("code-hosting installations", () => {
  it("registers an installation and lists it in both shapes", async () => {
    const created = await register(ws.apiKey, {
      installation_id: 4242,
      name: "acme",
      repository_selection: "selected",
      settings_url: "https://forge.example.com/organizations/acme/settings/installations/4242",
      tracked_packages: ["ignored"],
    });
    expect(created.status).toBe(201);
    expect(created.body).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      installation_id: 4242,
      name: "acme",
      repository_selection: "selected",
      settings_url: "https://forge.example.com/organizations/acme/settings/installations/4242",
    });

    const minimal = await register(ws.apiKey, { installation_id: 7, name: "solo", repository_selection: null });
    expect(minimal.status).toBe(201);
    expect(minimal.body).toMatchObject({ installation_id: 7, repository_selection: null, settings_url: null });

    const v2 = await t.request("GET", FORGE, { key: ws.apiKey });
    expect(v2.status).toBe(200);
    expect(v2.body).toEqual({ items: [minimal.body, created.body], next_cursor: null });

    const v1 = await t.request("GET", V1, { key: ws.apiKey });
    expect(v1.status).toBe(200);
    expect(v1.body).toEqual([
      { id: minimal.body.id, installation_id: 7, name: "solo" },
      { id: created.body.id, installation_id: 4242, name: "acme" },
    ]);
  });

  it("refuses an installation_id already registered in the workspace with 409, and allows it in another", async () => {
    const mine = await t.workspace();
    expect((await register(mine.apiKey, { installation_id: 99, name: "a" })).status).toBe(201);
    const again = await register(mine.apiKey, { installation_id: 99, name: "b" });
    expect(again.status).toBe(409);
    expect(again.body).toEqual({ detail: expect.stringContaining("99") });
    const other = await t.workspace();
    expect((await register(other.apiKey, { installation_id: 99, name: "a" })).status).toBe(201);
    const list = await t.request("GET", V1, { key: mine.apiKey });
    expect(list.body).toEqual([expect.objectContaining({ installation_id: 99, name: "a" })]);
  });

  it("reports every problem of a registration at once and creates nothing", async () => {
    const mine = await t.workspace();
    const res = await register(mine.apiKey, {
      installation_id: 0,
      repository_selection: "some",
      settings_url: "http://forge.example.com/settings",
    });
    expect(res.status).toBe(422);
    expect(res.body.detail).toEqual([
      expect.objectContaining({ loc: ["body", "installation_id"], type: "greater_than_equal", input: 0 }),
      expect.objectContaining({ loc: ["body", "name"], type: "missing", msg: "Field required" }),
      expect.objectContaining({ loc: ["body", "repository_selection"], type: "enum", input: "some" }),
      expect.objectContaining({ loc: ["body", "settings_url"], type: "value_error", input: "http://forge.example.com/settings" }),
    ]);
    for (const [field, value, type] of [
      ["installation_id", 1.5, "int_parsing"],
      ["installation_id", "12", "float_parsing"],
      ["installation_id", 2 ** 31, "less_than_equal"],
      ["name", "", "string_too_short"],
      ["settings_url", "javascript:alert(1)", "value_error"],
      // PostgreSQL text cannot hold NUL: a 422, not a 500 from the database.
      ["name", "a\u0000b", "value_error"],
    ] as const) {
      const bad = await register(mine.apiKey, { installation_id: 5, name: "x", [field]: value });
      expect(bad.status, `${field}=${value}`).toBe(422);
      expect(bad.body.detail).toEqual([expect.objectContaining({ loc: ["body", field], type })]);
    }
    const missing = await t.request("POST", FORGE, { key: mine.apiKey });
    expect(missing.status).toBe(422);
    expect(missing.body.detail).toEqual([expect.objectContaining({ loc: ["body"], type: "missing" })]);
    const json = await t.request("POST", FORGE, { key: mine.apiKey, rawBody: "{" });
    expect(json.status).toBe(422);
    expect(json.body.detail[0]).toMatchObject({ type: "json_invalid" });
    expect((await t.request("GET", V1, { key: mine.apiKey })).body).toEqual([]);
  });

  it("pages newest first with opaque cursors; next_cursor is set exactly when a next page exists", async () => {
    const mine = await t.workspace();
    const expected = await seed(mine.workspaceId, 25);

    const first = await t.request("GET", FORGE, { key: mine.apiKey });
    expect(first.body.items).toHaveLength(20);
    expect(first.body.next_cursor).toEqual(expect.any(String));

    for (const size of [1, 2, 5, 7, 24, 25, 100]) {
      const { ids, pages } = await walk(mine.apiKey, size);
      expect(ids, `page_size=${size}`).toEqual(expected);
      // No empty trailing page: the last page is the one that said next_cursor null.
      expect(pages.every((n) => n > 0), `page_size=${size}`).toBe(true);
      expect(pages.length).toBe(Math.ceil(25 / size));
    }
    const v1 = await t.request("GET", V1, { key: mine.apiKey });
    expect(v1.body.map((i: { id: string }) => i.id)).toEqual(expected);

    const empty = await t.workspace();
    const none = await t.request("GET", FORGE, { key: empty.apiKey });
    expect(none.body).toEqual({ items: [], next_cursor: null });
  });

  it("keeps pages stable while installations are added between requests", async () => {
    const mine = await t.workspace();
    const expected = await seed(mine.workspaceId, 6);
    const page1 = await t.request("GET", `${FORGE}?page_size=3`, { key: mine.apiKey });
    // Newer rows (created now) and one tied with the cursor's own timestamp arrive between pages.
    await register(mine.apiKey, { installation_id: 1, name: "late" });
    await t.app.db.prisma.codehostInstallation.create({
      data: { workspaceId: mine.workspaceId, installationId: 2, name: "tied", createdAt: new Date(Date.UTC(2026, 0, 1, 0, 0, 1)), id: "ffffffff-ffff-4fff-bfff-ffffffffffff" },
    });
    const page2 = await t.request("GET", `${FORGE}?page_size=3&cursor=${page1.body.next_cursor}`, { key: mine.apiKey });
    const ids = [...page1.body.items, ...page2.body.items].map((i: { id: string }) => i.id);
    expect(ids).toEqual(expected);
    expect(page2.body.next_cursor).toBeNull();
  });

  it("refuses garbage, edited, forged and other-purpose cursors with 422 at query.cursor", async () => {
    const mine = await t.workspace();
    await seed(mine.workspaceId, 3);
    const page = await t.request("GET", `${FORGE}?page_size=1`, { key: mine.apiKey });
    const cursor: string = page.body.next_cursor;
    const [body, mac] = cursor.split(".") as [string, string];
    const decoded = JSON.parse(Buffer.from(body, "base64url").toString());
    const edited = Buffer.from(JSON.stringify({ ...decoded, t: "2030-01-01T00:00:00.000Z" })).toString("base64url");
    const otherPurpose = t.app.deps.cursors.encode("listeners", { createdAt: new Date(), id: randomUUID() });
    for (const bad of [
      "garbage",
      `${edited}.${mac}`,
      `${body}.${mac.slice(0, -1)}${mac.endsWith("A") ? "B" : "A"}`,
      `${body}.AAAAAAAAAAAAAAAAAAAAAA`,
      `${cursor}.${mac}`,
      otherPurpose,
    ]) {
      const res = await t.request("GET", `${FORGE}?cursor=${encodeURIComponent(bad)}`, { key: mine.apiKey });
      expect(res.status, bad).toBe(422);
      expect(res.body.detail).toEqual([
        { loc: ["query", "cursor"], type: "value_error", msg: expect.stringContaining("cursor"), input: bad },
      ]);
    }
  });

  it("validates page_size", async () => {
    for (const bad of ["0", "101", "abc", "2.5", "-1"]) {
      const res = await t.request("GET", `${FORGE}?page_size=${bad}`, { key: ws.apiKey });
      expect(res.status, bad).toBe(422);
      expect(res.body.detail).toEqual([expect.objectContaining({ loc: ["query", "page_size"] })]);
    }
    const both = await t.request("GET", `${FORGE}?page_size=0&cursor=x`, { key: ws.apiKey });
    expect(both.status).toBe(422);
  });

  it("shows a workspace only its own installations, and answers 401 without credentials", async () => {
    const a = await t.workspace();
    const b = await t.workspace();
    await register(a.apiKey, { installation_id: 31337, name: "secret-org" });
    expect((await t.request("GET", FORGE, { key: b.apiKey })).body).toEqual({ items: [], next_cursor: null });
    expect((await t.request("GET", V1, { key: b.apiKey })).body).toEqual([]);
    // A cursor from a's listing reveals nothing of a's rows in b's.
    await seed(a.workspaceId, 3);
    const aPage = await t.request("GET", `${FORGE}?page_size=1`, { key: a.apiKey });
    const bPage = await t.request("GET", `${FORGE}?cursor=${aPage.body.next_cursor}`, { key: b.apiKey });
    expect(bPage.body).toEqual({ items: [], next_cursor: null });

    for (const [method, path] of [["GET", FORGE], ["POST", FORGE], ["GET", V1]] as const) {
      const res = await t.request(method, path, { body: method === "POST" ? { installation_id: 1, name: "x" } : undefined });
      expect(res.status, `${method} ${path}`).toBe(401);
      expect(res.body).toEqual({ detail: expect.any(String) });
    }
  });
});
