import { Hono } from "hono";
import { z } from "zod";
import { type AgentConnection, type ConnectionService, agentIdSchema, connectionCreateSchema } from "../core/connections.js";
import { describe, notFound, nullableTimestamp, refused, timestamp } from "./docs.js";
import { type Env, iso, pathParams, readJson } from "./http.js";

const agentParam = z.object({ agent_id: agentIdSchema });
/** A plain string in the reference, not a UUID: one that names no connection is a 404, whatever its form. */
const connectionParam = z.object({ agent_id: agentIdSchema, connection_id: z.string().max(100) });

const BASE = "/v2/auth/agents/:agent_id/connections";

export const presentConnection = (c: AgentConnection): z.input<typeof connectionSchema> => ({
  id: c.id,
  agent_id: c.agentId,
  oauth_token_id: c.oauthTokenId,
  provider_id: c.providerId,
  provider_account_label: c.providerAccountLabel,
  scopes: c.scopes,
  expires_at: iso(c.expiresAt),
  created_by: c.createdBy,
  created_at: iso(c.createdAt),
});

const connectionSchema = z.object({
  id: z.uuid(),
  agent_id: z.string(),
  oauth_token_id: z.string(),
  provider_id: z.string(),
  provider_account_label: z.string().nullable(),
  scopes: z.array(z.string()),
  expires_at: nullableTimestamp,
  created_by: z.string(),
  created_at: timestamp,
});
const tag = "Agent Connections (v2)";

export function connectionRoutes(connections: ConnectionService) {
  return new Hono<Env>()
    .get(BASE, describe({ tag, operationId: "list_connections_v2_auth_agents__agent_id__connections_get", summary: "List an agent's connections", params: agentParam, responses: { 200: { description: "The connections", schema: z.object({ data: z.array(connectionSchema) }) } } }, async (c) => {
      const { agent_id } = pathParams(c, agentParam);
      return c.json({ data: (await connections.list(c.var.tenant, agent_id)).map(presentConnection) });
    }))
    .post(BASE, describe({ tag, operationId: "create_connection_v2_auth_agents__agent_id__connections_post", summary: "Connect an agent to an OAuth token", params: agentParam, body: connectionCreateSchema, idempotent: true, responses: { 201: { description: "The connection", schema: connectionSchema }, 404: notFound, 409: refused("The token is already connected to this agent") } }, async (c) => {
      const { agent_id } = pathParams(c, agentParam);
      const connection = await connections.create(c.var.tenant, agent_id, await readJson(c));
      return c.json(presentConnection(connection), 201);
    }))
    .delete(`${BASE}/:connection_id`, describe({ tag, operationId: "remove_connection_v2_auth_agents__agent_id__connections__connection_id__delete", summary: "Delete a connection", params: connectionParam, responses: { 204: { description: "Deleted" }, 404: notFound } }, async (c) => {
      const { agent_id, connection_id } = pathParams(c, connectionParam);
      await connections.delete(c.var.tenant, agent_id, connection_id);
      return c.body(null, 204);
    }));
}
