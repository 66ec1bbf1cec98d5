import { z } from "zod";

export const AGENT_ID_PATTERN = /^[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
// Like pydantic, a length error is the only one reported for the value.
export const agentIdSchema = z.string().min(1, { abort: true }).max(63, { abort: true }).regex(AGENT_ID_PATTERN);

export const AGENT_ENVIRONMENTS = ["local", "development", "staging", "production"] as const;
export type AgentEnvironment = (typeof AGENT_ENVIRONMENTS)[number];
export const agentEnvironmentSchema = z.enum(AGENT_ENVIRONMENTS);

export const agentSchema = z.object({ agent_id: agentIdSchema, environment: agentEnvironmentSchema });
export type Agent = z.output<typeof agentSchema>;
