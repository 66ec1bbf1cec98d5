import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REVISION_STATUSES } from "../../src/core/revision-machine.js";
import { DatabaseWatch, encodeHostile, fuzzRuns, hostileString, queryString } from "../support/fuzz.js";
import { type Fixtures, startFuzzApp } from "../support/fuzz-fixtures.js";
import { fillPath, paramsOf, type Route, ROUTES } from "../support/fuzz-routes.js";
import { expectRestAnswer } from "../support/fuzz-shapes.js";
import type { TestApp } from "../support/app.js";

/**
 * Hostile path ids for every REST endpoint that has one, and hostile query strings for every listing
 * (and the bulk delete): never a 5xx, always the documented answer, nothing written when refused.
 */

const PATH_RUNS = fuzzRuns(100);
const QUERY_RUNS = fuzzRuns(200);

let t: TestApp;
let fx: Fixtures;
let watch: DatabaseWatch;
/** A real next_cursor of the installations listing, to tamper with. */
let cursor: string;

beforeAll(async () => {
  ({ t, fx } = await startFuzzApp());
  await t.request("POST", "/v2/integrations/forge-codehost/installations", { key: fx.ws.apiKey, body: { installation_id: 99, name: "second" } });
  const page = await t.request("GET", "/v2/integrations/forge-codehost/installations?page_size=1", { key: fx.ws.apiKey });
  cursor = page.body.next_cursor;
  expect(cursor).toEqual(expect.any(String));
  watch = await DatabaseWatch.started(t.app.db.sql);
});
afterAll(() => t.close());

async function send(method: string, path: string, body?: object) {
  const res = await t.request(method, path, { key: fx.ws.apiKey, body });
  expectRestAnswer(res);
  await watch.check(res.status >= 400, `${method} ${path} -> ${res.status} ${res.text.slice(0, 200)}`);
  return res;
}

/** Ids that are almost right: another kind's, another workspace's, written differently, cut short. */
function nearMisses(route: Route): string[] {
  const ids = [fx.revisionId, fx.installationId, fx.ws.workspaceId, fx.other.workspaceId];
  // A DELETE must not reach a fixture: only ids of kinds it cannot delete.
  if (route.method !== "DELETE") ids.push(fx.deploymentId, fx.listenerId, fx.connectionId, fx.deploymentId.toUpperCase());
  return ids.flatMap((id) => [id, `{${id}}`, id.replace(/-/g, ""), `${id}0`, id.slice(0, -1), ` ${id}`, `${id}%00`]);
}

function hostileParam(route: Route): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 4, arbitrary: hostileString.map(encodeHostile) },
    { weight: 1, arbitrary: hostileString.filter((s) => !/^[./\\]*$/.test(s)) },
    { weight: 2, arbitrary: fc.constantFrom(...nearMisses(route)) },
    { weight: 1, arbitrary: fc.uuid() },
    { weight: 1, arbitrary: fc.constantFrom("%", "%2F", "%00", "%C0%AE", "%ED%A0%80", "%FF", "%25", "%u0041", "a%2Fb") },
  );
}

describe("hostile path ids", () => {
  for (const route of ROUTES.filter((r) => paramsOf(r.template).length > 0)) {
    it(`${route.method} ${route.template}`, async () => {
      const names = paramsOf(route.template);
      const cases = fc.tuple(fc.constantFrom(...names), hostileParam(route));
      await fc.assert(
        fc.asyncProperty(cases, async ([name, value]) => {
          await send(route.method, fillPath(fx, route, { [name]: value }), route.body?.(fx));
        }),
        { numRuns: PATH_RUNS },
      );
    });
  }
});

const numbers = ["0", "1", "20", "100", "101", "-1", "1.5", "1e2", " 5", "0x10", "9".repeat(30), "", "NaN", "Infinity"];
const bools = ["true", "false", "TRUE", "1", "0", "yes", "off", "maybe", "", "2"];
const uuids = (f: Fixtures) => [f.revisionId, f.listenerId, "not-a-uuid", "", " ", ","];
const idLists = (f: Fixtures) =>
  fc.oneof(
    fc.array(fc.oneof(fc.uuid(), fc.constantFrom(...uuids(f)), hostileString), { maxLength: 5 }).map((ids) => ids.join(",")),
    fc.integer({ min: 99, max: 102 }).map((n) => Array.from({ length: n }, (_, i) => `00000000-0000-4000-8000-${String(i).padStart(12, "0")}`).join(",")),
  );

interface Listing {
  method: string;
  path: (f: Fixtures) => string;
  params: (f: Fixtures) => Record<string, fc.Arbitrary<string>>;
}

const LISTINGS: Listing[] = [
  {
    method: "GET",
    path: () => "/v2/deployments",
    params: (f) => ({
      limit: fc.constantFrom(...numbers), offset: fc.constantFrom(...numbers), name: fc.constantFrom("fuzz-target", "%", "_"),
      name_contains: fc.constantFrom("fuzz", "%", "_", "\\", "'"), status: fc.constantFrom("READY", "AWAITING_DATABASE", "ready", "DEPLOYED"),
      remote_reconciled: fc.constantFrom(...bools), tag_value_ids: idLists(f), image_version: fc.constantFrom("0.4.0", "x"),
      deployment_type: fc.constantFrom("dev", "prod", "DEV", "dev_free_zero"), deployment_ids: idLists(f),
      url: fc.constantFrom("https://x", ""), agent_id: fc.constantFrom("fuzz-agent", "A", "-a", "a".repeat(64)),
      agent_environment: fc.constantFrom("production", "prod", "local"),
    }),
  },
  { method: "DELETE", path: () => "/v2/deployments", params: (f) => ({ deployment_ids: idLists(f) }) },
  {
    method: "GET",
    path: (f) => `/v2/deployments/${f.deploymentId}/revisions`,
    params: () => ({
      limit: fc.constantFrom(...numbers), offset: fc.constantFrom(...numbers), remote_reconciled: fc.constantFrom(...bools),
      status: fc.array(fc.constantFrom(...REVISION_STATUSES, "deployed", "NOPE", ""), { maxLength: 20 }).map((s) => s.join(",")),
    }),
  },
  { method: "GET", path: () => "/v2/listeners", params: () => ({ limit: fc.constantFrom(...numbers), offset: fc.constantFrom(...numbers) }) },
  {
    method: "GET",
    path: () => "/v2/integrations/forge-codehost/installations",
    params: () => ({
      page_size: fc.constantFrom(...numbers),
      cursor: fc.constantFrom(cursor, `${cursor}x`, cursor.slice(1), cursor.replace(".", ".."), cursor.split(".")[0]!, `x.${cursor.split(".")[1]}`, cursor.toUpperCase()),
    }),
  },
];

describe("hostile query strings", () => {
  for (const listing of LISTINGS) {
    it(`${listing.method} ${listing.path({ deploymentId: "{deployment_id}" } as Fixtures)}`, async () => {
      const path = listing.path(fx);
      await fc.assert(
        fc.asyncProperty(queryString(listing.params(fx)), async (query) => {
          await send(listing.method, `${path}?${query}`);
        }),
        { numRuns: QUERY_RUNS },
      );
    });
  }
});
