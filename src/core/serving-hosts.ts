import { conflict, type ValidationIssue } from "./errors.js";
import type { Tx } from "./publish.js";

/**
 * A deployment is served at the host of its URL, so a host serves one deployment: a custom_url may
 * not name a host another deployment (of any workspace) has as its custom URL's, nor one under
 * DEPLOYMENT_DOMAIN, where the service makes every deployment's URL itself (a custom URL there could
 * take a deployment's generated URL, or one a deployment will be given). A new custom URL's host must
 * be a DNS host name, so that one name has one spelling (an internationalised name in its xn-- form).
 *
 * Each deployment's host is kept in deployments.custom_host by the database itself (a trigger, as
 * the SQL function deployment_custom_host reads it: migration 20261207070000), so that replicas of
 * earlier code keep it right too. customHost below reads a URL the same way.
 */

const CUSTOM_URL_LOC = ["body", "source_config", "custom_url"];

/** Scheme, optional user, then the host up to a port, path, query or fragment: deployment_custom_host's pattern. */
const HOST_OF_URL = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/(?:[^@/?#]*@)?(\[[^\]/?#]*\]|[^:/?#]*)/;

/** Labels of letters, digits and inner hyphens, at most 63 characters each and 253 in all (RFC 1123). */
const HOST_NAME = /^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/;

/** Longer than a host name may be: no host kept (nor indexed) for it. */
const MAX_HOST_LENGTH = 253;

/** The host part of a URL as written: lower case, without a trailing dot. */
function hostPart(customUrl: string | null | undefined): string | null {
  const host = customUrl ? HOST_OF_URL.exec(customUrl)?.[1] : undefined;
  return host?.toLowerCase().replace(/\.$/, "") || null;
}

/** The host a custom URL is served at (lower case, without a trailing dot), or null without one. */
export function customHost(customUrl: string | null | undefined): string | null {
  const host = hostPart(customUrl);
  return host !== null && host.length <= MAX_HOST_LENGTH ? host : null;
}

/**
 * What is wrong with a custom URL being set: no host where customHost reads one, a host that is not
 * a host name (or that a URL parser reads otherwise, as it does `https://a.example\@b.example` or
 * `https://0x7f.1`), an IP address, or a host under the deployment domain.
 */
export function customUrlIssues(customUrl: string | null | undefined, domain: string): ValidationIssue[] {
  if (!customUrl) return [];
  const issue = (msg: string): ValidationIssue[] => [{ loc: CUSTOM_URL_LOC, type: "value_error", msg: `Value error, ${msg}`, input: customUrl }];
  const host = hostPart(customUrl);
  // `https:///shop.example` has no host where a host is read (a URL parser reads one further on).
  if (host === null) return issue("custom_url must name its host right after the scheme: https://host/…");
  const parsed = URL.canParse(customUrl) ? new URL(customUrl).hostname.replace(/\.$/, "") : null;
  if (!HOST_NAME.test(host) || parsed !== host) {
    return issue("custom_url's host must be a DNS host name: letters, digits, hyphens and dots (an internationalised name in its xn-- form)");
  }
  // A name's last label is never all digits (RFC 1123, 2.1): `127.0.0.1` is an address.
  if (/^\d+$/.test(host.slice(host.lastIndexOf(".") + 1))) return issue("custom_url's host must be a DNS host name, not an IP address");
  const under = domain.toLowerCase();
  if (host === under || host.endsWith(`.${under}`)) return issue(`custom_url may not be a host under ${domain}: the service makes the serving URLs there`);
  return [];
}

/**
 * Within the transaction that gives the deployment its custom URL: refuses (409) a host another
 * deployment has. Claims of one host take turns (a transaction-scoped advisory lock on it), so that
 * two deployments asking for it at once cannot both see it free. `loc` is where the request said it;
 * null for a redeploy, whose URL comes from an earlier revision and names no field of its request.
 */
export async function claimCustomHost(tx: Tx, deploymentId: string, host: string | null, loc: ValidationIssue["loc"] | null = CUSTOM_URL_LOC): Promise<void> {
  if (host === null) return;
  await tx.$executeRaw`SELECT pg_advisory_xact_lock(hashtextextended(${`custom-host:${host}`}, 0))`;
  // Across workspaces: a host is the platform's to route, not a workspace's.
  const taken = await tx.$queryRaw<unknown[]>`SELECT 1 FROM deployments WHERE custom_host = ${host} AND id <> ${deploymentId}::uuid LIMIT 1`;
  if (taken.length === 0) return;
  // A redeploy sent no custom_url: the revision's own is the one taken.
  if (loc === null) throw conflict("The host of this revision's custom_url serves another deployment now: redeploy another revision, or set another custom_url with PATCH.");
  throw conflict("The host of this custom_url serves another deployment already: choose another custom_url.", loc);
}
