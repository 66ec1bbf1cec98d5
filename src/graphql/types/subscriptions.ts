import type { DeploymentStatus } from "../../core/schemas/source.js";
import type { DeploymentRevisionChange, DeploymentStatusChange, RevisionStatusChange } from "../../core/watch.js";
import { builder } from "../builder.js";
import { type GraphQLContext, refreshLoaders } from "../context.js";
import { globalIdOf, requireId } from "../nodes.js";
import { DeploymentStatusEnum, RevisionStatusEnum } from "./enums.js";
import { DeploymentRef, RevisionRef } from "./refs.js";
import { deploymentView, deploymentViewOrNull } from "./deployment-view.js";

const RevisionStatusChangeRef = builder.objectRef<RevisionStatusChange>("RevisionStatusChange").implement({
  description: "A revision's status: the current one when subscribing, then each change in order.",
  fields: (t) => ({
    revision: t.field({ type: RevisionRef, description: "The revision as it is now.", resolve: (c) => c.revision }),
    status: t.field({ type: RevisionStatusEnum, description: "The status this message reports.", resolve: (c) => c.status }),
    previousStatus: t.field({ type: RevisionStatusEnum, nullable: true, resolve: (c) => c.previousStatus }),
    message: t.exposeString("message"),
    at: t.expose("at", { type: "DateTime" }),
  }),
});

const RevisionChangeKind = builder.enumType("RevisionChangeKind", {
  values: {
    CREATED: { value: "created", description: "A new revision of the deployment." },
    STATUS_CHANGED: { value: "status", description: "A revision of the deployment changed status." },
  } as const,
});

const DeploymentRevisionsChangeRef = builder.objectRef<DeploymentRevisionChange>("DeploymentRevisionsChange").implement({
  fields: (t) => ({
    kind: t.field({ type: RevisionChangeKind, resolve: (c) => c.kind }),
    deployment: t.field({ type: DeploymentRef, resolve: (c) => deploymentView(c.deployment) }),
    revision: t.field({ type: RevisionRef, resolve: (c) => c.revision }),
  }),
});

const DeploymentStatusChangeRef = builder.objectRef<DeploymentStatusChange>("DeploymentStatusChange").implement({
  description: "A deployment's status: the current one when subscribing, then each change.",
  fields: (t) => ({
    deploymentId: t.id({ description: "The deployment's global id (it stays known once the deployment is deleted).", resolve: (c) => globalIdOf("Deployment", c.deploymentId) }),
    deployment: t.field({ type: DeploymentRef, nullable: true, description: "Null once the deployment is deleted.", resolve: (c) => deploymentViewOrNull(c.deployment) }),
    status: t.field({ type: DeploymentStatusEnum, resolve: (c) => c.status as DeploymentStatus }),
  }),
});

/** Each event is shown as the database is at that moment, not through the loaders of the first. */
const fresh = <T>(change: T, ctx: GraphQLContext) => {
  refreshLoaders(ctx);
  return change;
};

builder.subscriptionFields((t) => ({
  revisionStatusChanged: t.field({
    type: RevisionStatusChangeRef,
    description: "The revision's current status, then every change until a terminal status (DEPLOYED, a FAILED status, SKIPPED or INTERRUPTED), then completes; completes as well once its deployment is being deleted (the revision is deleted with it).",
    args: { revisionId: t.arg.id({ required: true }) },
    subscribe: (_root, { revisionId }, ctx) => ctx.core.watch.revisionStatus(ctx.tenant, requireId(revisionId, "Revision")),
    resolve: (change, _args, ctx) => fresh(change, ctx),
  }),
  deploymentRevisionsChanged: t.field({
    type: DeploymentRevisionsChangeRef,
    description: "Each new revision of the deployment and each status change of its revisions; completes once the deployment is being deleted.",
    args: { deploymentId: t.arg.id({ required: true }) },
    subscribe: (_root, { deploymentId }, ctx) => ctx.core.watch.deploymentRevisions(ctx.tenant, requireId(deploymentId, "Deployment")),
    resolve: (change, _args, ctx) => fresh(change, ctx),
  }),
  deploymentStatusChanged: t.field({
    type: DeploymentStatusChangeRef,
    description: "The deployment's current status, then each change; completes once the deployment is being deleted.",
    args: { deploymentId: t.arg.id({ required: true }) },
    subscribe: (_root, { deploymentId }, ctx) => ctx.core.watch.deploymentStatus(ctx.tenant, requireId(deploymentId, "Deployment")),
    resolve: (change, _args, ctx) => fresh(change, ctx),
  }),
}));
