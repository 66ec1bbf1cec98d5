import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { StartupError } from "../db/data-dir-lock.js";

/** A secret as stored: its name and its value's ciphertext. */
export interface StoredSecret {
  name: string;
  value: string;
}

export const MASK = "********";

/**
 * AES-256-GCM for secret values at rest. Ciphertext is `v1.<key id>.<base64 iv|tag|data>`, so that a
 * value sealed under a previous key can still be opened while keys rotate.
 */
export class SecretBox {
  private readonly keys = new Map<string, Buffer>();
  private readonly currentId: string;

  constructor(current: Buffer, previous: Buffer[] = []) {
    if (current.length !== 32) throw new Error("secrets key must be 32 bytes");
    this.currentId = keyId(current);
    for (const key of [current, ...previous]) this.keys.set(keyId(key), key);
  }

  seal(plain: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv("aes-256-gcm", this.keys.get(this.currentId)!, iv);
    const data = Buffer.concat([cipher.update(plain, "utf8"), cipher.final()]);
    return `v1.${this.currentId}.${Buffer.concat([iv, cipher.getAuthTag(), data]).toString("base64")}`;
  }

  open(sealed: string): string {
    const [version, id, payload] = sealed.split(".");
    const key = id === undefined ? undefined : this.keys.get(id);
    if (version !== "v1" || !key || payload === undefined) throw new Error("secret sealed with an unknown key");
    const raw = Buffer.from(payload, "base64");
    // A fixed tag length: otherwise a truncated (shorter, easier to forge) tag would be accepted.
    const decipher = createDecipheriv("aes-256-gcm", key, raw.subarray(0, 12), { authTagLength: 16 });
    decipher.setAuthTag(raw.subarray(12, 28));
    return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString("utf8");
  }

  sealAll(secrets: { name: string; value: string }[]): StoredSecret[] {
    return secrets.map((s) => ({ name: s.name, value: this.seal(s.value) }));
  }
}

const keyId = (key: Buffer) => createHash("sha256").update(key).digest("hex").slice(0, 8);

/** The key from SECRETS_KEY (base64), or else the data directory's; null when neither exists. */
export function existingSecretsKey(configured: string | undefined, dataDir: string): Buffer | null {
  if (configured) return Buffer.from(configured, "base64");
  const file = join(dataDir, "secrets.key");
  if (!existsSync(file)) return null;
  const key = Buffer.from(readFileSync(file, "utf8").trim(), "base64");
  if (key.length !== 32) throw new StartupError(`${file} does not hold a secrets key (32 bytes, base64): restore the service's key there, or set SECRETS_KEY`);
  return key;
}

/**
 * The key from SECRETS_KEY (base64), or else one generated once into the data directory with mode
 * 0600 and reused on every later start.
 */
export function loadSecretsKey(configured: string | undefined, dataDir: string): Buffer {
  const existing = existingSecretsKey(configured, dataDir);
  if (existing) return existing;
  const file = join(dataDir, "secrets.key");
  mkdirSync(dataDir, { recursive: true });
  const key = randomBytes(32);
  writeFileSync(file, `${key.toString("base64")}\n`, { mode: 0o600, flag: "wx" });
  return key;
}

/** What a face may show of secrets: names, never values. */
export const maskSecrets = (secrets: StoredSecret[]) => secrets.map((s) => ({ name: s.name, value: MASK }));
