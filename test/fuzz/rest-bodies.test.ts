import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bodyText, DatabaseWatch, fuzzRuns, hostileBodies } from "../support/fuzz.js";
import { type Fixtures, startFuzzApp } from "../support/fuzz-fixtures.js";
import { expectRestAnswer } from "../support/fuzz-shapes.js";
import type { TestApp } from "../support/app.js";

/**
 * Malformed and hostile bodies for every REST endpoint that reads one: never a 5xx, always the
 * documented answer, and nothing written when the request is refused. The bodies carry the
 * fixtures' secret, whole bodies among them sent in a list, as a JSON string or nested: the app's
 * leak guard fails the file should any answer, log line or row (a stored idempotent answer) hold it.
 */

/** Cases per endpoint; with the other fuzz files the suite runs over 10,000 a run. */
const RUNS = fuzzRuns(500);
/** Some 20 s alone; a machine busy with other suites makes it several times that. */
const FUZZ_TIMEOUT_MS = 180_000;

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
  { method: "POST", path: (f) => `/v1/projects/${f.deploymentId}/revisions/${f.revisionId}/build_logs`, bases: (f) => f.bodies.logQuery },
  { method: "POST", path: (f) => `/v1/projects/${f.deploymentId}/deploy_logs`, bases: (f) => f.bodies.logQuery },
  { method: "PUT", path: (f) => `/v2/integrations/forge-codehost/installations/${f.installationId}/repositories`, bases: (f) => f.bodies.repositoriesSet },
  { method: "POST", path: () => "/v2/auth/providers", bases: (f) => f.bodies.providerCreate },
  { method: "PATCH", path: (f) => `/v2/auth/providers/${f.providerId}`, bases: (f) => f.bodies.providerUpdate },
  { method: "POST", path: () => "/v2/auth/providers/mcp-discover", bases: (f) => f.bodies.mcpDiscover },
  { method: "POST", path: () => "/v2/auth/authenticate", bases: (f) => f.bodies.authenticate },
  { method: "POST", path: (f) => `/v2/auth/callback/${f.providerId}`, bases: (f) => f.bodies.finalize },
  { method: "PATCH", path: (f) => `/v2/auth/tokens/${f.tokenId}/metadata`, bases: (f) => f.bodies.tokenUpdate },
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
    it(`${endpoint.method} ${endpoint.path({ deploymentId: "{id}", listenerId: "{id}", agentId: "{agent_id}", revisionId: "{revision_id}", installationId: "{id}", providerId: "{provider_id}", tokenId: "{token_id}" } as Fixtures)}`, async () => {
      const path = endpoint.path(fx);
      const bodies = fc.oneof(...endpoint.bases(fx).map(hostileBodies));
      // Where a body carries secrets, some with an Idempotency-Key: the answer is stored, and must hold
      // no secret either.
      const carriesSecrets = endpoint.method === "POST" && endpoint.bases(fx).some((b) => "secrets" in b);
      const keys = carriesSecrets ? fc.option(fc.nat({ max: 1_000_000 }).map((n) => `fuzz-${n}`), { freq: 6, nil: undefined }) : fc.constant(undefined);
      await fc.assert(
        fc.asyncProperty(bodies, keys, async (body, key) => {
          const text = bodyText(body);
          const headers = { "content-type": "application/json", ...(key && { "idempotency-key": key }) };
          const res = await t.request(endpoint.method, path, { key: fx.ws.apiKey, rawBody: text, headers });
          expectRestAnswer(res);
          await watch.check(res.status >= 400, `${endpoint.method} ${path} ${text.slice(0, 300)} -> ${res.status}`, key ? ["idempotency_keys"] : []);
        }),
        { numRuns: RUNS },
      );
    }, FUZZ_TIMEOUT_MS);
  }
});
