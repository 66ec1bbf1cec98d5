import { z } from "zod";
import type { AgentConnection } from "../generated/prisma/client.js";
import type { Tenant } from "./auth.js";
import type { CoreDeps } from "./context.js";
import { conflict, notFound } from "./errors.js";
import { type KeysetArgs, type KeysetPage, keysetPage, newestFirst } from "./pagination.js";
import { isUniqueViolation, violatedForeignKey } from "./prisma-errors.js";
import type { TokenVault } from "./oauth-tokens.js";
import { parseInput } from "./validation.js";
import { uuidsOnly } from "./batch-reads.js";

/** SPEC.md's agent id rule (the deployments filter's): connections name their agents by it. */
export { agentIdSchema } from "./schemas/agent.js";

export type { AgentConnection };

export const connectionCreateSchema = z.object({
  // Printable and without whitespace: it is an identifier, and PostgreSQL text cannot hold NUL.
  oauth_token_id: z
    .string()
    .min(1, { abort: true })
    .max(255, { abort: true })
    .regex(/^[^\s\p{Cc}]+$/u),
});

export class ConnectionService {
  constructor(
    private readonly deps: CoreDeps,
    private readonly vault: TokenVault,
  ) {}

  /** Every connection of the agent in the caller's workspace, newest first. */
  async list(tenant: Tenant, agentId: string): Promise<AgentConnection[]> {
    return this.deps.data(tenant).agentConnection.findMany({
      where: { agentId },
      orderBy: newestFirst,
    });
  }

  /** Relay-style paging over one agent's connections (GraphQL). */
  keyset(tenant: Tenant, agentId: string, args: KeysetArgs): Promise<KeysetPage<AgentConnection>> {
    return keysetPage(args, (q) =>
      this.deps.data(tenant).agentConnection.findMany({
        where: { AND: [{ agentId }, q.where] },
        orderBy: q.orderBy,
        take: q.take,
      }),
    );
  }

  /**
   * Connects one of the caller's OAuth tokens to the agent: its provider, account label, scopes and
   * expiry are the token's (and follow it when it is refreshed or relabelled). A token that is not
   * the caller's, in this workspace, is not found; so is one deleted meanwhile (the foreign key to
   * oauth_tokens: a connection never outlives its token).
   */
  async create(tenant: Tenant, agentId: string, body: unknown): Promise<AgentConnection> {
    const input = parseInput(connectionCreateSchema, body, "body");
    const [token] = await this.vault.byIds(tenant, [input.oauth_token_id]);
    if (!token) throw notFound("OAuth token", input.oauth_token_id, ["body", "oauth_token_id"]);
    try {
      return await this.deps.data(tenant).agentConnection.create({
        data: {
          workspaceId: tenant.workspaceId,
          agentId,
          oauthTokenId: token.id,
          providerId: token.providerId,
          providerAccountLabel: token.providerAccountLabel,
          scopes: token.scopes,
          expiresAt: token.expiresAt,
          createdBy: tenant.actor,
        },
      });
    } catch (err) {
      if (isUniqueViolation(err)) {
        throw conflict(`OAuth token '${input.oauth_token_id}' is already connected to agent '${agentId}'.`, ["body", "oauth_token_id"]);
      }
      // The token was deleted after it was read: the insert waited for that deletion to commit.
      if (violatedForeignKey(err) === "agent_connections_oauth_token_id_fkey") throw notFound("OAuth token", input.oauth_token_id, ["body", "oauth_token_id"]);
      throw err;
    }
  }

  async delete(tenant: Tenant, agentId: string, connectionId: string): Promise<void> {
    // Connection ids are UUIDs: any other names none (and would not reach a uuid column).
    const [id] = uuidsOnly([connectionId]);
    const { count } = id ? await this.deps.data(tenant).agentConnection.deleteMany({ where: { id, agentId } }) : { count: 0 };
    if (count === 0) throw notFound("Connection", connectionId);
  }
}
