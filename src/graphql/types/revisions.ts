import { notFound } from "../../core/errors.js";
import type { Deployment, Revision, RevisionEvent } from "../../generated/prisma/client.js";
import type { RevisionSummary } from "../../core/revision-reads.js";
import { readStoredSecrets } from "../../core/schemas/secrets.js";
import { readSourceConfig } from "../../core/schemas/source-config.js";
import type { Source } from "../../core/schemas/source.js";
import type { RevisionStatus } from "../../core/revision-machine.js";
import { builder } from "../builder.js";
import type { GraphQLContext } from "../context.js";
import { mutate, type UserError, UserErrorType } from "../errors.js";
import { toRestBody } from "../input-names.js";
import { registerNode, requireId } from "../nodes.js";
import { RevisionStatusEnum, SourceEnum } from "./enums.js";
import { DeploymentRef, RevisionRef, type RevisionView } from "./refs.js";
import { deploymentView, deploymentViewOrNull } from "./deployment-view.js";
import {
  SecretRef,
  SecretReferenceRef,
  SourceConfigRef,
  SourceRevisionConfigRef,
  secretReferencesView,
  sourceConfigView,
  sourceRevisionConfigView,
  revisionChangeFields,
} from "./source-config.js";

const RevisionEventRef = builder.objectRef<RevisionEvent>("RevisionEvent").implement({
  description: "One status change in a revision's log.",
  fields: (t) => ({
    from: t.field({ type: RevisionStatusEnum, nullable: true, description: "Null for the entry that created the revision.", resolve: (e) => (e.fromStatus as RevisionStatus | null) ?? null }),
    to: t.field({ type: RevisionStatusEnum, resolve: (e) => e.toStatus as RevisionStatus }),
    at: t.expose("at", { type: "DateTime" }),
    message: t.exposeString("message"),
  }),
});

/**
 * The whole revision row: `r` itself when it is one (mutations, subscriptions), else loaded by id,
 * batched with every other revision of the operation that needs a field outside its summary.
 */
async function whole(r: RevisionView, ctx: GraphQLContext): Promise<Revision> {
  if (r.secrets !== undefined) return r as Revision;
  return (await ctx.loaders.revisionFull.load(r.id)) ?? Promise.reject(notFound("Revision", r.id));
}

/**
 * The Revision fields its config (RevisionConfig) answers: a page that shows no other field of a
 * revision may read only its config (see the deployments connection).
 */
export const ANSWERED_BY_CONFIG: ReadonlySet<string> = new Set(["__typename", "id", "uuid", "sourceRevisionConfig"]);

/** The Revision fields its id alone answers. */
export const ANSWERED_BY_ID: ReadonlySet<string> = new Set(["__typename", "id", "uuid"]);

builder.node(RevisionRef, {
  description: "One build and deploy of a deployment, from a snapshot of its configuration.",
  id: { resolve: (r) => r.id },
  fields: (t) => ({
    uuid: t.exposeID("id", { description: "The REST id (revision_id)." }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
    updatedAt: t.expose("updatedAt", { type: "DateTime" }),
    status: t.field({ type: RevisionStatusEnum, resolve: (r) => r.status as RevisionStatus }),
    statusMessage: t.exposeString("statusMessage", { description: "Why the revision is in its status, e.g. why a build failed." }),
    source: t.field({ type: SourceEnum, resolve: (r) => r.source as Source }),
    sourceConfig: t.field({
      type: SourceConfigRef,
      description: "The source config this revision was made from.",
      resolve: async (r, _args, ctx) => sourceConfigView(readSourceConfig((await whole(r, ctx)).sourceConfig)),
    }),
    sourceRevisionConfig: t.field({ type: SourceRevisionConfigRef, resolve: (r) => sourceRevisionConfigView(r) }),
    secrets: t.field({ type: [SecretRef], resolve: async (r, _args, ctx) => readStoredSecrets((await whole(r, ctx)).secrets).map(({ name }) => ({ name })) }),
    secretReferences: t.field({ type: [SecretReferenceRef], resolve: async (r, _args, ctx) => secretReferencesView((await whole(r, ctx)).secretReferences) }),
    shareable: t.boolean({ resolve: async (r, _args, ctx) => (await whole(r, ctx)).shareable }),
    routeThroughGateway: t.boolean({ resolve: async (r, _args, ctx) => (await whole(r, ctx)).routeThroughGateway }),
    remoteReconciled: t.boolean({
      description: "Carried out by a listener in a self-hosted cluster.",
      resolve: async (r, _args, ctx) => (await whole(r, ctx)).remoteReconciled,
    }),
    imageDigest: t.string({
      nullable: true,
      description: "internal_container: the digest of the manifest imageUri named in the registry when the revision was built.",
      resolve: async (r, _args, ctx) => (await whole(r, ctx)).imageDigest,
    }),
    buildReport: t.field({
      type: "JSONObject",
      nullable: true,
      description: "What the build step found: `image` (the manifest looked up) or `source` (the uploaded tarball's files, size and graphs).",
      resolve: async (r, _args, ctx) => ((await whole(r, ctx)).buildReport as Record<string, unknown> | null) ?? null,
    }),
    deployment: t.field({
      type: DeploymentRef,
      resolve: async (r, _args, ctx) => {
        const row = await ctx.loaders.deployment.load(r.deploymentId);
        return row ? deploymentView(row) : Promise.reject(notFound("Deployment", r.deploymentId));
      },
    }),
    events: t.field({
      type: [RevisionEventRef],
      description: "Every status change, oldest first.",
      complexity: { field: 1, multiplier: 10 },
      resolve: (r, _args, ctx) => ctx.loaders.revisionEvents.load(r.id),
    }),
  }),
});

registerNode(RevisionRef, (ctx, id) => ctx.loaders.revision.load(id));

export const RevisionCreateInput = builder.inputType("RevisionCreateInput", {
  description: "What the new revision changes; omitted fields keep the deployment's current values.",
  fields: (t) => revisionChangeFields(t, "Build this revision from another source than the deployment's (managed cloud only)."),
});

interface RevisionPayload {
  revision?: Revision | null;
  deployment?: Deployment | null;
  userErrors: UserError[];
}

const payload = (name: string, withDeployment: boolean) =>
  builder.objectRef<RevisionPayload>(name).implement({
    fields: (t) => ({
      revision: t.field({ type: RevisionRef, nullable: true, resolve: (p) => p.revision ?? null }),
      ...(withDeployment && { deployment: t.field({ type: DeploymentRef, nullable: true, resolve: (p) => deploymentViewOrNull(p.deployment) }) }),
      userErrors: t.field({ type: [UserErrorType], resolve: (p) => p.userErrors }),
    }),
  });

builder.mutationFields((t) => ({
  revisionCreate: t.field({
    type: payload("RevisionCreatePayload", false),
    description: "Creates a revision of the deployment (always, unlike deploymentUpdate).",
    args: { deploymentId: t.arg.id({ required: true }), input: t.arg({ type: RevisionCreateInput, required: true }) },
    resolve: (_root, { deploymentId, input }, ctx) =>
      mutate(
        ctx,
        async () => ({ revision: await ctx.core.deployments.createRevision(ctx.tenant, requireId(deploymentId, "Deployment"), toRestBody(input)) }),
        { notFound: "deploymentId" },
      ),
  }),
  revisionRedeploy: t.field({
    type: payload("RevisionRedeployPayload", true),
    description: "A new revision from this revision's configuration (a rollback), which the deployment takes on.",
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, { id }, ctx) =>
      mutate(ctx, async () => {
        const revision = await revisionOf(ctx, id);
        const deployment = await ctx.core.deployments.redeploy(ctx.tenant, revision.deploymentId, revision.id);
        return { deployment, revision: deployment.latestRevision };
      }, { notFound: "id" }),
  }),
  revisionInterrupt: t.field({
    type: payload("RevisionInterruptPayload", false),
    description: "Stops a revision in progress (status INTERRUPTED); a finished revision cannot be interrupted.",
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, { id }, ctx) =>
      mutate(ctx, async () => {
        const revision = await revisionOf(ctx, id);
        return { revision: await ctx.core.revisions.interrupt(ctx.tenant, revision.deploymentId, revision.id) };
      }, { notFound: "id" }),
  }),
}));

/** The revision a mutation names, if the caller can see it: its deployment is needed for the core call. */
async function revisionOf(ctx: GraphQLContext, globalId: string): Promise<RevisionSummary> {
  const revision = await ctx.loaders.revision.load(requireId(globalId, "Revision"));
  if (!revision) throw notFound("Revision", globalId);
  return revision;
}
