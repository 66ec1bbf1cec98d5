import "reflect-metadata"; // @peculiar/x509's dependency injection needs it before it loads
import { createECDH, createHash, createHmac, createPrivateKey, createPublicKey, type KeyObject, randomUUID, type webcrypto } from "node:crypto";
import * as x509 from "@peculiar/x509";
import { SignJWT } from "jose";
import type { Access } from "./scopes.js";

/** The `iss` of every registry token: the registry's `auth.token.issuer` must say the same. */
export const TOKEN_ISSUER = "deployment-control-plane";

/** How long a registry token (the JWT a client sends to the registry) lasts. */
export const REGISTRY_TOKEN_TTL_SECONDS = 300;

/** The order of P-256: a private key is a number in [1, n-1]. */
const P256_ORDER = BigInt("0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551");

/**
 * The ES256 key registry tokens are signed with, derived from the secrets key: every replica that
 * shares SECRETS_KEY signs with the same key, and nothing else has to be stored or shared. A
 * different SECRETS_KEY makes a different key (and certificate for the registry).
 */
export function deriveSigningKey(secretsKey: Buffer): { privateKey: KeyObject; jwk: webcrypto.JsonWebKey } {
  for (let counter = 0; ; counter++) {
    const d = createHmac("sha256", secretsKey).update(`registry-token-signing:${counter}`).digest();
    const n = BigInt(`0x${d.toString("hex")}`);
    if (n === 0n || n >= P256_ORDER) continue;
    const ecdh = createECDH("prime256v1");
    ecdh.setPrivateKey(d);
    const point = ecdh.getPublicKey(); // 0x04 | x | y
    const jwk = { kty: "EC", crv: "P-256", d: d.toString("base64url"), x: point.subarray(1, 33).toString("base64url"), y: point.subarray(33).toString("base64url") };
    return { privateKey: createPrivateKey({ key: jwk, format: "jwk" }), jwk };
  }
}

/**
 * The key id libtrust gives a public key, which Distribution 2.x looks up among the keys of the
 * certificates in `auth.token.rootcertbundle`: SHA-256 of the DER public key, cut to 240 bits, in
 * base32, in groups of four joined by colons.
 */
export function libtrustKeyId(publicKey: KeyObject): string {
  const digest = createHash("sha256").update(publicKey.export({ type: "spki", format: "der" })).digest().subarray(0, 30);
  return base32(digest).match(/.{4}/g)!.join(":");
}

function base32(bytes: Buffer): string {
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
  let bits = 0;
  let value = 0;
  let out = "";
  for (const byte of bytes) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += alphabet[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += alphabet[(value << (5 - bits)) & 31];
  return out;
}

/** Signs the registry tokens of the Docker Registry v2 token protocol. */
export class TokenSigner {
  readonly keyId: string;
  private readonly privateKey: KeyObject;
  private readonly jwk: webcrypto.JsonWebKey;

  constructor(secretsKey: Buffer) {
    ({ privateKey: this.privateKey, jwk: this.jwk } = deriveSigningKey(secretsKey));
    this.keyId = libtrustKeyId(createPublicKey(this.privateKey));
  }

  /** A JWT for `audience` (the registry's service name) granting `access`; the registry checks all of it. */
  async sign(subject: string, audience: string, access: Access[], now = new Date()): Promise<{ token: string; expiresIn: number; issuedAt: Date }> {
    const iat = Math.floor(now.getTime() / 1000);
    const token = await new SignJWT({ access })
      .setProtectedHeader({ alg: "ES256", typ: "JWT", kid: this.keyId })
      .setIssuer(TOKEN_ISSUER)
      .setSubject(subject)
      .setAudience(audience)
      .setIssuedAt(iat)
      .setNotBefore(iat)
      .setExpirationTime(iat + REGISTRY_TOKEN_TTL_SECONDS)
      .setJti(randomUUID())
      .sign(this.privateKey);
    return { token, expiresIn: REGISTRY_TOKEN_TTL_SECONDS, issuedAt: new Date(iat * 1000) };
  }

  /**
   * A self-signed certificate of the signing key, for the registry's `auth.token.rootcertbundle`.
   * Distribution matches tokens to it by key id, so any certificate of this key will do.
   */
  async certificatePem(): Promise<string> {
    const { subtle } = globalThis.crypto;
    x509.cryptoProvider.set(globalThis.crypto);
    const algorithm = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" };
    const { d: _d, ...publicJwk } = this.jwk;
    const keys = {
      privateKey: await subtle.importKey("jwk", this.jwk as JsonWebKey, algorithm, false, ["sign"]),
      publicKey: await subtle.importKey("jwk", publicJwk as JsonWebKey, algorithm, true, ["verify"]),
    };
    const notBefore = new Date(Date.now() - 24 * 3600_000);
    const cert = await x509.X509CertificateGenerator.createSelfSigned({
      serialNumber: `01${createHash("sha256").update(this.keyId).digest("hex").slice(0, 14)}`,
      name: `CN=${TOKEN_ISSUER} registry token signer`,
      notBefore,
      notAfter: new Date(notBefore.getTime() + 10 * 365 * 24 * 3600_000),
      keys,
      signingAlgorithm: algorithm,
    });
    return cert.toString("pem");
  }
}
