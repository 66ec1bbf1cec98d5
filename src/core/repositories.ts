import { z } from "zod";
import type { CodehostRepository } from "../generated/prisma/client.js";
import type { Tenant } from "./auth.js";
import { groupedInOrder } from "./batch-reads.js";
import type { CoreDeps } from "./context.js";
import { notFound } from "./errors.js";
import { parseInput } from "./validation.js";

export type { CodehostRepository };

/** Repositories one installation may register: a large organisation's, within the body size limit. */
export const MAX_REPOSITORIES = 5000;

const repositorySchema = z.object({
  // The provider's repository id (PostgreSQL INTEGER).
  id: z.number().int().min(1).max(2_147_483_647),
  name: z.string().min(1, { abort: true }).max(255, { abort: true }).regex(/^[^\s/\p{Cc}]+$/u),
  owner: z.string().min(1, { abort: true }).max(255, { abort: true }).regex(/^[^\s/\p{Cc}]+$/u),
  url: z.url({ protocol: /^https?$/, error: "must be an http(s) URL" }).max(2048),
  default_branch: z.string().min(1, { abort: true }).max(255, { abort: true }).regex(/^[^\s\p{Cc}]+$/u).default("main"),
});

export const repositoryListSchema = z
  .array(repositorySchema)
  .max(MAX_REPOSITORIES)
  .superRefine((repos, ctx) => {
    const seen = new Set<number>();
    repos.forEach((r, i) => {
      if (seen.has(r.id)) ctx.addIssue({ code: "custom", path: [i, "id"], input: r.id, message: `repository id ${r.id} is listed twice` });
      seen.add(r.id);
    });
  });
export type RepositoryInput = z.output<typeof repositorySchema>;

export const repositorySetSchema = z.object({ repositories: repositoryListSchema });

/** Repository rows for an installation, from the request's snake_case entries. */
export const repositoryRows = (workspaceId: string, integrationId: string, repos: RepositoryInput[]) =>
  repos.map((r) => ({
    workspaceId,
    integrationId,
    repositoryId: r.id,
    name: r.name,
    owner: r.owner,
    url: r.url,
    defaultBranch: r.default_branch,
  }));

const byOwnerAndName = [{ owner: "asc" as const }, { name: "asc" as const }, { repositoryId: "asc" as const }];

/**
 * The repositories each installation gives access to. The provider's list is not fetched: whoever
 * registers the installation (a provisioning script, the provider's webhook relay) registers its
 * repositories with it, and replaces the set whenever access changes at the provider.
 */
export class RepositoryService {
  constructor(private readonly deps: CoreDeps) {}

  /** The installation's repositories, by owner and name; 404 for an installation not in the workspace. */
  async list(tenant: Tenant, integrationId: string): Promise<CodehostRepository[]> {
    await this.requireInstallation(tenant, integrationId);
    return this.deps.data(tenant).codehostRepository.findMany({ where: { integrationId }, orderBy: byOwnerAndName });
  }

  /**
   * The repositories of many installations at once (GraphQL), each list by owner and name; null when
   * they hold more than `atMost` in all (none are read past it). Installations hold up to
   * MAX_REPOSITORIES each, and a page of a hundred of them would be half a million rows.
   */
  async byInstallations(tenant: Tenant, integrationIds: readonly string[], atMost: number): Promise<CodehostRepository[][] | null> {
    const rows = await this.deps.data(tenant).codehostRepository.findMany({
      where: { integrationId: { in: [...integrationIds] } },
      orderBy: byOwnerAndName,
      take: atMost + 1,
    });
    return rows.length > atMost ? null : groupedInOrder(integrationIds, rows, (row) => row.integrationId);
  }

  /**
   * PUT …/repositories: the installation's repositories become exactly those given, and the answer is
   * that set. Concurrent replaces of one installation's set run one after another, on the
   * installation's row lock: under READ COMMITTED, delete-then-insert transactions do not see each
   * other's rows, so unserialised they would collide on (integration_id, repository_id) or leave the
   * union of two bodies. The last to commit wins, whole.
   */
  async replace(tenant: Tenant, integrationId: string, body: unknown): Promise<CodehostRepository[]> {
    const { repositories } = parseInput(repositorySetSchema, body, "body");
    return this.deps.data(tenant).$transaction(async (tx) => {
      // Raw SQL does not pass through the tenant door: the workspace is in the filter by hand.
      const locked = await tx.$queryRaw<{ id: string }[]>`
        SELECT id FROM codehost_installations
        WHERE id = ${integrationId}::uuid AND workspace_id = ${tenant.workspaceId}::uuid
        FOR UPDATE`;
      // The lock is the existence check too: 404 for an installation that is not the workspace's.
      if (locked.length === 0) throw notFound("Integration", integrationId);
      await tx.codehostRepository.deleteMany({ where: { integrationId } });
      await tx.codehostRepository.createMany({ data: repositoryRows(tenant.workspaceId, integrationId, repositories) });
      return tx.codehostRepository.findMany({ where: { integrationId }, orderBy: byOwnerAndName });
    });
  }

  private async requireInstallation(tenant: Tenant, integrationId: string) {
    const found = await this.deps.data(tenant).codehostInstallation.count({ where: { id: integrationId } });
    if (found === 0) throw notFound("Integration", integrationId);
  }
}
