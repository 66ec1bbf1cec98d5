import { z } from "zod";
import type { CodehostInstallation } from "../generated/prisma/client.js";
import type { Tenant } from "./auth.js";
import type { CoreDeps } from "./context.js";
import { conflict } from "./errors.js";
import { type KeysetArgs, type KeysetPage, keysetPage, newestFirst } from "./pagination.js";
import { isUniqueViolation } from "./prisma-errors.js";
import { repositoryListSchema, repositoryRows } from "./repositories.js";
import { parseInput, queryInt } from "./validation.js";

export type { CodehostInstallation };

/** Cursors of this listing are signed for this purpose only: another listing's cursor is refused. */
const CURSOR_PURPOSE = "codehost-installations";

export const installationPageSchema = z.object({
  page_size: queryInt({ min: 1, max: 100 }).default(20),
  // An empty `cursor=` is the same as none: clients pass the previous next_cursor through as is.
  cursor: z.string().nullish(),
});

/** The documented extension: a workspace registers an installation made at the provider. */
export const installationRegisterSchema = z.object({
  // PostgreSQL INTEGER: the provider's ids are 32-bit.
  installation_id: z.number().int().min(1).max(2_147_483_647),
  name: z.string().min(1).max(255),
  repository_selection: z.enum(["all", "selected"]).nullish(),
  settings_url: z.url({ protocol: /^https$/, error: "must be an https URL" }).max(2048).nullish(),
  /** The repositories it gives access to (replaced later with PUT …/{integration_id}/repositories). */
  repositories: repositoryListSchema.nullish(),
});

export interface InstallationPage {
  items: CodehostInstallation[];
  nextCursor: string | null;
}

export class InstallationService {
  constructor(private readonly deps: CoreDeps) {}

  /**
   * One REST page, newest first. `next_cursor` is the last item's signed position and is set exactly
   * when more rows follow; a cursor this server did not issue for this listing is a 422.
   */
  async page(tenant: Tenant, query: z.output<typeof installationPageSchema>): Promise<InstallationPage> {
    const after = query.cursor ? this.deps.cursors.decodeOrThrow(CURSOR_PURPOSE, query.cursor, ["query", "cursor"]) : undefined;
    const page = await this.keyset(tenant, { first: query.page_size, after });
    const last = page.items.at(-1);
    return { items: page.items, nextCursor: page.hasNextPage && last ? this.deps.cursors.encode(CURSOR_PURPOSE, last) : null };
  }

  /** Relay-style paging over the workspace's installations (REST above, GraphQL connections). */
  keyset(tenant: Tenant, args: KeysetArgs): Promise<KeysetPage<CodehostInstallation>> {
    return keysetPage(args, (q) =>
      this.deps.data(tenant).codehostInstallation.findMany({
        where: q.where,
        orderBy: q.orderBy,
        take: q.take,
      }),
    );
  }

  /** Every installation of the workspace (the basic v1 listing has no paging). */
  async all(tenant: Tenant): Promise<CodehostInstallation[]> {
    return this.deps.data(tenant).codehostInstallation.findMany({
      orderBy: newestFirst,
    });
  }

  async register(tenant: Tenant, body: unknown): Promise<CodehostInstallation> {
    const input = parseInput(installationRegisterSchema, body, "body");
    try {
      return await this.deps.data(tenant).$transaction(async (tx) => {
        const installation = await tx.codehostInstallation.create({
          data: {
            workspaceId: tenant.workspaceId,
            installationId: input.installation_id,
            name: input.name,
            repositorySelection: input.repository_selection ?? null,
            settingsUrl: input.settings_url ?? null,
          },
        });
        const repositories = input.repositories ?? [];
        if (repositories.length > 0) await tx.codehostRepository.createMany({ data: repositoryRows(tenant.workspaceId, installation.id, repositories) });
        return installation;
      });
    } catch (err) {
      if (isUniqueViolation(err)) {
        throw conflict(`Installation ${input.installation_id} is already registered in this workspace.`, ["body", "installation_id"]);
      }
      throw err;
    }
  }
}
