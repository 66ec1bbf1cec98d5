import { conflict, type ValidationIssue } from "./errors.js";
import type { Tx } from "./publish.js";

/**
 * A deployment is served at the host of its URL, so a host serves one deployment: a custom_url may
 * not name a host another deployment (of any workspace) has as its custom URL's, nor one under
 * DEPLOYMENT_DOMAIN, where the service makes every deployment's URL itself (a custom URL there could
 * take a deployment's generated URL, or one a deployment will be given). Hosts compare as URL
 * parsing gives them (lower case, without port, user or path), and without a trailing dot, which
 * names the same host in DNS.
 */

const CUSTOM_URL_LOC = ["body", "source_config", "custom_url"];

/** The host a custom URL is served at, or null without one (or one that does not parse: validation refuses those). */
export function customHost(customUrl: string | null | undefined): string | null {
  if (!customUrl || !URL.canParse(customUrl)) return null;
  return new URL(customUrl).hostname.replace(/\.$/, "") || null;
}

/** The custom URL's host is under the deployment domain (the domain itself included). */
export function customUrlIssues(customUrl: string | null | undefined, domain: string): ValidationIssue[] {
  const host = customHost(customUrl);
  const under = domain.toLowerCase();
  if (host === null || (host !== under && !host.endsWith(`.${under}`))) return [];
  return [
    {
      loc: CUSTOM_URL_LOC,
      type: "value_error",
      msg: `Value error, custom_url may not be a host under ${domain}: the service makes the serving URLs there`,
      input: customUrl,
    },
  ];
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
  if (taken.length > 0) throw conflict("The host of this custom_url serves another deployment already: choose another custom_url.", loc ?? undefined);
}
