import fc from "fast-check";
import { SignJWT } from "jose";
import { afterAll, beforeAll, describe, it } from "vitest";
import { TEST_JWT_SECRET, type TestApp } from "../support/app.js";
import { DatabaseWatch, editedBody, fuzzRuns, headerValue, hostileJson, hostileNumber, hostileString, queryString } from "../support/fuzz.js";
import { type Fixtures, startFuzzApp } from "../support/fuzz-fixtures.js";
import { fillPath, NOWHERE, ROUTES } from "../support/fuzz-routes.js";
import { expectGraphQLAnswer, expectRestAnswer } from "../support/fuzz-shapes.js";

/**
 * Hostile headers (credentials of every scheme, tenant ids, content types, Idempotency-Key, ...) and
 * query strings on every REST endpoint and on /graphql, each otherwise a valid request: never a 5xx,
 * always the documented answer, and nothing written when refused.
 */

const RUNS = fuzzRuns(1200);

let t: TestApp;
let fx: Fixtures;
let watch: DatabaseWatch;
let tokens: string[];

const sign = (claims: Record<string, unknown>, options: { secret?: string; expires?: string | number; alg?: string } = {}) =>
  new SignJWT(claims)
    .setProtectedHeader({ alg: options.alg ?? "HS256" })
    .setExpirationTime(options.expires ?? "5m")
    .sign(new TextEncoder().encode(options.secret ?? TEST_JWT_SECRET));

/** Signs claims exactly as given (exp and iat included, or left out). */
const signRaw = (claims: Record<string, unknown>) =>
  new SignJWT(claims).setProtectedHeader({ alg: "HS256" }).sign(new TextEncoder().encode(TEST_JWT_SECRET));

/** Text PostgreSQL refuses (NUL, lone surrogates), and absurd lengths: `sub` is stored as the actor. */
const UNSTORABLE = ["ada\u0000", "\u0000", "ada\ud800", "\udfffx", "a".repeat(256), "b".repeat(20_000)];

/**
 * Claims a signer could put in a token: valid ones (the workspace, a sub, an hour to live) with one to
 * three replaced or removed, a sub that cannot be stored, or anything at all.
 */
function hostileClaims(f: Fixtures): fc.Arbitrary<Record<string, unknown>> {
  const now = Math.floor(Date.now() / 1000);
  const valid = { tenant_id: f.ws.workspaceId, sub: "fuzz", exp: now + 600, iat: now };
  return fc.oneof(
    { weight: 2, arbitrary: fc.constantFrom(...UNSTORABLE).map((sub) => ({ ...valid, sub })) },
    { weight: 3, arbitrary: editedBody(valid) as fc.Arbitrary<Record<string, unknown>> },
    {
      weight: 1,
      arbitrary: fc.record(
        {
          tenant_id: fc.oneof(fc.constant(f.ws.workspaceId), hostileString, hostileNumber),
          sub: fc.oneof(hostileString, hostileNumber, hostileJson(["sub"])),
          exp: fc.oneof(fc.constant(now + 600), hostileNumber, hostileString, fc.constant(now + 10 * 365 * 86_400)),
          iat: fc.oneof(fc.constant(now), hostileNumber),
          nbf: hostileNumber,
        },
        { requiredKeys: [] },
      ),
    },
  );
}

beforeAll(async () => {
  ({ t, fx } = await startFuzzApp());
  const unsigned = (claims: object) => `${Buffer.from('{"alg":"none"}').toString("base64url")}.${Buffer.from(JSON.stringify(claims)).toString("base64url")}.`;
  tokens = [
    await sign({ tenant_id: fx.ws.workspaceId, sub: "fuzz" }),
    await sign({ tenant_id: fx.other.workspaceId, sub: "intruder" }),
    await sign({ tenant_id: fx.ws.workspaceId.toUpperCase() }),
    await sign({ tenant_id: "not-a-uuid", sub: "x" }),
    await sign({ tenant_id: NOWHERE, sub: "ghost" }),
    await sign({ tenant_id: fx.ws.workspaceId, sub: "" }),
    await sign({ tenant_id: fx.ws.workspaceId, sub: 42 }),
    await sign({ tenant_id: [fx.ws.workspaceId] }),
    await sign({ tenant_id: fx.ws.workspaceId }, { expires: Math.floor(Date.now() / 1000) - 60 }),
    await sign({ tenant_id: fx.ws.workspaceId }, { secret: "another-secret-of-at-least-32-characters!" }),
    await sign({ tenant_id: fx.ws.workspaceId }, { alg: "HS512" }),
    unsigned({ tenant_id: fx.ws.workspaceId, sub: "forged" }),
    "a.b.c",
    "..",
  ];
  watch = await DatabaseWatch.started(t.app.db.sql);
});
afterAll(() => t.close());

function headers() {
  const id = (w: { workspaceId: string }) => [w.workspaceId, w.workspaceId.toUpperCase()];
  return fc.record(
    {
      "x-api-key": fc.oneof(
        fc.constantFrom(fx.ws.apiKey, fx.orgWide.apiKey, fx.other.apiKey, `${fx.ws.apiKey}x`, fx.ws.apiKey.toUpperCase(), ` ${fx.ws.apiKey}`),
        headerValue,
      ),
      "x-tenant-id": fc.oneof(fc.constantFrom(...id(fx.ws), ...id(fx.orgWide), ...id(fx.other), NOWHERE, ""), headerValue),
      authorization: fc.oneof(
        fc.constantFrom(...tokens).map((token) => `Bearer ${token}`),
        fc.constantFrom(...tokens).map((token) => `bearer  ${token}`),
        headerValue.map((v) => `Bearer ${v}`),
        fc.constantFrom("Bearer", "Bearer ", "Basic Zm9vOmJhcg==", "Token x", ""),
        headerValue,
      ),
      "content-type": fc.oneof(
        fc.constantFrom("application/json", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/json; charset=utf-16", "application/graphql"),
        headerValue,
      ),
      "idempotency-key": fc.oneof(fc.nat({ max: 20 }).map((n) => `key-${n}`), headerValue),
      accept: fc.oneof(fc.constantFrom("application/json", "text/event-stream", "application/graphql-response+json", "*/*", "text/html"), headerValue),
      "content-encoding": fc.constantFrom("gzip", "br", "identity"),
      "x-http-method-override": fc.constantFrom("DELETE", "PUT"),
    },
    { requiredKeys: [] },
  );
}

const GRAPHQL = { method: "POST", template: "/graphql" } as const;

/** Every query parameter name any endpoint reads, and some none does; hostile values. */
const QUERY_NAMES = ["limit", "offset", "name", "name_contains", "status", "deployment_ids", "page_size", "cursor", "query", "variables", "operationName", "extensions", "__proto__"];
const hostileQuery = fc.option(queryString(Object.fromEntries(QUERY_NAMES.map((n) => [n, hostileString]))), { nil: undefined });

describe("correctly signed bearer tokens with hostile claims", () => {
  it(`on every REST endpoint and /graphql (${ROUTES.length + 1} routes): refused as input, never a 5xx`, async () => {
    const routes = [...ROUTES, GRAPHQL];
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...routes), hostileClaims(fx), async (route, claims) => {
        const graphql = route === GRAPHQL;
        const bulk = route.method === "DELETE" && route.template === "/v2/deployments";
        const path = (graphql ? "/graphql" : fillPath(fx, route)) + (bulk ? `?deployment_ids=${NOWHERE}` : "");
        // The GraphQL mutation that stores the actor, as POST …/connections does.
        const body = graphql ? { query: `mutation { agentConnectionCreate(agentId: "jwt", input: { oauthTokenId: "github:jwt" }) { agentConnection { id } userErrors { field message code } } }` } : "body" in route ? route.body?.(fx) : undefined;
        const headers = { authorization: `Bearer ${await signRaw(claims)}`, "content-type": "application/json" };
        const res = await t.request(route.method, path, { rawBody: body === undefined ? undefined : JSON.stringify(body), headers });
        const refused = graphql ? expectGraphQLAnswer(res, ["agentConnectionCreate"]) || res.status >= 400 : (expectRestAnswer(res), res.status >= 400);
        await watch.check(refused, `${route.method} ${path} ${JSON.stringify(claims).slice(0, 200)} -> ${res.status} ${res.text.slice(0, 200)}`);
      }),
      { numRuns: Math.ceil(RUNS / 3) },
    );
  });
});

describe("hostile headers and query strings", () => {
  it(`with hostile query strings, on every REST endpoint and /graphql (${ROUTES.length + 1} routes)`, async () => {
    const routes = [...ROUTES, GRAPHQL];
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...routes), headers(), hostileQuery, async (route, sent, query) => {
        const graphql = route === GRAPHQL;
        const bulk = route.method === "DELETE" && route.template === "/v2/deployments";
        const params = [...(bulk ? [`deployment_ids=${NOWHERE}`] : []), ...(query ? [query] : [])];
        const path = (graphql ? "/graphql" : fillPath(fx, route)) + (params.length > 0 ? `?${params.join("&")}` : "");
        const body = graphql ? { query: "{ viewer { uuid } }" } : "body" in route ? route.body?.(fx) : undefined;
        const res = await t.request(route.method, path, { rawBody: body === undefined ? undefined : JSON.stringify(body), headers: sent });
        const refused = graphql ? expectGraphQLAnswer(res) || res.status >= 400 : (expectRestAnswer(res), res.status >= 400);
        const what = `${route.method} ${path} ${JSON.stringify(sent)} -> ${res.status} ${res.text.slice(0, 200)}`;
        await watch.check(refused, what, "idempotency-key" in sent ? ["idempotency_keys"] : []);
      }),
      { numRuns: RUNS },
    );
  });
});
