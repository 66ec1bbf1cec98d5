import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, type TestApp } from "../support/app.js";

/**
 * An upload refused before its body was read (a signature that does not hold, a URL used already,
 * a deployment gone) is answered at once; the server then stops reading the body and closes the
 * connection. The answer said keep-alive, so a client's next request on that connection failed
 * (undici: "other side closed"), as a probe found. The answer now says Connection: close.
 */

let t: TestApp;
let ws: NewWorkspace;
let base: string;

beforeAll(async () => {
  t = await startTestApp({ PIPELINE_WORKER: "off" });
  base = await t.app.start();
  ws = await t.workspace();
});
afterAll(() => t.close());

/** 3 MB that start as gzip: more than the server reads of a body it refused. */
const body = Buffer.concat([Buffer.from([0x1f, 0x8b, 0x08, 0x00]), randomBytes(3 * 1024 * 1024)]);

describe("a refused upload", () => {
  it("closes its connection, so that the client's next request goes on a new one", async () => {
    const d = await t.request("POST", "/v2/deployments", { key: ws.apiKey, body: { name: "uploads", source: "internal_source", source_config: { deployment_type: "dev" } } });
    expect(d.status, d.text).toBe(201);
    const issued = await t.request("POST", `/v2/deployments/${d.body.id}/upload-url`, { key: ws.apiKey });
    const url = new URL(issued.body.upload_url);
    url.searchParams.set("signature", "0".repeat(64));
    const put = await fetch(`${base}${url.pathname}${url.search}`, { method: "PUT", headers: { "content-type": "application/gzip" }, body });
    expect(put.status).toBe(403);
    expect(put.headers.get("connection")).toBe("close");
    await put.text();
    // The same client (one pool of connections), at once: each request answered.
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`${base}/healthz`);
      expect(res.status).toBe(200);
      await res.text();
    }
  });
});
