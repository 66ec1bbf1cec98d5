import { createHash, randomBytes } from "node:crypto";
import type { Tenant } from "./auth.js";
import type { CoreDeps } from "./context.js";
import { DELETING } from "./deployment-status.js";
import { badRequest, CoreError, notFound } from "./errors.js";
import type { Registry } from "./registry/index.js";
import { grant, parseScopes } from "./registry/scopes.js";

/** How long a push token lets `docker login` and `docker push` in: long enough for a large push. */
export const PUSH_TOKEN_TTL_MS = 60 * 60_000;

/** The user name the command-line tool logs in with; the push token is the password. */
export const PUSH_TOKEN_USER = "oauth2accesstoken";

/** COMPAT.md: the tool shows this phrase as "not created by deploy". */
export const ONLY_INTERNAL_CONTAINER = "only available for 'internal_container' source deployments";

export const REGISTRY_NOT_CONFIGURED =
  "No container registry is configured: set REGISTRY_URL to the registry whose token server this service is (see README.md, Container registry).";

const hashToken = (token: string) => createHash("sha256").update(token).digest("hex");

export interface PushToken {
  token: string;
  registryUrl: string;
  expiresAt: Date;
}

export interface RegistryToken {
  token: string;
  expiresIn: number;
  issuedAt: Date;
}

const unauthenticated = (message: string) => new CoreError("UNAUTHENTICATED", message);

/**
 * Push tokens (POST …/push-token) and the registry's token server (GET /registry/token): a push
 * token is bound to one deployment, lasts an hour, and is kept only as its SHA-256; exchanged at
 * the token server, it buys a registry token for push and pull of that deployment's repositories.
 */
export class PushTokenService {
  constructor(
    private readonly deps: CoreDeps,
    private readonly registry: Registry | null,
  ) {}

  async create(tenant: Tenant, deploymentId: string): Promise<PushToken> {
    const deployment = await this.deps.data(tenant).deployment.findFirst({
      where: { id: deploymentId },
      select: { id: true, workspaceId: true, source: true, status: true },
    });
    if (!deployment) throw notFound("Deployment", deploymentId);
    if (deployment.source !== "internal_container") {
      throw badRequest(`Push tokens are ${ONLY_INTERNAL_CONTAINER}; deployment ${deploymentId} is '${deployment.source}'.`);
    }
    if (deployment.status === DELETING) throw badRequest(`Deployment ID ${deploymentId} is being deleted.`);
    if (!this.registry) throw badRequest(REGISTRY_NOT_CONFIGURED);
    const token = `dcp_push_${randomBytes(32).toString("base64url")}`;
    const now = Date.now();
    const expiresAt = new Date(now + PUSH_TOKEN_TTL_MS);
    // Expired tokens, of any workspace, are worth nothing: each new one clears them away.
    await this.deps.prisma.pushToken.deleteMany({ where: { expiresAt: { lt: new Date(now) } } });
    await this.deps.data(tenant).pushToken.create({ data: { workspaceId: deployment.workspaceId, deploymentId: deployment.id, tokenHash: hashToken(token), expiresAt } });
    return { token, registryUrl: this.registry.registryUrl(deployment), expiresAt };
  }

  /**
   * The token server: Basic credentials `oauth2accesstoken:<push token>`, the registry's service
   * name and the scopes it asks for. With no scope (`docker login`) the answer grants nothing and
   * only proves the credentials; otherwise it grants push and pull of the requested repositories
   * that are the deployment's, and leaves every other scope out.
   */
  async exchange(request: { authorization: string | null; service: string | null; scopes: string[] }): Promise<RegistryToken> {
    if (!this.registry) throw badRequest(REGISTRY_NOT_CONFIGURED);
    const registry = this.registry;
    if (request.service !== null && request.service !== registry.service) {
      throw badRequest(`This token server issues tokens for the registry service '${registry.service}', not '${request.service}'.`);
    }
    const scopes = parseScopes(request.scopes);
    if ("error" in scopes) throw badRequest(`Invalid scope: ${scopes.error}.`);
    const secret = basicPassword(request.authorization);
    if (secret === null) {
      throw unauthenticated(`Log in with the user name ${PUSH_TOKEN_USER} and a push token (POST /v2/deployments/{deployment_id}/push-token) as the password.`);
    }
    const found = await this.deps.prisma.pushToken.findUnique({
      where: { tokenHash: hashToken(secret) },
      select: { id: true, expiresAt: true, deployment: { select: { id: true, workspaceId: true, status: true } } },
    });
    if (!found || found.expiresAt.getTime() <= Date.now() || found.deployment.status === DELETING) {
      throw unauthenticated("Invalid or expired push token: get a new one with POST /v2/deployments/{deployment_id}/push-token.");
    }
    const access = grant(scopes, registry.repositoryPrefix(found.deployment), ["pull", "push"]);
    return registry.token(`push_token:${found.id}`, access);
  }
}

/** The password of `Authorization: Basic` for the push-token user, or null. */
function basicPassword(authorization: string | null): string | null {
  const encoded = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(authorization ?? "")?.[1];
  if (!encoded) return null;
  const decoded = Buffer.from(encoded, "base64").toString("utf8");
  const colon = decoded.indexOf(":");
  if (colon === -1 || decoded.slice(0, colon) !== PUSH_TOKEN_USER) return null;
  const password = decoded.slice(colon + 1);
  return password === "" ? null : password;
}
