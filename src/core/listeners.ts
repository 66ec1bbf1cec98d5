import { z } from "zod";
import type { Listener } from "../generated/prisma/client.js";
import type { Tenant } from "./auth.js";
import type { CoreDeps } from "./context.js";
import { conflict, notFound } from "./errors.js";
import { newestFirst, type OffsetPage } from "./pagination.js";
import { isUniqueViolation } from "./prisma-errors.js";
import { parseInput } from "./validation.js";

export type { Listener };

const namespaces = z.array(z.string().min(1).max(63)).max(100);
/** compute_config as stored and shown: `k8s_namespaces` always present, null for the listener's own namespace. */
export const computeConfigSchema = z.object({ k8s_namespaces: namespaces.nullable() });
/** `k8s_namespaces` may be null or left out (the listener's own namespace); stored with the key always present. */
const computeConfig = z
  .object({ k8s_namespaces: namespaces.nullish() })
  .transform((c): z.output<typeof computeConfigSchema> => ({ k8s_namespaces: c.k8s_namespaces ?? null }));

/** What the real API takes: compute_config is required, version optional and nullable. */
export const listenerCreateSchema = z.object({
  compute_type: z.enum(["k8s"]),
  compute_id: z.string().min(1).max(253),
  compute_config: computeConfig,
  version: z.string().min(1).max(100).nullish(),
});

/** PATCH changes only `version` and `compute_config`. */
export const listenerUpdateSchema = z.object({
  version: z.string().min(1).max(100).nullish(),
  compute_config: computeConfig.nullish(),
});

export class ListenerService {
  constructor(private readonly deps: CoreDeps) {}

  async create(tenant: Tenant, body: unknown): Promise<Listener> {
    const input = parseInput(listenerCreateSchema, body, "body");
    try {
      return await this.deps.data(tenant).listener.create({
        data: {
          workspaceId: tenant.workspaceId,
          computeType: input.compute_type,
          computeId: input.compute_id,
          computeConfig: input.compute_config,
          version: input.version ?? null,
        },
      });
    } catch (err) {
      if (isUniqueViolation(err)) throw conflict(`A listener with compute_id '${input.compute_id}' already exists.`, ["body", "compute_id"]);
      throw err;
    }
  }

  async get(tenant: Tenant, id: string): Promise<Listener> {
    const listener = await this.deps.data(tenant).listener.findFirst({ where: { id } });
    if (!listener) throw notFound("Listener", id);
    return listener;
  }

  async list(tenant: Tenant, page: { limit: number; offset: number }): Promise<OffsetPage<Listener>> {
    const resources = await this.deps.data(tenant).listener.findMany({
      orderBy: newestFirst,
      take: page.limit,
      skip: page.offset,
    });
    return { resources, offset: page.offset + resources.length };
  }

  /** PATCH: null and omitted fields keep their values; a body that changes nothing answers the listener as it is. */
  async update(tenant: Tenant, id: string, body: unknown): Promise<Listener> {
    const input = parseInput(listenerUpdateSchema, body ?? {}, "body");
    const data = {
      ...(input.version != null && { version: input.version }),
      ...(input.compute_config != null && { computeConfig: input.compute_config }),
    };
    if (Object.keys(data).length === 0) return this.get(tenant, id);
    const { count } = await this.deps.data(tenant).listener.updateMany({ where: { id }, data });
    if (count === 0) throw notFound("Listener", id);
    return this.get(tenant, id);
  }

  async delete(tenant: Tenant, id: string): Promise<void> {
    const { count } = await this.deps.data(tenant).listener.deleteMany({ where: { id } });
    if (count === 0) throw notFound("Listener", id);
  }
}
