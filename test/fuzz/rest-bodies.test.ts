import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DatabaseWatch, bodyText, hostileBodies } from "../support/fuzz.js";
import { type Fixtures, startFuzzApp } from "../support/fuzz-fixtures.js";
import { expectRestAnswer } from "../support/fuzz-shapes.js";
import type { TestApp } from "../support/app.js";

/**
 * Malformed and hostile bodies for every REST endpoint that reads one: never a 5xx, always the
 * documented answer, and nothing written when the request is refused.
 */

/** Cases per endpoint; with the other fuzz files the suite runs over 10,000 a run. */
const RUNS = Number(process.env.FUZZ_RUNS ?? 500);

let t: TestApp;
let fx: Fixtures;
let watch: DatabaseWatch;

beforeAll(async () => {
  ({ t, fx } = await startFuzzApp());
  watch = await DatabaseWatch.started(t.app.db.sql);
});
afterAll(() => t.close());

const ENDPOINTS: { method: string; path: (fx: Fixtures) => string; bases: (fx: Fixtures) => object[] }[] = [
  { method: "POST", path: () => "/v2/deployments", bases: (f) => f.bodies.deploymentCreate },
  { method: "PATCH", path: (f) => `/v2/deployments/${f.deploymentId}`, bases: (f) => f.bodies.deploymentUpdate },
  { method: "POST", path: (f) => `/v2/deployments/${f.deploymentId}/revisions`, bases: (f) => f.bodies.revisionCreate },
  { method: "POST", path: () => "/v2/listeners", bases: (f) => f.bodies.listenerCreate },
  { method: "PATCH", path: (f) => `/v2/listeners/${f.listenerId}`, bases: (f) => f.bodies.listenerUpdate },
  { method: "POST", path: (f) => `/v2/auth/agents/${f.agentId}/connections`, bases: (f) => f.bodies.connectionCreate },
  { method: "POST", path: () => "/v2/integrations/forge-codehost/installations", bases: (f) => f.bodies.installationRegister },
];

describe("hostile request bodies", () => {
  it("start from bodies the API accepts", async () => {
    try {
      for (const endpoint of ENDPOINTS) {
        for (const body of endpoint.bases(fx)) {
          const res = await t.request(endpoint.method, endpoint.path(fx), { key: fx.ws.apiKey, body });
          expect(res.status, `${endpoint.method} ${endpoint.path(fx)}: ${res.text}`).toBeLessThan(300);
        }
      }
    } finally {
      await watch.start();
    }
  });

  for (const endpoint of ENDPOINTS) {
    it(`${endpoint.method} ${endpoint.path({ deploymentId: "{id}", listenerId: "{id}", agentId: "{agent_id}" } as Fixtures)}`, async () => {
      const path = endpoint.path(fx);
      const bodies = fc.oneof(...endpoint.bases(fx).map(hostileBodies));
      await fc.assert(
        fc.asyncProperty(bodies, async (body) => {
          const text = bodyText(body);
          const res = await t.request(endpoint.method, path, { key: fx.ws.apiKey, rawBody: text, headers: { "content-type": "application/json" } });
          expectRestAnswer(res);
          await watch.check(res.status >= 400, `${endpoint.method} ${path} ${text.slice(0, 300)} -> ${res.status}`);
        }),
        { numRuns: RUNS },
      );
    });
  }
});
