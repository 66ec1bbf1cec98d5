import { builder } from "../builder.js";
import { registerNode } from "../nodes.js";
import { WorkspaceRef } from "./refs.js";


builder.node(WorkspaceRef, {
  description: "A workspace: the tenant that owns deployments, listeners, installations and connections.",
  id: { resolve: (w) => w.id },
  fields: (t) => ({
    uuid: t.exposeID("id", { description: "The REST id (tenant_id, X-Tenant-Id)." }),
    name: t.exposeString("name"),
    organizationUuid: t.exposeID("organizationId", { description: "The REST id of the organisation the workspace belongs to." }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
  }),
});

// The only workspace a caller can see is its own.
registerNode(WorkspaceRef, async (ctx, id) => (id.toLowerCase() === ctx.tenant.workspaceId ? ctx.core.batch.workspace(ctx.tenant) : null));

builder.queryField("viewer", (t) =>
  t.field({
    type: WorkspaceRef,
    description: "The caller's workspace.",
    resolve: async (_root, _args, ctx) => {
      const workspace = await ctx.core.batch.workspace(ctx.tenant);
      // Authentication found the workspace a moment ago; it can only be gone if deleted meanwhile.
      if (!workspace) throw new Error("the caller's workspace no longer exists");
      return workspace;
    },
  }),
);
