import { LRUCache } from "lru-cache";
import type { Prisma, PrismaClient } from "../generated/prisma/client.js";
import type { Tenant } from "./auth.js";

/**
 * The models a workspace owns: every row carries its workspace_id. A test checks this list against
 * schema.prisma, so that a new model with a workspace cannot be left out.
 */
export const TENANT_MODELS = [
  "Deployment",
  "Revision",
  "RevisionLog",
  "Listener",
  "CodehostInstallation",
  "CodehostRepository",
  "AgentConnection",
  "IdempotencyKey",
  "PushToken",
  "SourceUpload",
  "OAuthProvider",
  "OAuthToken",
  "OAuthFlow",
] as const satisfies readonly Prisma.ModelName[];

const OWNED: ReadonlySet<string> = new Set(TENANT_MODELS);

/** Operations that select rows by `where`, and those that write rows from `data`. */
const FILTERED = new Set([
  "findUnique",
  "findUniqueOrThrow",
  "findFirst",
  "findFirstOrThrow",
  "findMany",
  "count",
  "aggregate",
  "groupBy",
  "update",
  "updateMany",
  "updateManyAndReturn",
  "delete",
  "deleteMany",
  "upsert",
]);
const CREATING = new Set(["create", "createMany", "createManyAndReturn", "upsert"]);

type Row = Record<string, unknown>;

/** A row of another workspace in a tenant's request is a bug in core: refuse it loudly. */
function own(row: Row, workspaceId: string, model: string): Row {
  const given = row.workspaceId;
  if (given !== undefined && (typeof given !== "string" || given.toLowerCase() !== workspaceId)) {
    throw new Error(`tenant data: a ${model} of workspace ${String(given)} was written through workspace ${workspaceId}'s door`);
  }
  return { ...row, workspaceId };
}

/** `args` with the workspace added to its filter and to every row it creates. */
function scopeArgs(model: string, operation: string, args: Row, workspaceId: string): Row {
  const scoped: Row = { ...args };
  if (FILTERED.has(operation)) scoped.where = own((args.where as Row | undefined) ?? {}, workspaceId, model);
  if (CREATING.has(operation)) {
    const key = operation === "upsert" ? "create" : "data";
    const data = args[key];
    scoped[key] = Array.isArray(data) ? data.map((row: Row) => own(row, workspaceId, model)) : own((data as Row) ?? {}, workspaceId, model);
  }
  return scoped;
}

function scope(prisma: PrismaClient, workspaceId: string): PrismaClient {
  const scoped = prisma.$extends({
    name: "tenant",
    query: {
      $allModels: {
        $allOperations({ model, operation, args, query }) {
          if (!OWNED.has(model)) return query(args);
          return query(scopeArgs(model, operation, args as Row, workspaceId) as typeof args);
        },
      },
    },
  });
  // A query extension rewrites arguments only: the models' methods and their types are Prisma's own,
  // which TypeScript cannot see through $extends' generic client type.
  return scoped as unknown as PrismaClient;
}

const doors = new WeakMap<PrismaClient, LRUCache<string, PrismaClient>>();

/**
 * The one door to a workspace's data: every query through it, and through its transactions, is
 * confined to the tenant's workspace (filters get `workspaceId`, new rows get it too), so core code
 * cannot forget it. The unscoped client stays for work across workspaces (the pipeline, retention,
 * authentication).
 */
export function tenantData(prisma: PrismaClient, tenant: Pick<Tenant, "workspaceId">): PrismaClient {
  let cache = doors.get(prisma);
  if (!cache) doors.set(prisma, (cache = new LRUCache({ max: 1000 })));
  // UUIDs compare without regard to case in PostgreSQL; the door compares rows' ids as one spelling.
  const workspaceId = tenant.workspaceId.toLowerCase();
  let door = cache.get(workspaceId);
  if (!door) cache.set(workspaceId, (door = scope(prisma, workspaceId)));
  return door;
}
