import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { loadSecretsKey, MASK, maskSecrets, SecretBox } from "../../src/core/secrets.js";

const key = () => randomBytes(32);

describe("SecretBox", () => {
  it("opens what it seals, with a fresh IV each time, and never shows the plain text", () => {
    const box = new SecretBox(key());
    for (const plain of ["", "s3cr3t", "ünïcödé ✓ 🔑", "x".repeat(10_000)]) {
      const sealed = box.seal(plain);
      expect(sealed).toMatch(/^v1\.[0-9a-f]{8}\.[A-Za-z0-9+/]+=*$/);
      if (plain.length > 3) expect(sealed).not.toContain(plain);
      expect(box.open(sealed)).toBe(plain);
    }
    expect(box.seal("same")).not.toBe(box.seal("same"));
  });

  it("detects tampering with the ciphertext, the tag or the IV", () => {
    const box = new SecretBox(key());
    const sealed = box.seal("do not touch");
    const [version, id, payload] = sealed.split(".") as [string, string, string];
    const raw = Buffer.from(payload, "base64");
    // Bytes 0-11 are the IV, 12-27 the tag, the rest the data.
    for (const at of [0, 12, 27, 28, raw.length - 1]) {
      const copy = Buffer.from(raw);
      copy[at]! ^= 0x01;
      expect(() => box.open(`${version}.${id}.${copy.toString("base64")}`), `byte ${at}`).toThrow();
    }
    expect(() => box.open(`${version}.${id}.${raw.subarray(0, 20).toString("base64")}`)).toThrow();
  });

  it("refuses a truncated tag, which GCM would otherwise verify as a prefix", () => {
    const box = new SecretBox(key());
    // Sealing "" leaves IV|tag; keeping 8 of the tag's 16 bytes is still a valid GCM tag unless its length is fixed.
    const [version, id, payload] = box.seal("").split(".") as [string, string, string];
    const short = Buffer.from(payload, "base64").subarray(0, 20).toString("base64");
    expect(() => box.open(`${version}.${id}.${short}`)).toThrow(/tag length/);
  });

  it("refuses values sealed under a key it does not hold, or in an unknown format", () => {
    const sealed = new SecretBox(key()).seal("elsewhere");
    const box = new SecretBox(key());
    expect(() => box.open(sealed)).toThrow(/unknown key/);
    expect(() => box.open("plain text")).toThrow();
    expect(() => box.open(sealed.replace(/^v1/, "v2"))).toThrow(/unknown key/);
  });

  it("opens values sealed under a previous key and seals new ones under the current key", () => {
    const old = key();
    const current = key();
    const sealedOld = new SecretBox(old).seal("from before rotation");
    const rotated = new SecretBox(current, [old]);
    expect(rotated.open(sealedOld)).toBe("from before rotation");
    const sealedNew = rotated.seal("after rotation");
    expect(new SecretBox(current).open(sealedNew)).toBe("after rotation");
    expect(() => new SecretBox(old).open(sealedNew)).toThrow();
  });

  it("rejects a key that is not 32 bytes", () => {
    expect(() => new SecretBox(randomBytes(16))).toThrow(/32 bytes/);
  });

  it("sealAll keeps names and seals each value; maskSecrets shows names only", () => {
    const box = new SecretBox(key());
    const stored = box.sealAll([
      { name: "A", value: "alpha" },
      { name: "B", value: "beta" },
    ]);
    expect(stored.map((s) => s.name)).toEqual(["A", "B"]);
    expect(stored.map((s) => box.open(s.value))).toEqual(["alpha", "beta"]);
    expect(maskSecrets(stored)).toEqual([
      { name: "A", value: MASK },
      { name: "B", value: MASK },
    ]);
    expect(MASK).toBe("********");
  });
});

describe("loadSecretsKey", () => {
  const dirs: string[] = [];
  const tempDir = () => {
    const dir = mkdtempSync(join(tmpdir(), "dcp-key-"));
    dirs.push(dir);
    return dir;
  };
  afterEach(() => {
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });

  it("uses SECRETS_KEY when given and writes no file", () => {
    const dir = tempDir();
    const configured = key();
    expect(loadSecretsKey(configured.toString("base64"), dir).equals(configured)).toBe(true);
    expect(existsSync(join(dir, "secrets.key"))).toBe(false);
  });

  it("generates a key once into the data directory with mode 0600 and reuses it", () => {
    const dataDir = join(tempDir(), "nested", "data");
    const first = loadSecretsKey(undefined, dataDir);
    expect(first).toHaveLength(32);
    const file = join(dataDir, "secrets.key");
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(Buffer.from(readFileSync(file, "utf8").trim(), "base64").equals(first)).toBe(true);
    const mtime = statSync(file).mtimeMs;

    const second = loadSecretsKey(undefined, dataDir);
    expect(second.equals(first)).toBe(true);
    expect(statSync(file).mtimeMs).toBe(mtime);
    // What the first key sealed, a restart (the second load) opens.
    expect(new SecretBox(second).open(new SecretBox(first).seal("survives restarts"))).toBe("survives restarts");
  });
});
