import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { gzipSync } from "node:zlib";
import type { TestApp } from "../support/app.js";
import { DatabaseWatch, fuzzRuns, headerValue, hostileString, queryString } from "../support/fuzz.js";
import { type Fixtures, startFuzzApp } from "../support/fuzz-fixtures.js";
import { expectRestAnswer } from "../support/fuzz-shapes.js";

/**
 * The two routes outside the API's authentication: PUT <upload_url> (its signature is the
 * credential) and GET /registry/token (a push token in Basic). Hostile signatures, expiries, types,
 * length headers and bodies; hostile credentials, services and scopes: never a 5xx, always the
 * documented answer, and nothing written when refused.
 */

const RUNS = fuzzRuns(300);

let t: TestApp;
let fx: Fixtures;
let watch: DatabaseWatch;
let url: URL;
let pushToken: string;

beforeAll(async () => {
  ({ t, fx } = await startFuzzApp());
  const issued = (await t.request("POST", `/v2/deployments/${fx.deploymentId}/upload-url`, { key: fx.ws.apiKey })).body;
  url = new URL(issued.upload_url);
  t.guard.issued(url.searchParams.get("signature")!);
  pushToken = (await t.request("POST", `/v2/deployments/${fx.deploymentId}/push-token`, { key: fx.ws.apiKey })).body.token;
  t.guard.issued(pushToken);
  watch = await DatabaseWatch.started(t.app.db.sql);
});
afterAll(() => t.close());

const gzipped = gzipSync(Buffer.from("not a tar, but gzip"));

describe("PUT <upload_url>", () => {
  it("answers hostile uploads as documented, storing nothing when refused", async () => {
    const signature = url.searchParams.get("signature")!;
    const expires = url.searchParams.get("expires")!;
    const query = fc.oneof(
      { weight: 3, arbitrary: fc.constant(url.search.slice(1)) },
      { weight: 2, arbitrary: queryString({ expires: fc.constantFrom(expires, String(Number(expires) + 1), "0", "-1", "9".repeat(30), ""), signature: fc.constantFrom(signature, signature.toUpperCase(), signature.slice(1), `${signature}0`, "") }) },
    );
    const body = fc.oneof(
      fc.constant(gzipped),
      fc.uint8Array({ maxLength: 64 }).map((b) => Buffer.from(b)),
      fc.uint8Array({ maxLength: 64 }).map((b) => Buffer.concat([Buffer.from([0x1f, 0x8b]), Buffer.from(b)])),
      fc.constant(null),
    );
    const headers = fc.record(
      {
        "content-type": fc.oneof(fc.constantFrom("application/gzip", "application/x-gzip; charset=x", "application/json", "text/plain", ""), headerValue),
        "x-goog-content-length-range": fc.oneof(fc.constantFrom("0,209715200", "0,1", "100,10", "5,", "a,b", "0,99999999999999999"), headerValue),
      },
      { requiredKeys: [] },
    );
    const path = fc.constantFrom(url.pathname, url.pathname.replace(/\.tar\.gz$/, ".tgz"), `/uploads/${fx.deploymentId}/..%2F..%2Fetc%2Fpasswd`, `/uploads/${fx.deploymentId}/`);
    await fc.assert(
      fc.asyncProperty(path, query, headers, body, async (p, q, h, b) => {
        const res = await t.app.fetch(new Request(`http://test${p}?${q}`, { method: "PUT", headers: h, body: b }));
        const text = await res.text();
        let parsed: unknown = null;
        try {
          parsed = text ? JSON.parse(text) : null;
        } catch {
          parsed = text;
        }
        expectRestAnswer({ status: res.status, body: parsed, headers: res.headers, text });
        await watch.check(res.status >= 400, `PUT ${p}?${q} ${JSON.stringify(h)} -> ${res.status} ${text.slice(0, 200)}`);
      }),
      { numRuns: RUNS },
    );
  });
});

describe("GET /registry/token", () => {
  it("answers hostile credentials, services and scopes as documented, writing nothing", async () => {
    const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString("base64")}`;
    const authorization = fc.oneof(
      fc.constantFrom(basic("oauth2accesstoken", pushToken), basic("oauth2accesstoken", `${pushToken}x`), basic("admin", pushToken), basic("oauth2accesstoken", ""), "Basic", "Basic ===", `Bearer ${pushToken}`),
      fc.tuple(hostileString, hostileString).map(([u, p]) => basic(u, p)),
      headerValue,
    );
    const repository = `${fx.ws.workspaceId}/${fx.deploymentId}/agent`;
    const scope = fc.oneof(
      fc.constantFrom(`repository:${repository}:push,pull`, `repository:${repository}:*`, "repository:other/x:pull", "registry:catalog:*", "repository::pull", "repository:a", ":::", `repository:${repository}:push repository:x:pull`),
      hostileString,
    );
    const query = queryString({ service: fc.constantFrom("127.0.0.1:9", "other", ""), scope, account: fc.constantFrom("oauth2accesstoken", "") });
    await fc.assert(
      fc.asyncProperty(fc.option(authorization, { nil: undefined }), fc.option(query, { nil: undefined }), async (auth, q) => {
        const res = await t.request("GET", `/registry/token${q ? `?${q}` : ""}`, { headers: auth === undefined ? {} : { authorization: auth } });
        expectRestAnswer(res);
        expect([200, 400, 401]).toContain(res.status);
        await watch.check(true, `GET /registry/token?${q} -> ${res.status}`);
      }),
      { numRuns: RUNS },
    );
  });
});
