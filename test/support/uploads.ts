import { gzipSync } from "node:zlib";
import { expect } from "vitest";
import type { TestApp } from "./app.js";
import { tarOf } from "./registry.js";

/**
 * Uploads source as the command-line tool does, through app.fetch: asks for a signed upload URL and
 * PUTs a gzip tarball of `files` (or these bytes as they are) to it. Returns the object path to
 * name as source_revision_config.source_tarball_path.
 */
export async function uploadSource(t: TestApp, key: string, deploymentId: string, files: Record<string, string> | Buffer): Promise<string> {
  const issued = await t.request("POST", `/v2/deployments/${deploymentId}/upload-url`, { key });
  expect(issued.status, issued.text).toBe(200);
  const { upload_url, object_path } = issued.body as { upload_url: string; object_path: string };
  const url = new URL(upload_url);
  // The answer that issues the signature may show it; nothing after it may.
  t.guard.issued(url.searchParams.get("signature")!);
  const body = Buffer.isBuffer(files) ? files : gzipSync(await tarOf(files));
  const put = await t.app.fetch(
    new Request(`http://test${url.pathname}${url.search}`, { method: "PUT", headers: { "content-type": "application/gzip" }, body: new Uint8Array(body) }),
  );
  expect(put.status, await put.clone().text()).toBe(200);
  return object_path;
}
