import type { GraphQLResolveInfo } from "graphql";
import type { LatestRevisionRead } from "../../core/deployment-reads.js";
import { revisionCursorPurpose } from "../../core/revision-pages.js";
import type { RevisionSummary } from "../../core/revision-reads.js";
import type { RevisionConfig } from "../../core/revisions.js";
import type { DeploymentWithRevision } from "../../core/deployments.js";
import { type DeploymentRow, type DeploymentView, deploymentView, deploymentViewOrNull } from "./deployment-view.js";
import { deploymentSourceConfig } from "../../core/schemas/source-config.js";
import { IMMUTABLE_SOURCE_CONFIG_FIELDS, REVISION_TRIGGER_FIELDS } from "../../core/schemas/source.js";
import type { RevisionStatus } from "../../core/revision-machine.js";
import { builder } from "../builder.js";
import type { GraphQLContext } from "../context.js";
import { mutate, type UserError, UserErrorType } from "../errors.js";
import { camelList, toRestBody } from "../input-names.js";
import { idOf, registerNode, requireId } from "../nodes.js";
import { connection, PAGE_ARGS_DESCRIPTION, pageComplexity } from "../paging.js";
import { selectedNames, selectsAny, selectsOnly } from "../selection.js";
import {
  AgentEnvironmentEnum,
  DeploymentStatusEnum,
  DeploymentTypeEnum,
  RevisionStatusEnum,
  SourceEnum,
} from "./enums.js";
import { DeploymentRef, InstallationRef, ListenerRef, RevisionRef, type RevisionView } from "./refs.js";
import { ANSWERED_BY_CONFIG, ANSWERED_BY_ID } from "./revisions.js";
import {
  AgentInput,
  AgentRef,
  SecretInput,
  SecretRef,
  SecretReferenceInput,
  SecretReferenceRef,
  SourceConfigInput,
  SourceConfigRef,
  SourceRevisionConfigInput,
  SourceRevisionConfigRef,
  sourceConfigView,
  sourceRevisionConfigView,
  revisionChangeFields,
} from "./source-config.js";

const PAGE_INFO = new Set(["pageInfo"]);

const isSummary = (r: RevisionSummary | RevisionConfig): r is RevisionSummary => "status" in r;

/** Loads a revision the deployment points at; the loader batches these across a whole page. */
const loadRevision = (ctx: GraphQLContext, id: string | null) => (id ? ctx.loaders.revision.load(id) : null);

/**
 * A revision the deployment points at, as a field shows it: loaded, unless the field's selection asks
 * only for its ids (as a client after REST's active_revision_id does): the deployment's column then
 * answers them without a read. Revisions are deleted only with their deployment, so the id always
 * names one, and the revision stands for itself by its id alone.
 */
const revisionAt = (ctx: GraphQLContext, id: string | null, info: GraphQLResolveInfo): RevisionView | Promise<RevisionView | null> | null =>
  id && selectsOnly(info, ANSWERED_BY_ID) ? ({ id } as RevisionView) : loadRevision(ctx, id);

/** The latest revision: at hand when the page's statement read it with the deployment (no promise), else loaded. */
const latestOf = (ctx: GraphQLContext, d: DeploymentRow) => (d.latestRevision !== undefined ? d.latestRevision : loadRevision(ctx, d.latestRevisionId));

/**
 * The latest revision as the Revision the field shows. Read with a page, it may be its config alone,
 * and is then shown as it is: a page reads only that where its selection asks nothing of the
 * revision that the config does not answer (latestRevisionRead).
 */
const latestRevisionOf = (ctx: GraphQLContext, d: DeploymentRow, info: GraphQLResolveInfo) =>
  d.latestRevision !== undefined ? (d.latestRevision as RevisionView | null) : revisionAt(ctx, d.latestRevisionId, info);

builder.node(DeploymentRef, {
  description: "A deployment of an agent server: its configuration, its revisions and where it is served.",
  id: { resolve: (d) => d.id },
  // Fields that show the row are DeploymentView's properties (see there); the rest read its `row`.
  fields: (t) => ({
    uuid: t.exposeID("uuid", { description: "The REST id (deployment_id)." }),
    tenantId: t.exposeID("tenantId", { description: "The REST id of the workspace (tenant_id)." }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
    updatedAt: t.expose("updatedAt", { type: "DateTime" }),
    name: t.exposeString("name"),
    displayName: t.exposeString("displayName"),
    source: t.expose("source", { type: SourceEnum }),
    sourceConfig: t.field({ type: SourceConfigRef, resolve: ({ row }) => sourceConfigView(deploymentSourceConfig(row)) }),
    sourceRevisionConfig: t.field({
      type: SourceRevisionConfigRef,
      description: "The latest revision's source revision config.",
      resolve: (d, _args, ctx) => {
        const latest = latestOf(ctx, d.row);
        return latest instanceof Promise ? latest.then(sourceRevisionConfigView) : sourceRevisionConfigView(latest);
      },
    }),
    secrets: t.expose("secrets", { type: [SecretRef], description: "Names only: values are never shown." }),
    secretReferences: t.expose("secretReferences", { type: [SecretReferenceRef] }),
    status: t.expose("status", { type: DeploymentStatusEnum }),
    latestRevision: t.field({ type: RevisionRef, nullable: true, resolve: (d, _args, ctx, info) => latestRevisionOf(ctx, d.row, info) }),
    activeRevision: t.field({
      type: RevisionRef,
      nullable: true,
      description: "The revision being served: the last one that reached DEPLOYED.",
      resolve: (d, _args, ctx, info) => revisionAt(ctx, d.row.activeRevisionId, info),
    }),
    revisions: t.connection(
      {
        type: RevisionRef,
        description: `The deployment's revisions, newest first, optionally only those in some statuses. ${PAGE_ARGS_DESCRIPTION}`,
        args: { status: t.arg({ type: [RevisionStatusEnum] }) },
        complexity: pageComplexity,
        resolve: async (d, args, ctx, info) => {
          const statuses = args.status ? [...new Set<RevisionStatus>(args.status)] : undefined;
          // Cursors are this deployment's own: opened (and signed, when selected) for its id.
          const purpose = revisionCursorPurpose(d.id);
          const keyset = ctx.core.batch.keysetArgs(purpose, args);
          // Without pageInfo in the selection, no page needs a row past its end to say whether more follow.
          const probe = selectsAny(info, [], PAGE_INFO);
          const page = await ctx.loaders.revisionPage(keyset, statuses, probe).load(d.id);
          return connection(ctx.core.batch.toRelay(purpose, page), () => ctx.loaders.revisionCount(statuses).load(d.id));
        },
      },
      { name: "RevisionConnection" },
      { name: "RevisionEdge" },
    ),
    listener: t.field({
      type: ListenerRef,
      nullable: true,
      description: "The listener running this self-hosted deployment.",
      resolve: ({ row }, _args, ctx) => (row.listenerId ? ctx.loaders.listener.load(row.listenerId) : null),
    }),
    integration: t.field({
      type: InstallationRef,
      nullable: true,
      description: "The code-hosting installation the repository is read through.",
      resolve: ({ row }, _args, ctx) => (row.integrationId ? ctx.loaders.installation.load(row.integrationId) : null),
    }),
    agent: t.expose("agent", { type: AgentRef, nullable: true }),
    shareable: t.exposeBoolean("shareable"),
    routeThroughGateway: t.exposeBoolean("routeThroughGateway"),
    tracerSessionId: t.exposeID("tracerSessionId"),
    url: t.exposeString("url", { description: "Where the deployment is served." }),
    isPreview: t.exposeBoolean("isPreview"),
    imageVersion: t.exposeString("imageVersion"),
    isManagedDeepAgent: t.exposeBoolean("isManagedDeepAgent"),
    deploymentTier: t.exposeString("deploymentTier"),
    computeTier: t.exposeString("computeTier"),
    databaseTier: t.exposeString("databaseTier"),
    remoteReconciled: t.exposeBoolean("remoteReconciled", { description: "Reconciled by a listener in a self-hosted cluster." }),
    tagValueIds: t.exposeIDList("tagValueIds"),
  }),
});

registerNode(DeploymentRef, async (ctx, id) => deploymentViewOrNull(await ctx.loaders.deployment.load(id)));

const DeploymentFilter = builder.inputType("DeploymentFilter", {
  description: "The REST listing's filters; all given filters must match.",
  fields: (t) => ({
    name: t.string({ description: "Exact name." }),
    nameContains: t.string({ description: "Part of the name, case-insensitive." }),
    status: t.field({ type: DeploymentStatusEnum }),
    remoteReconciled: t.boolean(),
    tagValueIds: t.idList({ description: "Deployments carrying all of these tag values." }),
    imageVersion: t.string(),
    deploymentType: t.field({ type: DeploymentTypeEnum }),
    deploymentIds: t.idList({ description: "Only these deployments (global ids or REST ids), at most 100." }),
    url: t.string({ description: "Exact serving URL." }),
    agentId: t.string({ description: "Deployments made for this agent." }),
    agentEnvironment: t.field({ type: AgentEnvironmentEnum }),
  }),
});

/**
 * What a page of deployments reads of each one's latest revision along with it, from what its
 * selection shows of them: nothing (null) when no field shows it; only its config when that answers
 * every field asked of it (sourceRevisionConfig, and at most latestRevision's id, as a client after
 * REST's latest_revision_id asks); else its summary.
 */
function latestRevisionRead(info: GraphQLResolveInfo): LatestRevisionRead | null {
  const shown = selectedNames(info, ["edges", "node"]);
  if (!shown.has("latestRevision") && !shown.has("sourceRevisionConfig")) return null;
  const ofLatest = selectedNames(info, ["edges", "node", "latestRevision"]);
  return [...ofLatest].every((name) => ANSWERED_BY_CONFIG.has(name)) ? "config" : "summary";
}

builder.queryField("deployments", (t) =>
  t.connection(
    {
      type: DeploymentRef,
      description: `The workspace's deployments, newest first. ${PAGE_ARGS_DESCRIPTION}`,
      args: { filter: t.arg({ type: DeploymentFilter }) },
      complexity: pageComplexity,
      resolve: async (_root, { filter, ...args }, ctx, info) => {
        // A null filter field is an unused one (clients send null for unset variables).
        const given = Object.fromEntries(Object.entries(filter ?? {}).filter(([, v]) => v != null));
        // Deployment ids may be given as global ids or REST ids.
        const ids = filter?.deploymentIds?.map((id) => idOf(id, "Deployment") ?? id);
        const parsed = ctx.core.batch.parseDeploymentFilter(toRestBody({ ...given, ...(ids && { deploymentIds: ids }) }));
        // Latest revisions the page will show are read with it, in one statement, rather than by the loader after.
        const latestRevision = latestRevisionRead(info) ?? undefined;
        const page = await ctx.core.batch.relay(ctx.tenant, "graphql:deployments", args, async (keyset) => {
          const rows = await ctx.core.batch.deploymentPage(ctx.tenant, parsed, keyset, { latestRevision });
          return { ...rows, items: rows.items.map(deploymentView) };
        });
        // Loaders serve the whole operation, so they are given rows and summaries only: a deployment
        // carrying its latest revision's config alone stands for it on this page, not elsewhere.
        if (latestRevision !== "config") {
          for (const { node: { row } } of page.edges) {
            ctx.loaders.deployment.prime(row.id, row);
            const latest = "latestRevision" in row ? row.latestRevision : null;
            if (latest && isSummary(latest)) ctx.loaders.revision.prime(latest.id, latest);
          }
        }
        return connection(page, () => ctx.core.batch.deploymentCount(ctx.tenant, parsed));
      },
    },
    { name: "DeploymentConnection" },
    { name: "DeploymentEdge" },
  ),
);

const DeploymentCreateInput = builder.inputType("DeploymentCreateInput", {
  fields: (t) => ({
    name: t.string({ description: "Required unless agent is given (then it defaults to <agentId>-<environment>)." }),
    source: t.field({ type: SourceEnum, required: true }),
    sourceConfig: t.field({ type: SourceConfigInput }),
    sourceRevisionConfig: t.field({ type: SourceRevisionConfigInput }),
    secrets: t.field({ type: [SecretInput] }),
    secretReferences: t.field({ type: [SecretReferenceInput] }),
    agent: t.field({ type: AgentInput }),
    shareable: t.boolean(),
    routeThroughGateway: t.boolean(),
  }),
});

const DeploymentUpdateInput = builder.inputType("DeploymentUpdateInput", {
  // Said from the rule's own field lists (core/revision-rules.ts revisionDue), so that the two cannot differ.
  description:
    `A new revision is created when a sourceRevisionConfig field or secrets is given, or ${camelList(REVISION_TRIGGER_FIELDS, "or")} changes. ` +
    `${camelList(IMMUTABLE_SOURCE_CONFIG_FIELDS, "and")} cannot change.`,
  fields: (t) => revisionChangeFields(t, "Build the new revision from another source than the deployment's."),
});

interface DeploymentPayload {
  deployment?: DeploymentView | null;
  userErrors: UserError[];
}

const payload = (name: string) =>
  builder.objectRef<DeploymentPayload>(name).implement({
    fields: (t) => ({
      deployment: t.field({ type: DeploymentRef, nullable: true, resolve: (p) => p.deployment ?? null }),
      userErrors: t.field({ type: [UserErrorType], resolve: (p) => p.userErrors }),
    }),
  });

const DeploymentDeletePayload = builder.objectRef<{ deletedDeploymentId?: string | null; userErrors: UserError[] }>("DeploymentDeletePayload").implement({
  fields: (t) => ({
    deletedDeploymentId: t.id({ nullable: true, resolve: (p) => p.deletedDeploymentId ?? null }),
    userErrors: t.field({ type: [UserErrorType], resolve: (p) => p.userErrors }),
  }),
});

/** The deployment a mutation returns, with the latest revision it wrote along (no refetch). */
const written = (d: DeploymentWithRevision): { deployment: DeploymentView } => ({ deployment: deploymentView(d) });

builder.mutationFields((t) => ({
  deploymentCreate: t.field({
    type: payload("DeploymentCreatePayload"),
    description: "Creates a deployment and its first revision (status CREATING); follow it with revisionStatusChanged.",
    args: { input: t.arg({ type: DeploymentCreateInput, required: true }) },
    resolve: (_root, { input }, ctx) => mutate(ctx, async () => written(await ctx.core.deployments.create(ctx.tenant, toRestBody(input)))),
  }),
  deploymentUpdate: t.field({
    type: payload("DeploymentUpdatePayload"),
    description: "Changes a deployment; see DeploymentUpdateInput for when this creates a revision (then latestRevision is the new one).",
    args: { id: t.arg.id({ required: true }), input: t.arg({ type: DeploymentUpdateInput, required: true }) },
    resolve: (_root, { id, input }, ctx) =>
      mutate(
        ctx,
        async () => written(await ctx.core.deployments.update(ctx.tenant, requireId(id, "Deployment"), toRestBody(input))),
        { notFound: "id" },
      ),
  }),
  deploymentDelete: t.field({
    type: DeploymentDeletePayload,
    description: "Deletes the deployment with its revisions.",
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, { id }, ctx) =>
      mutate(ctx, async () => {
        await ctx.core.deployments.delete(ctx.tenant, requireId(id, "Deployment"));
        return { deletedDeploymentId: id };
      }, { notFound: "id" }),
  }),
}));
