import type { OAuthProvider, Prisma } from "../generated/prisma/client.js";
import type { Logger } from "../logger.js";
import type { Tenant } from "./auth.js";
import type { CoreDeps } from "./context.js";
import { badRequest, conflict, notFound } from "./errors.js";
import { inOrder, uuidsOnly } from "./batch-reads.js";
import { expectedIssuer, type OAuthClient, type ProviderEndpoints } from "./oauth-client.js";
import type { TokenVault } from "./oauth-tokens.js";
import { type KeysetArgs, type KeysetPage, keysetPage, newestFirst } from "./pagination.js";
import { isUniqueViolation } from "./prisma-errors.js";
import { mcpDiscoverSchema, providerCreateSchema, providerUpdateSchema } from "./schemas/oauth.js";
import type { SecretBox } from "./secrets.js";
import { parseInput } from "./validation.js";

export type { OAuthProvider };

export interface OAuthSettings {
  /** The base URL browsers reach this service at; null: the origin of the request that starts a flow. */
  publicUrl: string | null;
  /** Whether provider endpoints may be http:// (https only otherwise). */
  allowHttp: boolean;
  /** How long an authorization flow may take, from its start to the provider's callback. */
  flowTtlSeconds: number;
  logger: Logger;
}

/** Fields of a request body whose values are secrets: a 422 never echoes them. */

/** Where a provider sends the browser back: this service's callback for that provider. */
export function redirectUri(settings: OAuthSettings, origin: string | null, providerSlug: string): string {
  const base = settings.publicUrl ?? origin;
  if (!base) throw badRequest("Set PUBLIC_URL: the service does not know the address browsers reach it at, to send them back from the provider.");
  return `${base.replace(/\/+$/, "")}/v2/auth/callback/${encodeURIComponent(providerSlug)}`;
}

/**
 * What a grant (a flow's code, the token it makes) began under: the provider's token and revocation
 * endpoints when its owner began to authorize, and the issuer its answers are checked against;
 * flows and tokens keep them. A provider is its workspace's, and any caller of it may change them
 * since; the grant is its owner's alone. It is sent, with the provider's client credentials, only
 * where it began and only while the provider still has those endpoints (stillAt): not to an
 * endpoint set since, nor with a client secret set since to an endpoint the provider no longer has.
 * Its answers are checked against its own issuer (null for grants from before it was kept: the
 * provider's), so that auth_url moved since to another name of the server does not refuse them.
 */
export type GrantEndpoints = Pick<OAuthProvider, "tokenUrl" | "revocationUrl" | "issuer">;

/** What a grant begun now keeps of the provider. */
export const grantEndpointsOf = (p: OAuthProvider): GrantEndpoints => ({ tokenUrl: p.tokenUrl, revocationUrl: p.revocationUrl, issuer: expectedIssuer(p) });

/**
 * Whether the provider still has the endpoints the grant began under, both: an exchange or refresh
 * may end in a revocation (an answer that cannot be kept), and a revocation sends the client's
 * credentials too.
 */
export const stillAt = (p: OAuthProvider, grant: GrantEndpoints): boolean => p.tokenUrl === grant.tokenUrl && p.revocationUrl === grant.revocationUrl;

/** What the OAuth client needs of a provider row, its client secret opened; for a grant, checked against its issuer. */
export const endpointsOf = (secrets: SecretBox, p: OAuthProvider, grant?: GrantEndpoints): ProviderEndpoints => ({
  providerId: p.providerId,
  clientId: p.clientId,
  clientSecret: p.clientSecret ? secrets.open(p.clientSecret) : null,
  authUrl: p.authUrl,
  tokenUrl: p.tokenUrl,
  revocationUrl: p.revocationUrl,
  issuer: grant?.issuer ?? p.issuer,
  tokenEndpointAuthMethod: p.tokenEndpointAuthMethod,
});

/**
 * A provider as REST names it (its provider_id, the path's) or as GraphQL does (its row's id). An
 * act on a provider named by id reaches that row only: the id read first and then its provider_id
 * acted on could reach another provider, created under the provider_id after the first was deleted.
 */
export type ProviderRef = { providerId: string } | { id: string };
const whereRef = (ref: ProviderRef) => ("id" in ref ? { id: ref.id } : { providerId: ref.providerId });
const nameOf = (ref: ProviderRef) => ("id" in ref ? ref.id : ref.providerId);

/** A workspace's OAuth providers: configured by hand, or discovered from an MCP server and registered there. */
export class ProviderService {
  constructor(
    private readonly deps: CoreDeps,
    private readonly settings: OAuthSettings,
    private readonly client: OAuthClient,
    private readonly vault: TokenVault,
  ) {}

  list(tenant: Tenant): Promise<OAuthProvider[]> {
    return this.deps.data(tenant).oAuthProvider.findMany({ orderBy: newestFirst });
  }

  keyset(tenant: Tenant, args: KeysetArgs): Promise<KeysetPage<OAuthProvider>> {
    return keysetPage(args, (q) =>
      this.deps.data(tenant).oAuthProvider.findMany({ where: q.where, orderBy: q.orderBy, take: q.take }),
    );
  }

  count(tenant: Tenant): Promise<number> {
    return this.deps.data(tenant).oAuthProvider.count();
  }

  get(tenant: Tenant, providerId: string): Promise<OAuthProvider> {
    return this.getBy(tenant, { providerId });
  }

  /** The provider a ProviderRef names, in the caller's workspace. */
  private async getBy(tenant: Tenant, ref: ProviderRef): Promise<OAuthProvider> {
    const provider = await this.deps.data(tenant).oAuthProvider.findFirst({ where: whereRef(ref) });
    if (!provider) throw notFound("Provider", nameOf(ref));
    return provider;
  }

  async byIds(tenant: Tenant, ids: readonly string[]): Promise<(OAuthProvider | null)[]> {
    return inOrder(ids, await this.deps.data(tenant).oAuthProvider.findMany({ where: { id: { in: uuidsOnly(ids) } } }));
  }

  find(tenant: Tenant, providerId: string): Promise<OAuthProvider | null> {
    return this.deps.data(tenant).oAuthProvider.findUnique({ where: { workspaceId_providerId: { workspaceId: tenant.workspaceId, providerId } } });
  }

  async create(tenant: Tenant, body: unknown): Promise<OAuthProvider> {
    const input = parseInput(providerCreateSchema(this.settings.allowHttp), body, "body");
    return this.insert(tenant, input.provider_id, {
      name: input.name,
      clientId: input.client_id,
      clientSecret: input.client_secret ? this.deps.secrets.seal(input.client_secret) : null,
      authUrl: input.auth_url,
      tokenUrl: input.token_url,
      usesPkce: input.uses_pkce,
      codeChallengeMethod: input.code_challenge_method,
      providerType: input.provider_type ?? null,
      tokenEndpointAuthMethod: input.token_endpoint_auth_method,
      revocationUrl: input.revocation_url ?? null,
    });
  }

  /** POST /v2/auth/providers/mcp-discover: nothing is stored unless discovery and registration succeed. */
  async discover(tenant: Tenant, body: unknown, origin: string | null): Promise<OAuthProvider> {
    const input = parseInput(mcpDiscoverSchema(this.settings.allowHttp), body, "body");
    if (await this.find(tenant, input.provider_id)) throw taken(input.provider_id);
    const found = await this.client.discoverAndRegister(input.mcp_server_url, {
      clientName: input.name,
      redirectUri: redirectUri(this.settings, origin, input.provider_id),
    });
    // Not stored (the id taken meanwhile, say): the client registered for it goes too.
    return this.insert(tenant, input.provider_id, {
      name: input.name,
      clientId: found.clientId,
      clientSecret: found.clientSecret ? this.deps.secrets.seal(found.clientSecret) : null,
      authUrl: found.authUrl,
      tokenUrl: found.tokenUrl,
      revocationUrl: found.revocationUrl,
      issuer: found.issuer,
      usesPkce: found.usesPkce,
      codeChallengeMethod: "S256",
      mcpServerUrl: input.mcp_server_url,
      tokenEndpointAuthMethod: found.tokenEndpointAuthMethod,
      isDynamicClient: true,
    }).catch(async (err: unknown) => {
      await found.unregister();
      throw err;
    });
  }

  async update(tenant: Tenant, ref: ProviderRef, body: unknown): Promise<OAuthProvider> {
    const input = parseInput(providerUpdateSchema(this.settings.allowHttp), body, "body");
    const data = {
      ...(input.name != null && { name: input.name }),
      ...(input.client_id != null && { clientId: input.client_id }),
      ...(input.client_secret != null && { clientSecret: this.deps.secrets.seal(input.client_secret) }),
      ...(input.auth_url != null && { authUrl: input.auth_url }),
      ...(input.token_url != null && { tokenUrl: input.token_url }),
      ...(input.uses_pkce != null && { usesPkce: input.uses_pkce }),
      ...(input.code_challenge_method != null && { codeChallengeMethod: input.code_challenge_method }),
      ...(input.revocation_url != null && { revocationUrl: input.revocation_url }),
    };
    // Nothing to change is not an update (Prisma would not run one, and count none).
    if (Object.keys(data).length === 0) return this.getBy(tenant, ref);
    const { count } = await this.deps.data(tenant).oAuthProvider.updateMany({ where: whereRef(ref), data });
    if (count === 0) throw notFound("Provider", nameOf(ref));
    return this.getBy(tenant, ref);
  }

  /** Forgets the provider, its tokens and flows, then revokes the tokens there (where it can). */
  async delete(tenant: Tenant, ref: ProviderRef): Promise<{ deletedTokens: number }> {
    const provider = await this.getBy(tenant, ref);
    const taken = await this.deps.data(tenant).$transaction(async (tx) => {
      // Locked first: a code exchange storing its token now waits for this to commit, then finds the provider gone.
      const locked = await tx.$queryRaw<unknown[]>`SELECT id FROM oauth_providers WHERE id = ${provider.id}::uuid FOR UPDATE`;
      // Gone since it was read: another deletion took it (and its tokens) first; this one deleted nothing.
      if (locked.length === 0) throw notFound("Provider", nameOf(ref));
      const tokens = await this.vault.take(tx, { oauthProviderId: provider.id });
      await tx.oAuthProvider.deleteMany({ where: { id: provider.id } });
      return tokens;
    });
    await this.vault.revoke(taken);
    return { deletedTokens: taken.length };
  }

  private async insert(tenant: Tenant, providerId: string, data: Omit<Prisma.OAuthProviderUncheckedCreateInput, "workspaceId" | "organizationId" | "providerId">) {
    try {
      return await this.deps.data(tenant).oAuthProvider.create({
        data: { ...data, workspaceId: tenant.workspaceId, organizationId: tenant.organizationId, providerId },
      });
    } catch (err) {
      if (isUniqueViolation(err)) throw taken(providerId);
      throw err;
    }
  }
}

const taken = (providerId: string) => conflict(`A provider with provider_id '${providerId}' already exists in this workspace.`, ["body", "provider_id"]);
