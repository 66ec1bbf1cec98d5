import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TokenSigner } from "../../src/core/registry/signer.js";
import { missingTools, PortTaken, startRegistry } from "../support/registry.js";

/**
 * The real registry's start, as the deploy-command tests use it: they choose its port before it
 * starts, and start again on another when startRegistry says PortTaken.
 */

const missing = missingTools();
const skipLocally = missing.length > 0 && process.env.CI !== "true";

let holder: Server;
let dir: string | undefined;

beforeAll(async () => {
  holder = createServer((_req, res) => res.end());
  await new Promise<void>((resolve) => holder.listen(0, "127.0.0.1", resolve));
});
afterAll(async () => {
  await new Promise<void>((resolve) => holder.close(() => resolve()));
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe.skipIf(skipLocally)("docker-registry on a port another process holds", () => {
  it("is refused as PortTaken", async () => {
    expect(missing, "docker-registry and skopeo must be installed (.ci/run installs them)").toEqual([]);
    const port = (holder.address() as AddressInfo).port;
    // A token signer's certificate, as the service writes one: the registry reads it before it listens.
    dir = mkdtempSync(join(tmpdir(), "dcp-registry-test-"));
    const certificate = join(dir, "root.crt");
    writeFileSync(certificate, await new TokenSigner(randomBytes(32)).certificatePem());
    await expect(startRegistry(port, "http://127.0.0.1:9/registry/token", certificate)).rejects.toBeInstanceOf(PortTaken);
  }, 60_000);
});
