/**
 * Image references and repository names as the CNCF Distribution registry reads them
 * (distribution/reference): `host[:port]/path[:tag][@digest]`. Pure.
 */

/** One path component: lower-case letters and digits, separated by `.`, `_`, `__` or dashes. */
const COMPONENT = "[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*";
const REPOSITORY = new RegExp(`^${COMPONENT}(?:/${COMPONENT})*$`);
const TAG = /^[\w][\w.-]{0,127}$/;
const DIGEST = /^[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[a-zA-Z0-9=_-]{32,}$/;
/** A registry host: a DNS name or an IPv4/[IPv6] address, with an optional port. */
const HOST = /^(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*|\[[0-9a-fA-F:.]+\])(?::[0-9]{1,5})?$/;

/** Repository names are at most 255 characters in all. */
export const MAX_REPOSITORY_LENGTH = 255;

export const isRepositoryName = (name: string) => name.length <= MAX_REPOSITORY_LENGTH && REPOSITORY.test(name);

export interface ImageReference {
  /** host[:port] as written (lower-cased). */
  host: string;
  repository: string;
  tag: string | null;
  digest: string | null;
}

/**
 * Parses `host[:port]/repository[:tag][@digest]`. The host is required: an image of this service's
 * registry is always named with it. A reference with neither tag nor digest means `latest`, as for
 * docker. Returns a reason when the text is not a reference.
 */
export function parseImageReference(text: string): ImageReference | { error: string } {
  const at = text.indexOf("@");
  const named = at === -1 ? text : text.slice(0, at);
  const digest = at === -1 ? null : text.slice(at + 1);
  if (digest !== null && !DIGEST.test(digest)) return { error: `'${digest}' is not a digest (algorithm:hex)` };
  const slash = named.indexOf("/");
  if (slash === -1) return { error: "it names no registry host (host[:port]/repository:tag)" };
  const host = named.slice(0, slash);
  if (!HOST.test(host) || !/[.:]|^localhost$/.test(host)) return { error: `'${host}' is not a registry host` };
  let repository = named.slice(slash + 1);
  let tag: string | null = null;
  const colon = repository.lastIndexOf(":");
  if (colon !== -1) {
    tag = repository.slice(colon + 1);
    repository = repository.slice(0, colon);
    if (!TAG.test(tag)) return { error: `'${tag}' is not a valid tag` };
  }
  if (!isRepositoryName(repository)) return { error: `'${repository}' is not a valid repository name` };
  return { host: host.toLowerCase(), repository, tag: tag ?? (digest ? null : "latest"), digest };
}

/** The name of the manifest to ask for: the digest when pinned, else the tag. */
export const manifestReference = (ref: ImageReference) => ref.digest ?? ref.tag ?? "latest";

/** `repository` is `prefix` itself or a repository under it. */
export const isWithin = (repository: string, prefix: string) => repository === prefix || repository.startsWith(`${prefix}/`);
