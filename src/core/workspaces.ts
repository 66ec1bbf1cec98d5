import { randomBytes } from "node:crypto";
import type { PrismaClient } from "../db/client.js";
import type { Prisma } from "../generated/prisma/client.js";
import { hashApiKey, keyPrefix } from "./auth.js";

/**
 * Held (for its transaction) by whoever provisions at start-up: replicas starting together on one
 * PostgreSQL take turns, so that the second sees what the first made instead of making it again.
 */
const BOOTSTRAP_LOCK = 0x64637062; // "dcpb"

export interface NewWorkspace {
  organizationId: string;
  workspaceId: string;
  apiKey: string;
}

export const generateApiKey = () => `dcp_${randomBytes(24).toString("base64url")}`;

/**
 * Creates an organisation with one workspace and a key bound to it (or, orgWide, to the
 * organisation), in one transaction: a key that cannot be made (its hash taken) leaves no workspace.
 */
export function createWorkspace(prisma: PrismaClient, options: WorkspaceOptions = {}): Promise<NewWorkspace> {
  return prisma.$transaction((tx) => createWorkspaceIn(tx, options));
}

interface WorkspaceOptions {
  name?: string;
  workspaceId?: string;
  apiKey?: string;
  orgWide?: boolean;
  keyName?: string;
}

/** createWorkspace, within a transaction of the caller's. */
async function createWorkspaceIn(db: Prisma.TransactionClient, options: WorkspaceOptions): Promise<NewWorkspace> {
  const apiKey = options.apiKey ?? generateApiKey();
  const name = options.name ?? "Default";
  const org = await db.organization.create({
    data: {
      name,
      workspaces: { create: { id: options.workspaceId, name } },
    },
    include: { workspaces: true },
  });
  const workspaceId = org.workspaces[0]!.id;
  await db.apiKey.create({
    data: { organizationId: org.id, workspaceId: options.orgWide ? null : workspaceId, keyHash: hashApiKey(apiKey), keyPrefix: keyPrefix(apiKey), name: options.keyName },
  });
  return { organizationId: org.id, workspaceId, apiKey };
}

/** Adds a workspace to an existing organisation. */
export async function addWorkspace(prisma: PrismaClient, organizationId: string, name: string): Promise<string> {
  const ws = await prisma.workspace.create({ data: { organizationId, name } });
  return ws.id;
}

export type BootstrapResult =
  | { kind: "existing" }
  | {
      kind: "created";
      workspaceId: string;
      apiKey: string;
      printKey: boolean;
      /** How the key found its workspace: made for it, named by BOOTSTRAP_TENANT_ID, the data's only one, or a new one beside several. */
      how: "new-workspace" | "named" | "only-workspace" | "new-beside-others";
      /** How many workspaces there were before (new-beside-others). */
      others?: number;
    };

/**
 * Start-up provisioning, idempotent across restarts and across replicas starting together (they take
 * turns: BOOTSTRAP_LOCK): with BOOTSTRAP_API_KEY, make sure that key exists (bound to
 * BOOTSTRAP_TENANT_ID's workspace, created if missing); with neither and an empty key table, create a
 * workspace and a key whose value the caller prints once.
 */
export function bootstrap(prisma: PrismaClient, options: { apiKey?: string; tenantId?: string }): Promise<BootstrapResult> {
  return prisma.$transaction(
    async (tx) => {
      await tx.$executeRaw`SELECT pg_advisory_xact_lock(${BOOTSTRAP_LOCK}::bigint)`;
      return provision(tx, options);
    },
    // Another replica may hold the lock while it provisions, on a database that is still warming up.
    // Read committed (PostgreSQL's default, said here): what is read after the lock is what the
    // replica that held it committed, whatever isolation the server defaults to.
    { maxWait: 30_000, timeout: 60_000, isolationLevel: "ReadCommitted" },
  );
}

async function provision(prisma: Prisma.TransactionClient, options: { apiKey?: string; tenantId?: string }): Promise<BootstrapResult> {
  if (options.apiKey) {
    const hash = hashApiKey(options.apiKey);
    const existing = await prisma.apiKey.findUnique({ where: { keyHash: hash } });
    if (existing) {
      if (options.tenantId && existing.workspaceId !== options.tenantId.toLowerCase()) {
        throw new Error("BOOTSTRAP_API_KEY already exists for another workspace than BOOTSTRAP_TENANT_ID");
      }
      return { kind: "existing" };
    }
    // Without BOOTSTRAP_TENANT_ID, a data folder's only workspace is the one meant: a new key for an
    // existing installation must see its deployments, not an empty second workspace.
    const present = options.tenantId ? [] : await prisma.workspace.findMany({ take: 2, orderBy: { createdAt: "asc" } });
    const workspace = options.tenantId
      ? await prisma.workspace.findUnique({ where: { id: options.tenantId.toLowerCase() } })
      : present.length === 1
        ? present[0]!
        : null;
    if (workspace) {
      await prisma.apiKey.create({
        data: { organizationId: workspace.organizationId, workspaceId: workspace.id, keyHash: hash, keyPrefix: keyPrefix(options.apiKey), name: "BOOTSTRAP_API_KEY" },
      });
      return { kind: "created", workspaceId: workspace.id, apiKey: options.apiKey, printKey: false, how: options.tenantId ? "named" : "only-workspace" };
    }
    const others = options.tenantId ? 0 : await prisma.workspace.count();
    const created = await createWorkspaceIn(prisma, { workspaceId: options.tenantId?.toLowerCase(), apiKey: options.apiKey, keyName: "BOOTSTRAP_API_KEY" });
    return {
      kind: "created",
      workspaceId: created.workspaceId,
      apiKey: created.apiKey,
      printKey: false,
      how: others > 0 ? "new-beside-others" : options.tenantId ? "named" : "new-workspace",
      others,
    };
  }
  if ((await prisma.apiKey.count()) > 0) return { kind: "existing" };
  const created = await createWorkspaceIn(prisma, { keyName: "first start" });
  return { kind: "created", workspaceId: created.workspaceId, apiKey: created.apiKey, printKey: true, how: "new-workspace" };
}
