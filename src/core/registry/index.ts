import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { X509Certificate } from "node:crypto";
import { join } from "node:path";
import { type ImageReference, isWithin, manifestReference } from "./reference.js";
import { type Access, type RegistryAction } from "./scopes.js";
import { TokenSigner } from "./signer.js";

export { TOKEN_ISSUER } from "./signer.js";

/** Where a deployment's images live: the repositories under this name. */
export interface RepositoryOwner {
  workspaceId: string;
  id: string;
}

/** How long a manifest lookup waits for the registry (undici's own limit is 300 s, held on a build step's lease). */
const LOOKUP_TIMEOUT_MS = 10_000;

/** The media types asked for when looking an image up: OCI and Docker, single images and indexes. */
export const MANIFEST_TYPES = [
  "application/vnd.oci.image.manifest.v1+json",
  "application/vnd.oci.image.index.v1+json",
  "application/vnd.docker.distribution.manifest.v2+json",
  "application/vnd.docker.distribution.manifest.list.v2+json",
];

export type ManifestLookup =
  | { found: true; digest: string; mediaType: string | null; size: number | null }
  | { found: false; status: number; reason: string };

/**
 * The container registry (CNCF Distribution) this service is the token server of (REGISTRY_URL).
 * A deployment's images are the repositories under `<path of REGISTRY_URL>/<workspace id>/<deployment id>`;
 * its push tokens reach those and nothing else.
 */
export class Registry {
  readonly host: string;
  /** The registry's `auth.token.service`: the audience of its tokens. */
  readonly service: string;
  private readonly root: string;

  constructor(
    /** REGISTRY_URL, as clients reach it. */
    readonly url: string,
    readonly signer: TokenSigner,
    /** How long one lookup waits for the registry's answer (a registry that takes the connection and hangs). */
    private readonly lookupTimeoutMs = LOOKUP_TIMEOUT_MS,
  ) {
    const u = new URL(url);
    this.host = u.host;
    this.service = u.host;
    this.root = u.pathname.replace(/^\/+|\/+$/g, "");
  }

  /** The repository name every image of the deployment is under. */
  repositoryPrefix(d: RepositoryOwner): string {
    return [this.root, d.workspaceId, d.id].filter((p) => p !== "").join("/");
  }

  /** What push-token answers: the tool pushes `<this without scheme>/<repository>:<tag>`. */
  registryUrl(d: RepositoryOwner): string {
    return `${new URL(this.url).origin}/${this.repositoryPrefix(d)}`;
  }

  /** Whether the reference names an image of this registry under the deployment's repositories. */
  owns(d: RepositoryOwner, ref: ImageReference): boolean {
    return ref.host === this.host.toLowerCase() && isWithin(ref.repository, this.repositoryPrefix(d));
  }

  async token(subject: string, access: Access[]) {
    return this.signer.sign(subject, this.service, access);
  }

  /**
   * Asks the registry for the image's manifest with a token of its own that may only pull that one
   * repository. Network failures, and no answer within lookupTimeoutMs, throw (the caller decides
   * whether to retry); `signal` (the step's) aborts it sooner.
   */
  async manifest(ref: ImageReference, signal?: AbortSignal): Promise<ManifestLookup> {
    const pull: RegistryAction[] = ["pull"];
    const { token } = await this.token("image-check", [{ type: "repository", name: ref.repository, actions: pull }]);
    const url = `${new URL(this.url).origin}/v2/${ref.repository}/manifests/${encodeURIComponent(manifestReference(ref))}`;
    const timeout = AbortSignal.timeout(this.lookupTimeoutMs);
    const res = await fetch(url, {
      method: "HEAD",
      headers: { accept: MANIFEST_TYPES.join(", "), authorization: `Bearer ${token}` },
      signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
    }).catch((err: unknown) => {
      if (timeout.aborted && !signal?.aborted) throw new Error(`no answer within ${this.lookupTimeoutMs / 1000} s`);
      throw err;
    });
    if (res.ok) {
      const digest = res.headers.get("docker-content-digest") ?? ref.digest;
      if (!digest) return { found: false, status: res.status, reason: "the registry answered without a Docker-Content-Digest" };
      const length = res.headers.get("content-length");
      return { found: true, digest, mediaType: res.headers.get("content-type"), size: length ? Number(length) : null };
    }
    const reason =
      res.status === 404
        ? "no such manifest"
        : res.status === 401 || res.status === 403
          ? "the registry refused this service's pull token (check auth.token issuer, service and rootcertbundle in its configuration)"
          : `the registry answered ${res.status}`;
    return { found: false, status: res.status, reason };
  }

  /**
   * Writes the certificate of the token-signing key for the registry's `auth.token.rootcertbundle`
   * to `<dataDir>/registry-token.crt`, unless a certificate of the same key is there already.
   */
  async writeCertificate(dataDir: string): Promise<string> {
    const file = join(dataDir, "registry-token.crt");
    const pem = await this.signer.certificatePem();
    if (existsSync(file)) {
      const current = new X509Certificate(readFileSync(file));
      if (current.publicKey.equals(new X509Certificate(pem).publicKey)) return file;
    }
    mkdirSync(dataDir, { recursive: true });
    writeFileSync(file, pem);
    return file;
  }
}
