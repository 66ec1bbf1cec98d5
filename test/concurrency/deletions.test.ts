import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, type TestApp } from "../support/app.js";

/**
 * Deletions of the same deployments at once (found by a probe on PostgreSQL): bulk DELETEs of
 * overlapping sets in different orders deadlocked (500, deployments left half deleted), and every
 * concurrent DELETE of one deployment answered 204, as if each had deleted it. Each deployment is
 * deleted by exactly one request; the others find it gone.
 */

let t: TestApp;
let ws: NewWorkspace;

beforeAll(async () => {
  // With the pipeline on, as the probe ran: its steps take the deployments' locks too.
  t = await startTestApp({ PIPELINE_STEP_MS: "20" });
  ws = await t.workspace();
});
afterAll(() => t.close());

let counter = 0;
async function deployments(n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const res = await t.request("POST", "/v2/deployments", {
      key: ws.apiKey,
      body: { name: `del-${++counter}`, source: "internal_container", source_revision_config: { image_uri: "r.example/a:1" } },
    });
    expect(res.status, res.text).toBe(201);
    ids.push(res.body.id);
  }
  return ids;
}

const shuffled = <T>(items: T[], seed: number) => items.map((v, i) => ({ v, k: (i * 7919 + seed * 104729) % 997 })).sort((a, b) => a.k - b.k).map(({ v }) => v);
const bulk = (ids: string[]) => t.request("DELETE", `/v2/deployments?${ids.map((id) => `deployment_ids=${id}`).join("&")}`, { key: ws.apiKey });

describe("deleting the same deployments at once", () => {
  it("gives each deployment of overlapping bulk DELETEs, in any order, to one of them", async () => {
    for (let round = 0; round < 10; round++) {
      const ids = await deployments(8);
      const sets = [shuffled(ids, round), shuffled(ids.slice(0, 6), round + 1), shuffled(ids.slice(2), round + 2)];
      const answers = await Promise.all(sets.map(bulk));
      const deleted: string[] = [];
      for (const [i, res] of answers.entries()) {
        expect([200, 207, 404], `round ${round}, set ${i}: ${res.status} ${res.text}`).toContain(res.status);
        if (res.status === 404) continue;
        deleted.push(...res.body.deleted_ids);
        // What another request deleted is missing here.
        expect([...res.body.deleted_ids, ...res.body.missing_ids].sort()).toEqual([...sets[i]!].sort());
      }
      expect(deleted.sort()).toEqual([...ids].sort());
      const left = await t.request("GET", "/v2/deployments?limit=100", { key: ws.apiKey });
      expect(left.body.resources.filter((d: { id: string }) => ids.includes(d.id))).toEqual([]);
    }
  }, 120_000);

  it("answers 204 to one DELETE of a deployment and 404 to the others", async () => {
    for (let round = 0; round < 3; round++) {
      const [id] = await deployments(1);
      const answers = await Promise.all(Array.from({ length: 4 }, () => t.request("DELETE", `/v2/deployments/${id}`, { key: ws.apiKey })));
      expect(answers.map((r) => r.status).sort()).toEqual([204, 404, 404, 404]);
    }
  }, 60_000);
});
