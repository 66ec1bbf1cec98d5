import { builder } from "../builder.js";
import type { GraphQLContext } from "../context.js";
import { mutate, type UserError, UserErrorType } from "../errors.js";
import { requireId } from "../nodes.js";

/**
 * What the command-line tool asks for before a build, for dashboards too: a push token for the
 * registry and a signed upload URL, from the same core functions as REST.
 */

interface PushTokenPayload {
  token?: string | null;
  registryUrl?: string | null;
  expiresAt?: Date | null;
  userErrors: UserError[];
}

interface UploadUrlPayload {
  uploadUrl?: string | null;
  objectPath?: string | null;
  expiresAt?: Date | null;
  userErrors: UserError[];
}

const PushTokenPayloadRef = builder.objectRef<PushTokenPayload>("DeploymentPushTokenCreatePayload").implement({
  fields: (t) => ({
    token: t.string({
      nullable: true,
      description: "The password of `docker login -u oauth2accesstoken <registry host>`; shown once, kept only as a hash.",
      resolve: (p) => p.token ?? null,
    }),
    registryUrl: t.string({ nullable: true, description: "Push images as <registryUrl without scheme>/<repository>:<tag>.", resolve: (p) => p.registryUrl ?? null }),
    expiresAt: t.field({ type: "DateTime", nullable: true, resolve: (p) => p.expiresAt ?? null }),
    userErrors: t.field({ type: [UserErrorType], resolve: (p) => p.userErrors }),
  }),
});

const UploadUrlPayloadRef = builder.objectRef<UploadUrlPayload>("DeploymentUploadUrlCreatePayload").implement({
  fields: (t) => ({
    uploadUrl: t.string({
      nullable: true,
      description: "PUT the gzip tarball here (Content-Type: application/gzip, at most 200 MiB), once, before expiresAt.",
      resolve: (p) => p.uploadUrl ?? null,
    }),
    objectPath: t.string({ nullable: true, description: "Then set sourceRevisionConfig.sourceTarballPath to this.", resolve: (p) => p.objectPath ?? null }),
    expiresAt: t.field({ type: "DateTime", nullable: true, resolve: (p) => p.expiresAt ?? null }),
    userErrors: t.field({ type: [UserErrorType], resolve: (p) => p.userErrors }),
  }),
});

/** The origin the request came to (yoga puts the request in the context over HTTP; not over WebSocket). */
const requestOrigin = (ctx: GraphQLContext) => {
  const request = (ctx as GraphQLContext & { request?: Request }).request;
  return request ? new URL(request.url).origin : null;
};

builder.mutationFields((t) => ({
  deploymentPushTokenCreate: t.field({
    type: PushTokenPayloadRef,
    description: "A push token for the registry, for an internal_container deployment: lets docker push its images for an hour.",
    args: { deploymentId: t.arg.id({ required: true }) },
    resolve: (_root, { deploymentId }, ctx) =>
      mutate(ctx, async () => ctx.core.pushTokens.create(ctx.tenant, requireId(deploymentId, "Deployment")), { notFound: "deploymentId" }),
  }),
  deploymentUploadUrlCreate: t.field({
    type: UploadUrlPayloadRef,
    description: "A signed URL to upload the deployment's source (a gzip tarball) to, for a remote build (internal_source).",
    args: { deploymentId: t.arg.id({ required: true }) },
    resolve: (_root, { deploymentId }, ctx) =>
      mutate(ctx, async () => ctx.core.uploads.issue(ctx.tenant, requireId(deploymentId, "Deployment"), requestOrigin(ctx)), { notFound: "deploymentId" }),
  }),
}));
