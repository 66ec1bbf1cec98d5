import { z } from "zod";
import type { PrismaClient } from "../db/client.js";
import type { EventBus } from "../events/types.js";
import { hashApiKey, keyPrefix } from "./auth.js";
import { CoreError, invalid } from "./errors.js";
import { generateApiKey } from "./workspaces.js";


export interface ApiKeySummary {
  id: string;
  name: string | null;
  /** The key's first characters; null for keys made before keys were managed. */
  prefix: string | null;
  organizationId: string;
  /** null: organisation-wide (the caller names the workspace with X-Tenant-Id). */
  workspaceId: string | null;
  createdAt: Date;
  revokedAt: Date | null;
}

const summary = {
  id: true,
  name: true,
  keyPrefix: true,
  organizationId: true,
  workspaceId: true,
  createdAt: true,
  revokedAt: true,
} as const;

type Row = { id: string; name: string | null; keyPrefix: string | null; organizationId: string; workspaceId: string | null; createdAt: Date; revokedAt: Date | null };
const present = ({ keyPrefix: prefix, ...row }: Row): ApiKeySummary => ({ ...row, prefix });

const createSchema = z.object({
  workspaceId: z.uuid().optional(),
  orgWide: z.boolean().default(false),
  name: z.string().min(1).max(100).optional(),
});

/**
 * API keys after the first start (`npm run keys`): only hashes are stored; a new key's value is
 * returned once, by create. Revocation keeps the row (for the record) and tells every replica,
 * over the event bus, to drop the key from its authentication cache.
 */
export class ApiKeyService {
  constructor(
    private readonly prisma: PrismaClient,
    private readonly events: EventBus,
  ) {}

  /**
   * A key for a workspace (or, orgWide, its organisation). Without workspaceId: the only workspace
   * there is; with several, the caller must say which.
   */
  async create(input: z.input<typeof createSchema>): Promise<{ key: string; summary: ApiKeySummary }> {
    const parsed = createSchema.safeParse(input);
    if (!parsed.success) throw invalid(parsed.error.issues.map((issue) => ({ loc: issue.path.map(String), type: "value_error", msg: issue.message })));
    const { workspaceId, orgWide, name } = parsed.data;
    const workspace = workspaceId
      ? await this.prisma.workspace.findUnique({ where: { id: workspaceId.toLowerCase() } })
      : await this.onlyWorkspace();
    if (!workspace) throw new CoreError("NOT_FOUND", `No workspace ${workspaceId}.`);
    const key = generateApiKey();
    const row = await this.prisma.apiKey.create({
      data: { organizationId: workspace.organizationId, workspaceId: orgWide ? null : workspace.id, keyHash: hashApiKey(key), keyPrefix: keyPrefix(key), name },
      select: summary,
    });
    return { key, summary: present(row) };
  }

  async list(): Promise<ApiKeySummary[]> {
    return (await this.prisma.apiKey.findMany({ select: summary, orderBy: [{ createdAt: "asc" }, { id: "asc" }] })).map(present);
  }

  /**
   * Revokes by id, or by the prefix `list` shows when it names one key only. The prefix is taken as
   * `list` shows it, its trailing "…" included (pasted from there), and is literal: startsWith is a
   * LIKE, whose % and _ would match any key, so what it finds is checked again.
   */
  async revoke(given: string): Promise<ApiKeySummary> {
    const idOrPrefix = given.endsWith("…") ? given.slice(0, -1) : given;
    const matches = z.uuid().safeParse(idOrPrefix).success
      ? await this.prisma.apiKey.findMany({ where: { id: idOrPrefix.toLowerCase() }, select: summary })
      : idOrPrefix.length >= 6
        ? (await this.prisma.apiKey.findMany({ where: { keyPrefix: { startsWith: idOrPrefix } }, select: summary })).filter((k) => k.keyPrefix?.startsWith(idOrPrefix))
        : [];
    if (matches.length === 0) throw new CoreError("NOT_FOUND", `No API key with id or prefix ${JSON.stringify(given)}.`);
    if (matches.length > 1) throw new CoreError("CONFLICT", `${matches.length} keys start with ${JSON.stringify(idOrPrefix)}: give the id.`);
    const found = matches[0]!;
    const row = found.revokedAt
      ? found
      : await this.prisma.apiKey.update({ where: { id: found.id }, data: { revokedAt: new Date() }, select: summary });
    await this.events.publish({ type: "api_key.revoked", workspaceId: row.workspaceId, keyId: row.id });
    return present(row);
  }

  private async onlyWorkspace() {
    const workspaces = await this.prisma.workspace.findMany({ take: 2 });
    if (workspaces.length === 0) throw new CoreError("NOT_FOUND", "There is no workspace yet: start the service once (it creates one), or pass --workspace.");
    if (workspaces.length > 1) throw new CoreError("BAD_REQUEST", "There are several workspaces: say which with --workspace <id>.");
    return workspaces[0]!;
  }
}
