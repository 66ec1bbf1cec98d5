import type { AgentConnection } from "../../core/connections.js";
import { notFound } from "../../core/errors.js";
import { builder } from "../builder.js";
import { mutate, type UserError, UserErrorType } from "../errors.js";
import { toRestBody } from "../input-names.js";
import { registerNode, requireId } from "../nodes.js";
import { connection, PAGE_ARGS_DESCRIPTION, pageComplexity } from "../paging.js";
import { ConnectionRef } from "./refs.js";

builder.node(ConnectionRef, {
  description: "An agent's connection to an OAuth token.",
  id: { resolve: (c) => c.id },
  fields: (t) => ({
    uuid: t.exposeID("id", { description: "The REST id (connection_id)." }),
    agentId: t.exposeString("agentId"),
    oauthTokenId: t.exposeString("oauthTokenId"),
    providerId: t.exposeString("providerId"),
    providerAccountLabel: t.exposeString("providerAccountLabel", { nullable: true }),
    scopes: t.exposeStringList("scopes"),
    expiresAt: t.expose("expiresAt", { type: "DateTime", nullable: true }),
    createdBy: t.exposeString("createdBy"),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
  }),
});

registerNode(ConnectionRef, (ctx, id) => ctx.loaders.connection.load(id));

builder.queryField("agentConnections", (t) =>
  t.connection(
    {
      type: ConnectionRef,
      description: `An agent's connections, newest first. ${PAGE_ARGS_DESCRIPTION}`,
      args: { agentId: t.arg.string({ required: true }) },
      complexity: pageComplexity,
      resolve: async (_root, { agentId, ...args }, ctx) => {
        const agent = ctx.core.batch.parseAgentId(agentId);
        return connection(
          // Cursors are this agent's own: another agent's are refused, as a forged one is.
          await ctx.core.batch.relay(ctx.tenant, `graphql:agent-connections:${agent}`, args, (keyset) => ctx.core.connections.keyset(ctx.tenant, agent, keyset)),
          () => ctx.core.batch.connectionCount(ctx.tenant, agent),
        );
      },
    },
    { name: "AgentConnectionConnection" },
    { name: "AgentConnectionEdge" },
  ),
);

const CreateInput = builder.inputType("AgentConnectionCreateInput", {
  fields: (t) => ({ oauthTokenId: t.string({ required: true, description: "The REST id (token_id) of one of the caller's OAuth tokens." }) }),
});

const CreatePayload = builder.objectRef<{ agentConnection?: AgentConnection | null; userErrors: UserError[] }>("AgentConnectionCreatePayload").implement({
  fields: (t) => ({
    agentConnection: t.field({ type: ConnectionRef, nullable: true, resolve: (p) => p.agentConnection ?? null }),
    userErrors: t.field({ type: [UserErrorType], resolve: (p) => p.userErrors }),
  }),
});

const DeletePayload = builder.objectRef<{ deletedAgentConnectionId?: string | null; userErrors: UserError[] }>("AgentConnectionDeletePayload").implement({
  fields: (t) => ({
    deletedAgentConnectionId: t.id({ nullable: true, resolve: (p) => p.deletedAgentConnectionId ?? null }),
    userErrors: t.field({ type: [UserErrorType], resolve: (p) => p.userErrors }),
  }),
});

builder.mutationFields((t) => ({
  agentConnectionCreate: t.field({
    type: CreatePayload,
    description: "Connects an OAuth token to an agent.",
    args: { agentId: t.arg.string({ required: true }), input: t.arg({ type: CreateInput, required: true }) },
    resolve: (_root, { agentId, input }, ctx) =>
      mutate(ctx, async () => ({
        agentConnection: await ctx.core.connections.create(ctx.tenant, ctx.core.batch.parseAgentId(agentId), toRestBody(input)),
      })),
  }),
  agentConnectionDelete: t.field({
    type: DeletePayload,
    description: "Disconnects the token from its agent.",
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, { id }, ctx) =>
      mutate(ctx, async () => {
        const found = await ctx.loaders.connection.load(requireId(id, "AgentConnection"));
        if (!found) throw notFound("Connection", id);
        await ctx.core.connections.delete(ctx.tenant, found.agentId, found.id);
        return { deletedAgentConnectionId: id };
      }, { notFound: "id" }),
  }),
}));
