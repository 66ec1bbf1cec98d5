import { setTimeout as sleep } from "node:timers/promises";
import type { ManifestLookup, Registry } from "../../core/registry/index.js";
import { manifestReference, parseImageReference } from "../../core/registry/reference.js";

export interface ImageReport {
  image_uri: string;
  /** Whether the registry was asked (no registry configured: not). */
  checked: boolean;
  repository?: string;
  reference?: string;
  digest?: string;
  media_type?: string | null;
  size_bytes?: number | null;
}

export type ImageCheck = { ok: true; digest: string | null; report: ImageReport } | { ok: false; message: string; report: ImageReport };

/** Attempts at reaching the registry before the build fails for it. */
const ATTEMPTS = 3;

/**
 * The build step of an internal_container revision: the image must be in this service's registry,
 * under the deployment's repositories, and the registry must have its manifest; its digest is
 * recorded. With no registry configured nothing is checked (the embedded simulator).
 */
export async function checkImage(
  registry: Registry | null,
  owner: { workspaceId: string; id: string },
  imageUri: string,
  signal: AbortSignal,
): Promise<ImageCheck> {
  const report: ImageReport = { image_uri: imageUri, checked: registry !== null };
  if (!registry) return { ok: true, digest: null, report };
  const ref = parseImageReference(imageUri);
  if ("error" in ref) return { ok: false, message: `image_uri '${imageUri}' is not an image reference: ${ref.error}.`, report };
  Object.assign(report, { repository: ref.repository, reference: manifestReference(ref) });
  const push = `Push it to the registry_url of POST /v2/deployments/{deployment_id}/push-token (${registry.registryUrl(owner)}/<repository>:<tag>), then PATCH source_revision_config.image_uri.`;
  if (ref.host !== registry.host.toLowerCase()) {
    return { ok: false, message: `image_uri '${imageUri}' is not in this service's registry ${registry.host}. ${push}`, report };
  }
  if (!registry.owns(owner, ref)) {
    return { ok: false, message: `image_uri '${imageUri}' is not one of this deployment's repositories (${registry.repositoryPrefix(owner)}/…). ${push}`, report };
  }
  let lookup: ManifestLookup | null = null;
  let failure = "";
  for (let attempt = 1; attempt <= ATTEMPTS && lookup === null; attempt++) {
    try {
      lookup = await registry.manifest(ref, signal);
      if (!lookup.found && lookup.status >= 500 && attempt < ATTEMPTS) {
        failure = lookup.reason;
        lookup = null;
      }
    } catch (err) {
      signal.throwIfAborted();
      failure = err instanceof Error ? (err.cause instanceof Error ? err.cause.message : err.message) : String(err);
    }
    if (lookup === null && attempt < ATTEMPTS) await sleep(500 * 2 ** (attempt - 1), undefined, { signal });
  }
  if (lookup === null) return { ok: false, message: `Could not reach the registry at ${registry.url} to find image_uri '${imageUri}': ${failure}.`, report };
  if (!lookup.found) {
    const what =
      lookup.status === 404
        ? `is not in the registry: no manifest '${manifestReference(ref)}' in repository '${ref.repository}'. ${push}`
        : `could not be looked up: ${lookup.reason}.`;
    return { ok: false, message: `image_uri '${imageUri}' ${what}`, report };
  }
  Object.assign(report, { digest: lookup.digest, media_type: lookup.mediaType, size_bytes: lookup.size });
  return { ok: true, digest: lookup.digest, report };
}
