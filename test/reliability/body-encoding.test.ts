import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { DEPLOYMENT_CREATE } from "../graphql/support.js";

/**
 * Bodies that are not UTF-8 are refused, on REST and on /graphql, and change nothing. Decoded
 * leniently, each bad byte became U+FFFD: a secret sent in Latin-1 was stored altered, and two
 * different bodies under one Idempotency-Key read as the same one (the second got the first's answer).
 */

let t: TestApp;
let ws: NewWorkspace;

beforeAll(async () => {
  t = await startTestApp({ PIPELINE_WORKER: "off" });
  ws = await t.workspace();
});
afterAll(() => t.close());

/** A JSON body's bytes: its text in UTF-8, each `@` replaced by the byte 0xE4 (ä in Latin-1, not UTF-8). */
const latin1 = (json: string) => Uint8Array.from(Buffer.from(json, "utf8").map((b) => (b === 0x40 ? 0xe4 : b)));

const names = async () =>
  ((await t.request("GET", "/v2/deployments?limit=100", { key: ws.apiKey })).body.resources as { name: string }[]).map((d) => d.name);

const post = (body: string | Uint8Array<ArrayBuffer>, headers: Record<string, string> = {}) =>
  t.request("POST", "/v2/deployments", { key: ws.apiKey, rawBody: body, headers: { "content-type": "application/json", ...headers } });

const INVALID_UTF8 = { type: "json_invalid", loc: ["body"], msg: "JSON decode error", input: {}, ctx: { error: "Invalid UTF-8" } };

describe("a REST body that is not UTF-8", () => {
  it("is a 422 json_invalid, and creates nothing, secrets included", async () => {
    const before = await names();
    const name = await post(latin1(`{"name":"enc@","source":"internal_container","source_revision_config":{"image_uri":"a/b:1"}}`));
    expect(name.status).toBe(422);
    expect(name.body).toEqual({ detail: [INVALID_UTF8] });
    const secret = await post(latin1(`{"name":"enc-secret","source":"internal_container","secrets":[{"name":"PW","value":"p@ssw@rd"}]}`));
    expect(secret.status).toBe(422);
    expect(secret.body).toEqual({ detail: [INVALID_UTF8] });
    expect(await names()).toEqual(before);
  });

  it("is refused on every body-reading route (PATCH of a deployment)", async () => {
    const created = await post(JSON.stringify({ name: "enc-patch", source: "internal_container", source_revision_config: { image_uri: "a/b:1" } }));
    expect(created.status).toBe(201);
    const res = await t.request("PATCH", `/v2/deployments/${created.body.id}`, {
      key: ws.apiKey,
      rawBody: latin1(`{"secrets":[{"name":"PW","value":"p@ss"}]}`),
      headers: { "content-type": "application/json" },
    });
    expect(res.status).toBe(422);
    expect(res.body).toEqual({ detail: [INVALID_UTF8] });
    expect((await t.request("GET", `/v2/deployments/${created.body.id}`, { key: ws.apiKey })).body.secrets).toEqual([]);
  });

  it("neither claims an Idempotency-Key nor is answered as another body's replay", async () => {
    const headers = { "idempotency-key": "enc-key-1" };
    const first = await post(latin1(`{"name":"enc-idem@","source":"internal_container","source_revision_config":{"image_uri":"a/b:1"}}`), headers);
    // 0xFE where the first had 0xE4: leniently decoded, both read "enc-idem\ufffd".
    const other = Uint8Array.from(latin1(`{"name":"enc-idem@","source":"internal_container","source_revision_config":{"image_uri":"a/b:1"}}`).map((b) => (b === 0xe4 ? 0xfe : b)));
    const second = await post(other, headers);
    for (const res of [first, second]) {
      expect(res.status).toBe(422);
      expect(res.headers.get("idempotent-replayed")).toBeNull();
    }
    // The key is still free: a good body under it runs.
    const good = await post(JSON.stringify({ name: "enc-idem-ä", source: "internal_container", source_revision_config: { image_uri: "a/b:1" } }), headers);
    expect(good.status).toBe(201);
    expect(good.body.name).toBe("enc-idem-ä");
  });

  it("in UTF-8, with a byte order mark or characters outside Latin-1, is taken as it was sent", async () => {
    const res = await post(`\ufeff${JSON.stringify({ name: "enc-utf8", source: "internal_container", secrets: [{ name: "PW", value: "pässwörd-🚀" }] })}`);
    expect(res.status, res.text).toBe(201);
    const [row] = await t.app.db.sql.query<{ secrets: { name: string; value: string }[] }>(`SELECT secrets FROM deployments WHERE id = $1`, [res.body.id]);
    expect(row!.secrets.map((s) => [s.name, t.app.deps.secrets.open(s.value)])).toEqual([["PW", "pässwörd-🚀"]]);
  });
});

describe("a /graphql POST that is not UTF-8", () => {
  it("is a 400 BAD_REQUEST and runs nothing", async () => {
    const before = await names();
    const input = { name: "gql-enc@", source: "INTERNAL_CONTAINER", sourceRevisionConfig: { imageUri: "a/b:1" } };
    const res = await t.request("POST", "/graphql", {
      key: ws.apiKey,
      rawBody: latin1(JSON.stringify({ query: DEPLOYMENT_CREATE, variables: { input } })),
      headers: { "content-type": "application/json", accept: "application/graphql-response+json" },
    });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ errors: [{ message: "The body is not valid UTF-8.", extensions: { code: "BAD_REQUEST" } }] });
    expect(res.body.data).toBeUndefined();
    expect(await names()).toEqual(before);
  });
});
