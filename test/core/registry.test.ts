import { createPublicKey } from "node:crypto";
import { X509Certificate } from "node:crypto";
import { createServer, type Socket } from "node:net";
import { describe, expect, it } from "vitest";
import { Registry } from "../../src/core/registry/index.js";
import { checkImage } from "../../src/pipeline/checks/image.js";
import { isRepositoryName, parseImageReference } from "../../src/core/registry/reference.js";
import { grant, parseScopes } from "../../src/core/registry/scopes.js";
import { deriveSigningKey, libtrustKeyId, TokenSigner } from "../../src/core/registry/signer.js";

describe("image references", () => {
  it("reads host, repository, tag and digest as the registry does", () => {
    expect(parseImageReference("127.0.0.1:5000/ws/dep/agent:v1")).toEqual({ host: "127.0.0.1:5000", repository: "ws/dep/agent", tag: "v1", digest: null });
    expect(parseImageReference("registry.example/a")).toEqual({ host: "registry.example", repository: "a", tag: "latest", digest: null });
    const digest = `sha256:${"a".repeat(64)}`;
    expect(parseImageReference(`localhost/a@${digest}`)).toEqual({ host: "localhost", repository: "a", tag: null, digest });
    for (const bad of ["agent:1", "library/agent:1", "r.example/Agent:1", "r.example/a:b:c", "r.example/a@sha256:short", "r.example/a:-x"]) {
      expect(parseImageReference(bad), bad).toHaveProperty("error");
    }
    expect(isRepositoryName("a/b-c/d__e.f")).toBe(true);
    expect(isRepositoryName("a//b")).toBe(false);
  });
});

describe("token scopes", () => {
  it("parses repeated and space-separated scopes, and refuses what is not type:name:actions", () => {
    expect(parseScopes(["repository:a/b:push,pull repository(plugin):c:pull", "registry:catalog:*"])).toEqual([
      { type: "repository", name: "a/b", actions: ["push", "pull"] },
      { type: "repository", name: "c", actions: ["pull"] },
      { type: "registry", name: "catalog", actions: ["*"] },
    ]);
    expect(parseScopes(["nonsense"])).toHaveProperty("error");
  });

  it("grants only repositories under the prefix, only the allowed actions", () => {
    const scopes = parseScopes(["repository:ws/d/app:push,pull,delete", "repository:ws/d:pull", "repository:ws/d2/app:pull", "repository:ws/dx:*", "registry:catalog:*", "repository:ws/d/app:*"]);
    if ("error" in scopes) throw new Error(scopes.error);
    expect(grant(scopes, "ws/d", ["pull", "push"])).toEqual([
      { type: "repository", name: "ws/d/app", actions: ["pull", "push"] },
      { type: "repository", name: "ws/d", actions: ["pull"] },
    ]);
    expect(grant(scopes, "ws/d", ["pull"])).toEqual([
      { type: "repository", name: "ws/d/app", actions: ["pull"] },
      { type: "repository", name: "ws/d", actions: ["pull"] },
    ]);
  });
});

describe("the token-signing key", () => {
  const secretsKey = Buffer.alloc(32, 3);

  it("is the same for every replica sharing SECRETS_KEY, and another for another key", () => {
    const a = createPublicKey(deriveSigningKey(secretsKey).privateKey).export({ format: "jwk" });
    const b = createPublicKey(deriveSigningKey(Buffer.from(secretsKey)).privateKey).export({ format: "jwk" });
    const c = createPublicKey(deriveSigningKey(Buffer.alloc(32, 4)).privateKey).export({ format: "jwk" });
    expect(a).toEqual(b);
    expect(a).not.toEqual(c);
  });

  it("has the libtrust key id Distribution computes (base32 of SHA-256 of the DER key, 12 groups of 4)", () => {
    // The format here; that Distribution 2.8 finds the key by it, test/e2e/deploy-command.test.ts proves.
    const kid = libtrustKeyId(createPublicKey(deriveSigningKey(secretsKey).privateKey));
    expect(kid).toMatch(/^([A-Z2-7]{4}:){11}[A-Z2-7]{4}$/);
    expect(new TokenSigner(secretsKey).keyId).toBe(kid);
  });

  it("writes a certificate of itself for the registry's rootcertbundle", async () => {
    const signer = new TokenSigner(secretsKey);
    const cert = new X509Certificate(await signer.certificatePem());
    expect(libtrustKeyId(cert.publicKey)).toBe(signer.keyId);
    expect(cert.verify(cert.publicKey)).toBe(true);
    expect(new Date(cert.validTo).getTime()).toBeGreaterThan(Date.now() + 365 * 24 * 3600_000);
  });
});

describe("looking an image up", () => {
  it("gives up on a registry that takes the connection and never answers: each attempt bounded, the build told why", async () => {
    const sockets: Socket[] = [];
    const silent = createServer((socket) => void sockets.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    const { port } = silent.address() as { port: number };
    try {
      const registry = new Registry(`http://127.0.0.1:${port}`, new TokenSigner(Buffer.alloc(32, 7)), 300);
      const owner = { workspaceId: "ws", id: "dep" };
      const step = new AbortController();
      const check = await checkImage(registry, owner, `127.0.0.1:${port}/ws/dep/agent:1`, step.signal);
      expect(check).toMatchObject({ ok: false, message: expect.stringContaining("no answer within 0.3 s") });
      // Every attempt asked once, then left waiting: the registry saw three requests.
      expect(sockets.length).toBe(3);
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => silent.close(resolve));
    }
  });
});
