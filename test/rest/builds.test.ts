import { createHash, randomBytes, randomUUID } from "node:crypto";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { decodeJwt, decodeProtectedHeader } from "jose";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { ONLY_INTERNAL_CONTAINER } from "../../src/core/push-tokens.js";
import { TOKEN_ISSUER } from "../../src/core/registry/index.js";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { DatabaseWatch } from "../support/fuzz.js";
import { tarOf } from "../support/registry.js";
import { waitFor } from "../support/wait.js";

/** Push tokens, the registry's token server, upload URLs and the PUT they take, through REST. */

const REGISTRY = "http://127.0.0.1:5999";
let t: TestApp;
let ws: NewWorkspace;

beforeAll(async () => {
  t = await startTestApp({ REGISTRY_URL: REGISTRY, PIPELINE_WORKER: "off" });
  ws = await t.workspace();
});
afterAll(() => t.close());

async function deployment(source: string, extra: object = {}) {
  const res = await t.request("POST", "/v2/deployments", {
    key: ws.apiKey,
    body: { name: `d-${randomUUID().slice(0, 8)}`, source, source_config: { deployment_type: "dev" }, source_revision_config: {}, ...extra },
  });
  expect(res.status, res.text).toBe(201);
  return res.body as { id: string };
}

/** A push token, registered with the leak guard: only the answer that issues it may show it. */
async function pushToken(id: string): Promise<{ token: string; registry_url: string }> {
  const res = await t.app.fetch(new Request(`http://test/v2/deployments/${id}/push-token`, { method: "POST", headers: { "x-api-key": ws.apiKey } }));
  expect(res.status).toBe(200);
  const body = (await res.json()) as { token: string; registry_url: string };
  t.guard.issued(body.token);
  return body;
}

const basic = (password: string, user = "oauth2accesstoken") => `Basic ${Buffer.from(`${user}:${password}`).toString("base64")}`;
const exchange = (authorization: string | null, query: string) =>
  t.request("GET", `/registry/token?${query}`, { headers: authorization ? { authorization } : {} });

describe("POST /v2/deployments/{id}/push-token", () => {
  it("answers a token bound to the deployment, and the registry URL its images go under", async () => {
    const d = await deployment("internal_container");
    const res = await t.request("POST", `/v2/deployments/${d.id}/push-token`, { key: ws.apiKey });
    t.guard.issued(res.body.token);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ token: expect.stringMatching(/^dcp_push_/), registry_url: `${REGISTRY}/${ws.workspaceId}/${d.id}`, expires_at: expect.any(String) });
    expect(res.headers.get("cache-control")).toBe("no-store");
    expect(new Date(res.body.expires_at).getTime() - Date.now()).toBeGreaterThan(50 * 60_000);
    // Kept as a hash only.
    const rows = await t.app.db.sql.query<{ token_hash: string }>(`SELECT token_hash FROM push_tokens WHERE deployment_id = $1`, [d.id]);
    expect(rows).toHaveLength(1);
    expect(rows[0]!.token_hash).toMatch(/^[0-9a-f]{64}$/);
  });

  it("answers 400 with the phrase the tool looks for on a deployment of another source", async () => {
    const d = await deployment("internal_source");
    const res = await t.request("POST", `/v2/deployments/${d.id}/push-token`, { key: ws.apiKey });
    expect(res.status).toBe(400);
    expect(res.body.detail).toContain(ONLY_INTERNAL_CONTAINER);
    expect(res.body.detail).toContain("only available for 'internal_container' source deployments");
  });

  it("answers 404 for an unknown deployment and 422 for a malformed id", async () => {
    const id = randomUUID();
    expect(await t.request("POST", `/v2/deployments/${id}/push-token`, { key: ws.apiKey })).toMatchObject({ status: 404, body: { detail: `Deployment ID ${id} not found.` } });
    const bad = await t.request("POST", "/v2/deployments/abc/push-token", { key: ws.apiKey });
    expect(bad.status).toBe(422);
    expect(bad.body.detail[0]).toMatchObject({ loc: ["path", "deployment_id"], type: "uuid_parsing" });
  });

  it("is not kept by Idempotency-Key: a credential is never stored in plain", async () => {
    const d = await deployment("internal_container");
    const send = () =>
      t.app.fetch(new Request(`http://test/v2/deployments/${d.id}/push-token`, { method: "POST", headers: { "x-api-key": ws.apiKey, "idempotency-key": "push-1" } }));
    const first = (await (await send()).json()) as { token: string };
    const second = (await (await send()).json()) as { token: string };
    t.guard.issued(first.token);
    t.guard.issued(second.token);
    expect(second.token).not.toBe(first.token);
    expect(await t.app.db.sql.query(`SELECT 1 FROM idempotency_keys WHERE key = 'push-1'`)).toEqual([]);
  });

  it("names the setting when no registry is configured", async () => {
    const bare = await startTestApp({ PIPELINE_WORKER: "off" });
    try {
      const { apiKey } = await bare.workspace();
      const d = await bare.request("POST", "/v2/deployments", { key: apiKey, body: { name: "x", source: "internal_container", source_revision_config: {} } });
      const res = await bare.request("POST", `/v2/deployments/${d.body.id}/push-token`, { key: apiKey });
      expect(res.status).toBe(400);
      expect(res.body.detail).toContain("REGISTRY_URL");
    } finally {
      await bare.close();
    }
  });
});

describe("GET /registry/token (the registry's token server)", () => {
  it("grants push and pull of the deployment's repositories and nothing else, in a JWT the registry can verify", async () => {
    const d = await deployment("internal_container");
    const { token, registry_url } = await pushToken(d.id);
    const own = registry_url.replace(`${REGISTRY}/`, "");
    const theirs = `${ws.workspaceId}/${randomUUID()}/agent`;
    const res = await exchange(basic(token), `service=127.0.0.1:5999&scope=repository:${own}/agent:push,pull&scope=repository:${theirs}:pull&scope=registry:catalog:*`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ token: expect.any(String), access_token: res.body.token, expires_in: 300, issued_at: expect.any(String) });
    expect(decodeProtectedHeader(res.body.token)).toEqual({ alg: "ES256", typ: "JWT", kid: expect.stringMatching(/^([A-Z2-7]{4}:){11}[A-Z2-7]{4}$/) });
    const claims = decodeJwt(res.body.token);
    expect(claims).toMatchObject({ iss: TOKEN_ISSUER, aud: "127.0.0.1:5999", sub: expect.stringMatching(/^push_token:/), jti: expect.any(String) });
    expect(claims.exp! - claims.iat!).toBe(300);
    expect(claims.access).toEqual([{ type: "repository", name: `${own}/agent`, actions: ["pull", "push"] }]);
  });

  it("proves the credentials of docker login (no scope) with a token that grants nothing", async () => {
    const d = await deployment("internal_container");
    const { token } = await pushToken(d.id);
    const res = await exchange(basic(token), "service=127.0.0.1:5999&account=oauth2accesstoken");
    expect(res.status).toBe(200);
    expect(decodeJwt(res.body.token).access).toEqual([]);
  });

  it("refuses missing, wrong, expired and orphaned credentials with 401, and a bad service or scope with 400", async () => {
    const d = await deployment("internal_container");
    const { token } = await pushToken(d.id);
    for (const authorization of [null, basic("dcp_push_nope"), basic(token, "admin"), `Bearer ${token}`, "Basic !!!"]) {
      const res = await exchange(authorization, "service=127.0.0.1:5999");
      expect(res.status, String(authorization)).toBe(401);
      expect(res.body).toEqual({ detail: expect.any(String) });
      expect(res.headers.get("www-authenticate")).toMatch(/^Basic /);
    }
    expect((await exchange(basic(token), "service=elsewhere:5000")).status).toBe(400);
    expect((await exchange(basic(token), "scope=nonsense")).status).toBe(400);
    vi.useFakeTimers({ toFake: ["Date"], now: Date.now() + 61 * 60_000 });
    try {
      expect((await exchange(basic(token), "service=127.0.0.1:5999")).status).toBe(401);
    } finally {
      vi.useRealTimers();
    }
    await t.request("DELETE", `/v2/deployments/${d.id}`, { key: ws.apiKey });
    expect((await exchange(basic(token), "service=127.0.0.1:5999")).status).toBe(401);
  });
});

describe("POST /v2/deployments/{id}/upload-url and PUT <upload_url>", () => {
  /** Issues an upload URL (its signature registered with the leak guard) and returns it as a path on the test app. */
  async function issue(id: string, headers: Record<string, string> = {}) {
    const res = await t.app.fetch(new Request(`http://test/v2/deployments/${id}/upload-url`, { method: "POST", headers: { "x-api-key": ws.apiKey, ...headers } }));
    expect(res.status).toBe(200);
    expect(res.headers.get("cache-control")).toBe("no-store");
    const body = (await res.json()) as { upload_url: string; object_path: string; expires_at: string };
    const url = new URL(body.upload_url);
    t.guard.issued(url.searchParams.get("signature")!);
    return { ...body, url };
  }

  const tarball = async () => gzipSync(await tarOf({ "langgraph.json": '{"graphs": {"agent": "./agent.py:graph"}}', "agent.py": "graph = 1\n" }));

  const put = (path: string, body: BodyInit | null, headers: Record<string, string> = { "content-type": "application/gzip" }) =>
    t.app.fetch(new Request(`http://test${path}`, { method: "PUT", headers, body, duplex: "half" } as RequestInit));

  async function answer(res: Response) {
    const text = await res.text();
    return { status: res.status, body: JSON.parse(text) as { detail?: unknown } };
  }

  it("answers a signed URL on this service, bound to the deployment, and the object path to PATCH in", async () => {
    const d = await deployment("internal_source");
    const issued = await issue(d.id);
    expect(issued.object_path).toMatch(new RegExp(`^uploads/${d.id}/[0-9a-f-]{36}\\.tar\\.gz$`));
    expect(issued.url.origin).toBe("http://test");
    expect(issued.url.pathname).toBe(`/${issued.object_path}`);
    expect([...issued.url.searchParams.keys()]).toEqual(["expires", "signature"]);
    expect(Number(issued.url.searchParams.get("expires")) * 1000 - Date.now()).toBeLessThanOrEqual(15 * 60_000);
  });

  it("takes one PUT of a gzip tarball, streamed into the store, and refuses a second", async () => {
    const d = await deployment("internal_source");
    const { url, object_path } = await issue(d.id);
    const data = await tarball();
    const ok = await answer(await put(url.pathname + url.search, data, { "content-type": "application/gzip", "content-length": String(data.length), "x-goog-content-length-range": "0,209715200" }));
    expect(ok).toEqual({ status: 200, body: { object_path, size_bytes: data.length, sha256: expect.stringMatching(/^[0-9a-f]{64}$/) } });
    const again = await answer(await put(url.pathname + url.search, data));
    expect(again.status).toBe(409);
    expect(again.body.detail).toContain("used already");
    const [row] = await t.app.db.sql.query<{ status: string; size_bytes: number }>(`SELECT status, size_bytes FROM source_uploads WHERE object_path = $1`, [object_path]);
    expect(row).toEqual({ status: "stored", size_bytes: data.length });
  });

  it("tells a PUT while another is receiving the upload (or its server stopped mid-way) to get a new URL", async () => {
    const d = await deployment("internal_source");
    const { url, object_path } = await issue(d.id);
    // As a replica killed while it received the body leaves it.
    await t.app.db.sql.query(`UPDATE source_uploads SET status = 'receiving' WHERE object_path = $1`, [object_path]);
    const refused = await answer(await put(url.pathname + url.search, await tarball()));
    expect(refused).toEqual({
      status: 409,
      body: {
        detail:
          "Another PUT of this upload URL is receiving it, or its server stopped while it did: get a new URL with POST /v2/deployments/{deployment_id}/upload-url and PUT to that.",
      },
    });
  });

  it("stores an upload of several MiB (several chunks in a database store) and reads it back byte for byte", async () => {
    const d = await deployment("internal_source");
    const { url, object_path } = await issue(d.id);
    const data = gzipSync(randomBytes(3 * 1024 * 1024 + 123), { level: 0 });
    expect((await put(url.pathname + url.search, data)).status).toBe(200);
    const opened = await t.app.core.uploads.open({ workspaceId: ws.workspaceId, deploymentId: d.id }, object_path);
    if (!opened.ok) throw new Error(opened.reason);
    const parts: Buffer[] = [];
    for await (const part of opened.body) parts.push(Buffer.from(part));
    expect(Buffer.concat(parts).equals(data)).toBe(true);
    expect(opened.sha256).toBe(createHash("sha256").update(data).digest("hex"));
  });

  it("takes a body cut short (the client went away, or was too slow) for the client's doing: 400, nothing stored, the URL still good", async () => {
    const d = await deployment("internal_source");
    const { url } = await issue(d.id);
    const data = await tarball();
    const from = t.guard.logLines.length;
    // The body's first bytes, then its stream fails as a request's does when its connection is reset.
    const cut = new ReadableStream<Uint8Array>({
      start: (controller) => controller.enqueue(data.subarray(0, 10)),
      pull: (controller) => controller.error(Object.assign(new Error("aborted"), { code: "ECONNRESET" })),
    });
    const res = await answer(await put(url.pathname + url.search, cut));
    expect(res.status).toBe(400);
    expect(res.body.detail).toBe("The upload was cut short: its body ended before it was whole (the connection closed, or it came too slowly). Nothing is stored; PUT it again.");
    expect(t.guard.logLines.slice(from).filter((line) => JSON.parse(line).level >= 40)).toEqual([]);
    expect((await put(url.pathname + url.search, data)).status).toBe(200);
  });

  it("refuses a wrong signature, an expired URL, another type, a body that is not gzip, and too much, storing nothing", async () => {
    const d = await deployment("internal_source");
    const { url } = await issue(d.id);
    const data = await tarball();
    const watch = await DatabaseWatch.started(t.app.db.sql);
    const tampered = new URL(url);
    tampered.searchParams.set("expires", String(Number(url.searchParams.get("expires")) + 3600));
    const otherPath = `/uploads/${d.id}/${randomUUID()}.tar.gz${url.search}`;
    const cases: [string, () => Promise<Response>, number, string][] = [
      ["no signature", () => put(url.pathname, data), 403, "signature"],
      ["a later expiry", () => put(tampered.pathname + tampered.search, data), 403, "signature"],
      ["another object path", () => put(otherPath, data), 403, "signature"],
      ["text/plain", () => put(url.pathname + url.search, data, { "content-type": "text/plain" }), 415, "application/gzip"],
      ["not gzip", () => put(url.pathname + url.search, Buffer.from("plain text, not a tarball")), 415, "not gzip"],
      ["empty", () => put(url.pathname + url.search, null), 415, "not gzip"],
      ["declared too large", () => put(url.pathname + url.search, data, { "content-type": "application/gzip", "content-length": String(200 * 1024 * 1024 + 1) }), 413, "too large"],
      ["larger than its range", () => put(url.pathname + url.search, data, { "content-type": "application/gzip", "x-goog-content-length-range": "0,10" }), 413, "too large"],
      ["a bad range", () => put(url.pathname + url.search, data, { "content-type": "application/gzip", "x-goog-content-length-range": "ten" }), 400, "Range"],
    ];
    for (const [what, send, status, says] of cases) {
      const res = await answer(await send());
      expect(res.status, what).toBe(status);
      expect(Object.keys(res.body), what).toEqual(["detail"]);
      expect(String(res.body.detail), what).toContain(says);
      await watch.check(true, what);
    }
    vi.useFakeTimers({ toFake: ["Date"], now: Date.now() + 16 * 60_000 });
    try {
      const expired = await answer(await put(url.pathname + url.search, data));
      expect(expired.status).toBe(403);
      expect(expired.body.detail).toContain("expired");
    } finally {
      vi.useRealTimers();
    }
    await watch.check(true, "expired");
    // Refused, the URL still works until it expires.
    expect((await put(url.pathname + url.search, data)).status).toBe(200);
  });

  /** What an upload left behind: its row, its chunks (database store), its deployment's folder and leftovers in .incoming (folder store). */
  async function leftovers(deploymentId: string, objectPath: string) {
    const uploads = join(t.app.config.dataDir, "uploads");
    return {
      rows: await t.app.db.sql.query(`SELECT status FROM source_uploads WHERE object_path = $1`, [objectPath]),
      chunks: await t.app.db.sql.query(`SELECT seq FROM source_upload_chunks WHERE object_path = $1`, [objectPath]),
      folder: existsSync(join(uploads, deploymentId)),
      incoming: existsSync(join(uploads, ".incoming")) ? readdirSync(join(uploads, ".incoming")) : [],
    };
  }

  it("answers 404 and stores nothing when the deployment is deleted while the body streams in", async () => {
    const d = await deployment("internal_source");
    const { url, object_path } = await issue(d.id);
    const data = await tarball();
    // The first 4 bytes, then nothing until the gate opens; pulls counts the server's reads.
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    let pulls = 0;
    const body = new ReadableStream<Uint8Array>(
      {
        async pull(controller) {
          pulls++;
          if (pulls === 1) return controller.enqueue(new Uint8Array(data.subarray(0, 4)));
          await gate;
          controller.enqueue(new Uint8Array(data.subarray(4)));
          controller.close();
        },
      },
      { highWaterMark: 0 },
    );
    const answered = put(url.pathname + url.search, body);
    // The server has claimed the upload and taken the first bytes: it waits for the rest.
    await waitFor(
      async () => ({ pulls, rows: await t.app.db.sql.query<{ status: string }>(`SELECT status FROM source_uploads WHERE object_path = $1`, [object_path]) }),
      (v) => v.pulls >= 2 && v.rows[0]?.status === "receiving",
      { what: "the PUT to be streaming" },
    );
    expect((await t.request("DELETE", `/v2/deployments/${d.id}`, { key: ws.apiKey })).status).toBe(204);
    open();
    expect(await answer(await answered)).toEqual({ status: 404, body: { detail: `Upload ${object_path} not found: its deployment was deleted.` } });
    expect(await leftovers(d.id, object_path)).toEqual({ rows: [], chunks: [], folder: false, incoming: [] });
  });

  it("answers the documented 404 to a PUT after its deployment was deleted", async () => {
    const d = await deployment("internal_source");
    const { url, object_path } = await issue(d.id);
    expect((await t.request("DELETE", `/v2/deployments/${d.id}`, { key: ws.apiKey })).status).toBe(204);
    expect(await answer(await put(url.pathname + url.search, await tarball()))).toEqual({
      status: 404,
      body: { detail: `Upload ${object_path} not found: its deployment was deleted.` },
    });
    expect(await leftovers(d.id, object_path)).toEqual({ rows: [], chunks: [], folder: false, incoming: [] });
  });

  it("streams past the global body limit: uploads have their own", async () => {
    const small = await startTestApp({ PIPELINE_WORKER: "off", MAX_BODY_BYTES: "1024" });
    try {
      const { apiKey } = await small.workspace();
      const d = await small.request("POST", "/v2/deployments", { key: apiKey, body: { name: "big", source: "internal_source", source_revision_config: {} } });
      const res = await small.app.fetch(new Request(`http://test/v2/deployments/${d.body.id}/upload-url`, { method: "POST", headers: { "x-api-key": apiKey } }));
      const { upload_url } = (await res.json()) as { upload_url: string };
      small.guard.issued(new URL(upload_url).searchParams.get("signature")!);
      const data = gzipSync(Buffer.alloc(64 * 1024, 7), { level: 0 });
      const u = new URL(upload_url);
      const stored = await small.app.fetch(new Request(`http://test${u.pathname}${u.search}`, { method: "PUT", headers: { "content-type": "application/gzip" }, body: data }));
      expect(stored.status).toBe(200);
      expect(((await stored.json()) as { size_bytes: number }).size_bytes).toBe(data.length);
    } finally {
      await small.close();
    }
  });

  it("builds URLs on PUBLIC_URL when set, and refuses self-hosted deployments", async () => {
    const behindProxy = await startTestApp({ PIPELINE_WORKER: "off", PUBLIC_URL: "https://deploy.example.com/" });
    try {
      const { apiKey } = await behindProxy.workspace();
      const d = await behindProxy.request("POST", "/v2/deployments", { key: apiKey, body: { name: "p", source: "internal_source", source_revision_config: {} } });
      const res = await behindProxy.app.fetch(new Request(`http://10.0.0.5:8080/v2/deployments/${d.body.id}/upload-url`, { method: "POST", headers: { "x-api-key": apiKey } }));
      const { upload_url } = (await res.json()) as { upload_url: string };
      behindProxy.guard.issued(new URL(upload_url).searchParams.get("signature")!);
      expect(upload_url.startsWith(`https://deploy.example.com/uploads/${d.body.id}/`)).toBe(true);
    } finally {
      await behindProxy.close();
    }
    const listener = await t.request("POST", "/v2/listeners", { key: ws.apiKey, body: { compute_type: "k8s", compute_id: `c-${randomUUID()}`, compute_config: { k8s_namespaces: null } } });
    const self = await deployment("external_container", { source_config: { listener_id: listener.body.id }, source_revision_config: { image_uri: "r.example/a:1" } });
    const res = await t.request("POST", `/v2/deployments/${self.id}/upload-url`, { key: ws.apiKey });
    expect(res.status).toBe(400);
    expect(res.body.detail).toContain("self-hosted");
  });
});
