import type { Listener } from "../../core/listeners.js";
import { builder } from "../builder.js";
import { mutate, type UserError, UserErrorType } from "../errors.js";
import { toRestBody } from "../input-names.js";
import { registerNode, requireId } from "../nodes.js";
import { connection, PAGE_ARGS_DESCRIPTION, pageComplexity } from "../paging.js";
import { ComputeTypeEnum } from "./enums.js";
import { ListenerRef } from "./refs.js";
import { type Obj, objectOf, strs } from "../../core/stored-json.js";


const ComputeConfig = builder.objectRef<Obj>("ListenerComputeConfig").implement({
  description: "Where in the cluster the listener may place deployments.",
  fields: (t) => ({
    // As stored and as REST answers it: null and [] are different settings. Read by type, as stored JSON is.
    k8sNamespaces: t.stringList({
      nullable: true,
      description: "The namespaces the listener may place deployments in; null: the listener's own namespace.",
      resolve: (c) => strs(c, "k8s_namespaces"),
    }),
  }),
});

builder.node(ListenerRef, {
  description: "A listener: an agent in a self-hosted cluster that runs external_container deployments.",
  id: { resolve: (l) => l.id },
  fields: (t) => ({
    uuid: t.exposeID("id", { description: "The REST id (listener_id)." }),
    computeType: t.field({ type: ComputeTypeEnum, resolve: (l) => l.computeType as "k8s" }),
    computeId: t.exposeString("computeId", { description: "The cluster's id; unique in the workspace." }),
    computeConfig: t.field({ type: ComputeConfig, resolve: (l) => objectOf(l.computeConfig) }),
    version: t.exposeString("version", { nullable: true }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
    updatedAt: t.expose("updatedAt", { type: "DateTime" }),
  }),
});

registerNode(ListenerRef, (ctx, id) => ctx.loaders.listener.load(id));

builder.queryField("listeners", (t) =>
  t.connection(
    {
      type: ListenerRef,
      description: `The workspace's listeners, newest first. ${PAGE_ARGS_DESCRIPTION}`,
      complexity: pageComplexity,
      resolve: async (_root, args, ctx) =>
        connection(
          await ctx.core.batch.relay(ctx.tenant, "graphql:listeners", args, (keyset) => ctx.core.batch.listenerPage(ctx.tenant, keyset)),
          () => ctx.core.batch.listenerCount(ctx.tenant),
        ),
    },
    { name: "ListenerConnection" },
    { name: "ListenerEdge" },
  ),
);

const ComputeConfigInput = builder.inputType("ListenerComputeConfigInput", {
  fields: (t) => ({ k8sNamespaces: t.stringList({ description: "Null: the listener's own namespace." }) }),
});

const ListenerCreateInput = builder.inputType("ListenerCreateInput", {
  fields: (t) => ({
    computeType: t.field({ type: ComputeTypeEnum, required: true }),
    computeId: t.string({ required: true, description: "The cluster's id; unique in the workspace." }),
    computeConfig: t.field({ type: ComputeConfigInput, required: true }),
    version: t.string(),
  }),
});

const ListenerUpdateInput = builder.inputType("ListenerUpdateInput", {
  description: "Only version and computeConfig can change; an omitted field keeps its value.",
  fields: (t) => ({
    version: t.string(),
    computeConfig: t.field({ type: ComputeConfigInput }),
  }),
});

interface ListenerPayload {
  listener?: Listener | null;
  userErrors: UserError[];
}

const payload = (name: string) =>
  builder.objectRef<ListenerPayload>(name).implement({
    fields: (t) => ({
      listener: t.field({ type: ListenerRef, nullable: true, resolve: (p) => p.listener ?? null }),
      userErrors: t.field({ type: [UserErrorType], resolve: (p) => p.userErrors }),
    }),
  });

const ListenerCreatePayload = payload("ListenerCreatePayload");
const ListenerUpdatePayload = payload("ListenerUpdatePayload");

const ListenerDeletePayload = builder
  .objectRef<{ deletedListenerId?: string | null; userErrors: UserError[] }>("ListenerDeletePayload")
  .implement({
    fields: (t) => ({
      deletedListenerId: t.id({ nullable: true, resolve: (p) => p.deletedListenerId ?? null }),
      userErrors: t.field({ type: [UserErrorType], resolve: (p) => p.userErrors }),
    }),
  });

const listenerId = (globalId: string) => requireId(globalId, "Listener");

builder.mutationFields((t) => ({
  listenerCreate: t.field({
    type: ListenerCreatePayload,
    description: "Registers a listener; its computeId must be unique in the workspace.",
    args: { input: t.arg({ type: ListenerCreateInput, required: true }) },
    resolve: (_root, { input }, ctx) => mutate(ctx, async () => ({ listener: await ctx.core.listeners.create(ctx.tenant, toRestBody(input)) })),
  }),
  listenerUpdate: t.field({
    type: ListenerUpdatePayload,
    description: "Changes a listener's version or compute config.",
    args: { id: t.arg.id({ required: true }), input: t.arg({ type: ListenerUpdateInput, required: true }) },
    resolve: (_root, { id, input }, ctx) =>
      mutate(ctx, async () => ({ listener: await ctx.core.listeners.update(ctx.tenant, listenerId(id), toRestBody(input)) }), { notFound: "id" }),
  }),
  listenerDelete: t.field({
    type: ListenerDeletePayload,
    description: "Removes a listener.",
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, { id }, ctx) =>
      mutate(ctx, async () => {
        await ctx.core.listeners.delete(ctx.tenant, listenerId(id));
        return { deletedListenerId: id };
      }, { notFound: "id" }),
  }),
}));
