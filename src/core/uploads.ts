import { createHash, createHmac, randomUUID, timingSafeEqual } from "node:crypto";
import type { Tenant } from "./auth.js";
import type { BlobStore } from "./blobs/types.js";
import type { CoreDeps } from "./context.js";
import { DELETING } from "./deployment-status.js";
import { badRequest, conflict, CoreError, notFound } from "./errors.js";
import { isSelfHosted } from "./revision-machine.js";

/** The largest source tarball taken: 200 MiB, what the command-line tool declares too. */
export const MAX_UPLOAD_BYTES = 200 * 1024 * 1024;

/** How long an upload URL works. */
export const UPLOAD_URL_TTL_MS = 15 * 60_000;

/** Types a gzip tarball may be sent as (parameters aside). */
const GZIP_TYPES = new Set(["application/gzip", "application/x-gzip", "application/x-tar+gzip", "application/tar+gzip"]);

export interface IssuedUpload {
  uploadUrl: string;
  objectPath: string;
  expiresAt: Date;
}

/** A PUT to an upload URL, as the REST face read it. */
export interface UploadRequest {
  objectPath: string;
  expires: string | null;
  signature: string | null;
  contentType: string | null;
  contentLength: number | null;
  /** X-Goog-Content-Length-Range: `min,max`, as the command-line tool sends it. */
  lengthRange: string | null;
  body: AsyncIterable<Uint8Array> | null;
}

export interface StoredUpload {
  objectPath: string;
  sizeBytes: number;
  sha256: string;
}

/** An upload as the build step reads it. */
export type OpenedUpload =
  | { ok: true; sizeBytes: number; sha256: string; body: AsyncIterable<Uint8Array> }
  | { ok: false; reason: string };

const forbidden = (message: string) => new CoreError("FORBIDDEN", message);
const tooLarge = (message: string) => new CoreError("TOO_LARGE", message);
const unsupported = (message: string) => new CoreError("UNSUPPORTED_TYPE", message);

/**
 * Source uploads of the command-line tool's remote build: a signed URL on this service (HMAC of
 * the object path and expiry, good for UPLOAD_URL_TTL_MS), one successful PUT of at most 200 MiB of
 * gzip, streamed into the blob store; the build step then opens it by its object path.
 */
export class UploadService {
  constructor(
    private readonly deps: CoreDeps,
    private readonly blobs: BlobStore,
    /** Signs upload URLs (derived from SECRETS_KEY). */
    private readonly signingKey: Buffer,
    /** PUBLIC_URL: where clients reach this service; null: where the request came to. */
    private readonly publicUrl: string | null,
  ) {}

  /** POST …/upload-url: a new upload of the deployment, and the URL to PUT it to (on PUBLIC_URL, or the request's origin). */
  async issue(tenant: Tenant, deploymentId: string, requestOrigin: string | null): Promise<IssuedUpload> {
    const deployment = await this.deps.data(tenant).deployment.findFirst({
      where: { id: deploymentId },
      select: { id: true, source: true, status: true },
    });
    if (!deployment) throw notFound("Deployment", deploymentId);
    if (isSelfHosted(deployment.source)) {
      throw badRequest("Source uploads are only available for managed cloud deployments; this deployment is self-hosted (external_container).");
    }
    if (deployment.status === DELETING) throw badRequest(`Deployment ID ${deploymentId} is being deleted.`);
    const baseUrl = this.publicUrl ?? requestOrigin;
    if (!baseUrl) throw badRequest("This service does not know its own address here: set PUBLIC_URL to the URL clients reach it at.");
    const now = Date.now();
    const objectPath = `uploads/${deployment.id}/${randomUUID()}.tar.gz`;
    const expiresAt = new Date(now + UPLOAD_URL_TTL_MS);
    // URLs never used (or whose PUT died with its replica), of any workspace, are swept an hour after they expired.
    await this.deps.prisma.sourceUpload.deleteMany({ where: { status: { not: "stored" }, expiresAt: { lt: new Date(now - 60 * 60_000) } } });
    await this.deps.data(tenant).sourceUpload.create({
      data: { objectPath, workspaceId: tenant.workspaceId, deploymentId: deployment.id, status: "pending", expiresAt },
    });
    const expires = String(Math.floor(expiresAt.getTime() / 1000));
    const query = new URLSearchParams({ expires, signature: this.sign(objectPath, expires) });
    return { uploadUrl: `${baseUrl}/${objectPath}?${query}`, objectPath, expiresAt };
  }

  /**
   * PUT <upload_url>. Everything that can be checked before the body is (signature, expiry, type,
   * declared length); the body is then streamed into the blob store, its size counted and its first
   * bytes checked for gzip. Refused or failed, nothing is stored and the URL may be used again until
   * it expires; stored, it is spent. When the deployment is deleted while the body streams in (its
   * upload's row goes with it), the answer is the 404 of a PUT after the deletion, and what was
   * written is removed.
   */
  async receive(req: UploadRequest): Promise<StoredUpload> {
    const expected = req.expires ? this.sign(req.objectPath, req.expires) : null;
    if (!expected || !req.signature || !sameText(req.signature, expected)) {
      throw forbidden("Invalid upload signature: PUT to the upload_url exactly as POST /v2/deployments/{deployment_id}/upload-url returned it.");
    }
    if (Number(req.expires) * 1000 <= Date.now()) {
      throw forbidden("This upload URL has expired: get a new one with POST /v2/deployments/{deployment_id}/upload-url.");
    }
    const type = (req.contentType ?? "").split(";")[0]!.trim().toLowerCase();
    if (!GZIP_TYPES.has(type)) throw unsupported(`Uploads are gzip tarballs: send Content-Type: application/gzip (got '${type || "none"}').`);
    const range = parseRange(req.lengthRange);
    const max = Math.min(MAX_UPLOAD_BYTES, range.max);
    if (req.contentLength !== null && req.contentLength > max) throw tooLarge(`Upload too large: at most ${max} bytes.`);
    if (req.contentLength !== null && req.contentLength < range.min) throw badRequest(`Upload too small: X-Goog-Content-Length-Range asks for at least ${range.min} bytes.`);

    const claimed = await this.deps.prisma.sourceUpload.updateMany({
      where: { objectPath: req.objectPath, status: "pending" },
      data: { status: "receiving" },
    });
    if (claimed.count === 0) throw await this.refusal(req.objectPath);
    const hash = createHash("sha256");
    let size = 0;
    try {
      await this.blobs.write(req.objectPath, gzipBody(req.body, max, range.min, (chunk) => {
        size += chunk.byteLength;
        hash.update(chunk);
      }));
    } catch (err) {
      const released = await this.deps.prisma.sourceUpload.updateMany({ where: { objectPath: req.objectPath, status: "receiving" }, data: { status: "pending" } });
      // The claim went while the body streamed in (a database store's next chunk then fails on the
      // missing row): that, not how the write failed, is the answer.
      if (released.count === 0) throw await this.claimLost(req.objectPath);
      throw err;
    }
    const sha256 = hash.digest("hex");
    // Still this PUT's claim, or the deployment was deleted meanwhile (its upload's row with it).
    const stored = await this.deps.prisma.sourceUpload.updateMany({
      where: { objectPath: req.objectPath, status: "receiving" },
      data: { status: "stored", sizeBytes: size, sha256, storedAt: new Date() },
    });
    if (stored.count === 0) throw await this.claimLost(req.objectPath);
    return { objectPath: req.objectPath, sizeBytes: size, sha256 };
  }

  /** Why this PUT cannot have the upload: its row went with its deployment (404), or another PUT had it (409). */
  private async refusal(objectPath: string): Promise<CoreError> {
    const found = await this.deps.prisma.sourceUpload.findUnique({ where: { objectPath }, select: { status: true } });
    if (!found) return new CoreError("NOT_FOUND", `Upload ${objectPath} not found: its deployment was deleted.`);
    if (found.status === "receiving") {
      // A claim has no lease: one whose replica died mid-body stays until the URL is swept.
      return conflict("Another PUT of this upload URL is receiving it, or its server stopped while it did: get a new URL with POST /v2/deployments/{deployment_id}/upload-url and PUT to that.");
    }
    return conflict(`This upload URL has been used already (${found.status}): get a new one with POST /v2/deployments/{deployment_id}/upload-url.`);
  }

  /**
   * A claim lost while the body streamed in: when the row is gone, so goes what was written (a
   * folder store may have put a file, and recreated the folder, of a deployment deleted meanwhile),
   * and the answer is the one a PUT after the deletion gets.
   */
  private async claimLost(objectPath: string): Promise<CoreError> {
    const refusal = await this.refusal(objectPath);
    if (refusal.code === "NOT_FOUND") await this.blobs.remove(objectPath);
    return refusal;
  }

  /** The build step: the stored upload a revision names, when it is this deployment's. */
  async open(revision: { workspaceId: string; deploymentId: string }, objectPath: string): Promise<OpenedUpload> {
    const upload = await this.deps.prisma.sourceUpload.findUnique({ where: { objectPath } });
    if (!upload || upload.workspaceId !== revision.workspaceId || upload.deploymentId !== revision.deploymentId) {
      return { ok: false, reason: "no upload of this deployment has that path (POST /v2/deployments/{deployment_id}/upload-url gives one)" };
    }
    if (upload.status !== "stored") return { ok: false, reason: "its upload never completed: PUT the tarball to the upload_url first" };
    const body = await this.blobs.read(objectPath);
    if (!body) return { ok: false, reason: "its bytes are missing from the blob store" };
    return { ok: true, sizeBytes: upload.sizeBytes ?? 0, sha256: upload.sha256 ?? "", body };
  }

  private sign(objectPath: string, expires: string): string {
    return createHmac("sha256", this.signingKey).update(`PUT\n${objectPath}\n${expires}`).digest("hex");
  }
}

const sameText = (a: string, b: string) => a.length === b.length && timingSafeEqual(Buffer.from(a), Buffer.from(b));

/** X-Goog-Content-Length-Range: `min,max`; absent, anything up to the limit. */
function parseRange(header: string | null): { min: number; max: number } {
  if (header === null) return { min: 0, max: MAX_UPLOAD_BYTES };
  const m = /^\s*(\d{1,15})\s*,\s*(\d{1,15})\s*$/.exec(header);
  if (!m || Number(m[1]) > Number(m[2])) throw badRequest("X-Goog-Content-Length-Range must be 'min,max' in bytes.");
  return { min: Number(m[1]), max: Number(m[2]) };
}

/** The body, passed on as it arrives: refused past `max` bytes, short of `min`, or when it does not start as gzip does. */
async function* gzipBody(body: AsyncIterable<Uint8Array> | null, max: number, min: number, seen: (chunk: Uint8Array) => void): AsyncIterable<Uint8Array> {
  let size = 0;
  let head = Buffer.alloc(0);
  for await (const chunk of body ? sent(body) : []) {
    size += chunk.byteLength;
    if (size > max) throw tooLarge(`Upload too large: at most ${max} bytes.`);
    if (head.length < 2) {
      head = Buffer.concat([head, chunk]).subarray(0, 2);
      if (head.length === 2 && !(head[0] === 0x1f && head[1] === 0x8b)) throw unsupported("The body is not gzip: upload a .tar.gz of the project.");
    }
    seen(chunk);
    yield chunk;
  }
  if (head.length < 2) throw unsupported("The body is not gzip: upload a .tar.gz of the project (it was empty).");
  if (size < min) throw badRequest(`Upload too small: X-Goog-Content-Length-Range asks for at least ${min} bytes.`);
}

/**
 * The request's body as its client sends it. Its stream failing means the client went away or sent
 * too slowly (the server's request timeout): the client's doing, answered 400 and logged as such,
 * not a fault of the service's (a reset connection's ECONNRESET is otherwise taken for a lost
 * database: 503).
 */
async function* sent(body: AsyncIterable<Uint8Array>): AsyncIterable<Uint8Array> {
  try {
    yield* body;
  } catch {
    throw badRequest("The upload was cut short: its body ended before it was whole (the connection closed, or it came too slowly). Nothing is stored; PUT it again.");
  }
}
