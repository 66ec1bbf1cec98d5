import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../../src/config.js";
import { startTestApp } from "../support/app.js";

/**
 * PIPELINE_LEASE_MS: how long a pipeline step stays claimed by a worker without renewal, and so how
 * soon a crashed process's steps are taken up again by the next one to start.
 */
describe("PIPELINE_LEASE_MS", () => {
  it("defaults to 10 s and takes a number of milliseconds; a value that is not one is refused by name", () => {
    expect(loadConfig({}).pipeline.leaseMs).toBe(10_000);
    expect(loadConfig({ PIPELINE_LEASE_MS: "750" }).pipeline.leaseMs).toBe(750);
    for (const bad of ["0", "-5", "abc", "1.5"]) {
      expect(() => loadConfig({ PIPELINE_LEASE_MS: bad }), bad).toThrow(ConfigError);
      try {
        loadConfig({ PIPELINE_LEASE_MS: bad });
      } catch (err) {
        expect((err as ConfigError).problems.join()).toMatch(/^PIPELINE_LEASE_MS: /);
      }
    }
  });

  it("is the lease the app's pipeline worker claims steps with", async () => {
    const t = await startTestApp({ PIPELINE_LEASE_MS: "750" });
    try {
      expect(t.app.worker!.options.leaseMs).toBe(750);
      const ws = await t.workspace();
      const res = await t.request("POST", "/v2/deployments", { key: ws.apiKey, body: { name: "leased", source: "internal_container" } });
      expect(res.status).toBe(201);
      // A claimed step's lease runs for the setting's length, give or take the claim's own time.
      const leased = await (async () => {
        for (let i = 0; i < 200; i++) {
          const [row] = await t.app.db.sql.query<{ ms: number }>(
            `SELECT extract(epoch FROM (lease_until - now())) * 1000 AS ms FROM revisions WHERE id = $1 AND lease_until IS NOT NULL`,
            [res.body.latest_revision_id],
          );
          if (row) return Number(row.ms);
          await new Promise((r) => setTimeout(r, 5));
        }
        return null;
      })();
      expect(leased).not.toBeNull();
      expect(leased!).toBeGreaterThan(200);
      expect(leased!).toBeLessThanOrEqual(750);
    } finally {
      await t.close();
    }
  });
});
