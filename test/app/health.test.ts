import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/app.js";

let t: TestApp;

beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  // The last test closes the database itself; stopping twice must not fail the suite.
  await t.close().catch(() => {});
});

describe("health and routing", () => {
  it("GET /healthz answers 200 without credentials", async () => {
    const res = await t.request("GET", "/healthz");
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: "ok" });
  });

  it("GET /readyz answers 200 when the database is reachable and migrated", async () => {
    const res = await t.request("GET", "/readyz");
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: "ready" });
  });

  it("GET /readyz answers 503 while a migration is not recorded as applied", async () => {
    const [last] = await t.app.db.sql.query<{ id: string }>(
      `SELECT id FROM "_prisma_migrations" ORDER BY migration_name DESC LIMIT 1`,
    );
    await t.app.db.sql.query(`UPDATE "_prisma_migrations" SET rolled_back_at = now() WHERE id = $1`, [last!.id]);
    try {
      const res = await t.request("GET", "/readyz");
      expect(res.status).toBe(503);
      expect(res.body).toEqual({ status: "migrations pending" });
    } finally {
      await t.app.db.sql.query(`UPDATE "_prisma_migrations" SET rolled_back_at = NULL WHERE id = $1`, [last!.id]);
    }
    expect((await t.request("GET", "/readyz")).status).toBe(200);
  });

  it("an unknown path is 404 {detail}, with or without credentials", async () => {
    const ws = await t.workspace();
    for (const [method, path, key] of [
      ["GET", "/nope", undefined],
      ["GET", "/v2/nope", ws.apiKey],
      ["POST", "/v3/deployments", ws.apiKey],
      ["GET", "/", undefined],
    ] as const) {
      const res = await t.request(method, path, { key });
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(res.body, `${method} ${path}`).toEqual({ detail: "Not Found" });
    }
  });

  it("a known path with a method it does not take is 405 {detail} with Allow, as the reference (FastAPI) answers", async () => {
    const ws = await t.workspace();
    // The API's paths authenticate first (401 without credentials), as every request under them does.
    for (const [method, path, key, allow] of [
      ["PUT", "/v2/deployments", ws.apiKey, "DELETE, GET, POST"],
      ["PUT", "/v2/listeners/00000000-0000-4000-8000-000000000000", ws.apiKey, "DELETE, GET, PATCH"],
      ["POST", "/healthz", undefined, "GET"],
    ] as const) {
      const res = await t.request(method, path, { key });
      expect(res.status, `${method} ${path}`).toBe(405);
      expect(res.body, `${method} ${path}`).toEqual({ detail: "Method Not Allowed" });
      expect(res.headers.get("allow"), `${method} ${path}`).toBe(allow);
    }
  });

  it("GET /readyz answers 503 once the database is closed, while /healthz still answers 200", async () => {
    await t.app.db.close();
    const res = await t.request("GET", "/readyz");
    expect(res.status).toBe(503);
    expect(res.body).toEqual({ status: expect.any(String) });
    expect((await t.request("GET", "/healthz")).status).toBe(200);
  });
});
