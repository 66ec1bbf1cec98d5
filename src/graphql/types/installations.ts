import type { CodehostInstallation } from "../../core/installations.js";
import { builder } from "../builder.js";
import { mutate, type UserError, UserErrorType } from "../errors.js";
import { toRestBody } from "../input-names.js";
import { REPOSITORIES_PER_OPERATION } from "../loaders.js";
import { registerNode, requireId } from "../nodes.js";
import { connection, PAGE_ARGS_DESCRIPTION, pageComplexity } from "../paging.js";
import { RepositorySelectionEnum } from "./enums.js";
import { InstallationRef, RepositoryRef } from "./refs.js";

builder.objectType(RepositoryRef, {
  description: "A repository an installation gives access to, as registered with it.",
  fields: (t) => ({
    repositoryId: t.exposeInt("repositoryId", { description: "The repository's id at the provider." }),
    name: t.exposeString("name"),
    owner: t.exposeString("owner"),
    url: t.exposeString("url"),
    defaultBranch: t.exposeString("defaultBranch"),
  }),
});

builder.node(InstallationRef, {
  description: "A code-hosting installation: the provider account a codehost deployment reads its repository through.",
  id: { resolve: (i) => i.id },
  fields: (t) => ({
    uuid: t.exposeID("id", { description: "The REST id: the integration_id of a codehost deployment's source config." }),
    installationId: t.exposeInt("installationId", { description: "The installation's id at the provider." }),
    name: t.exposeString("name", { description: "The provider account's name." }),
    repositorySelection: t.field({
      type: RepositorySelectionEnum,
      nullable: true,
      resolve: (i) => (i.repositorySelection === "all" || i.repositorySelection === "selected" ? i.repositorySelection : null),
    }),
    settingsUrl: t.exposeString("settingsUrl", { nullable: true, description: "Where repository access is edited at the provider." }),
    repositories: t.field({
      type: [RepositoryRef],
      description: `The repositories registered with the installation, by owner and name. One operation reads at most ${REPOSITORIES_PER_OPERATION.toLocaleString("en")} of them, of all the installations it shows: more is refused (BAD_REQUEST), never cut short.`,
      resolve: (i, _args, ctx) => ctx.loaders.repositories.load(i.id),
    }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
  }),
});

registerNode(InstallationRef, (ctx, id) => ctx.loaders.installation.load(id));

builder.queryField("codehostInstallations", (t) =>
  t.connection(
    {
      type: InstallationRef,
      description: `The workspace's code-hosting installations, newest first. ${PAGE_ARGS_DESCRIPTION}`,
      complexity: pageComplexity,
      resolve: async (_root, args, ctx) =>
        connection(
          await ctx.core.batch.relay(ctx.tenant, "graphql:codehost-installations", args, (keyset) => ctx.core.installations.keyset(ctx.tenant, keyset)),
          () => ctx.core.batch.installationCount(ctx.tenant),
        ),
    },
    { name: "CodehostInstallationConnection" },
    { name: "CodehostInstallationEdge" },
  ),
);

const RepositoryInput = builder.inputType("CodehostRepositoryInput", {
  fields: (t) => ({
    id: t.int({ required: true, description: "The repository's id at the provider." }),
    name: t.string({ required: true }),
    owner: t.string({ required: true }),
    url: t.string({ required: true }),
    defaultBranch: t.string({ description: "main unless given." }),
  }),
});

const RegisterInput = builder.inputType("CodehostInstallationRegisterInput", {
  fields: (t) => ({
    installationId: t.int({ required: true, description: "The installation's id at the provider." }),
    name: t.string({ required: true }),
    repositorySelection: t.field({ type: RepositorySelectionEnum }),
    settingsUrl: t.string({ description: "An https deep link to the installation's settings at the provider." }),
    repositories: t.field({ type: [RepositoryInput], description: "The repositories it gives access to." }),
  }),
});

const RegisterPayload = builder
  .objectRef<{ codehostInstallation?: CodehostInstallation | null; userErrors: UserError[] }>("CodehostInstallationRegisterPayload")
  .implement({
    fields: (t) => ({
      codehostInstallation: t.field({ type: InstallationRef, nullable: true, resolve: (p) => p.codehostInstallation ?? null }),
      userErrors: t.field({ type: [UserErrorType], resolve: (p) => p.userErrors }),
    }),
  });

builder.mutationField("codehostInstallationRegister", (t) =>
  t.field({
    type: RegisterPayload,
    description: "Registers an installation made at the provider with this workspace.",
    args: { input: t.arg({ type: RegisterInput, required: true }) },
    resolve: (_root, { input }, ctx) =>
      mutate(ctx, async () => ({ codehostInstallation: await ctx.core.installations.register(ctx.tenant, toRestBody(input)) })),
  }),
);

const RepositoriesSetInput = builder.inputType("CodehostRepositoriesSetInput", {
  fields: (t) => ({ repositories: t.field({ type: [RepositoryInput], required: true }) }),
});

const RepositoriesSetPayload = builder
  .objectRef<{ codehostInstallation?: CodehostInstallation | null; userErrors: UserError[] }>("CodehostInstallationRepositoriesSetPayload")
  .implement({
    fields: (t) => ({
      codehostInstallation: t.field({ type: InstallationRef, nullable: true, resolve: (p) => p.codehostInstallation ?? null }),
      userErrors: t.field({ type: [UserErrorType], resolve: (p) => p.userErrors }),
    }),
  });

builder.mutationField("codehostInstallationRepositoriesSet", (t) =>
  t.field({
    type: RepositoriesSetPayload,
    description: "Replaces the repositories registered with an installation (what it gives access to at the provider).",
    args: { id: t.arg.id({ required: true }), input: t.arg({ type: RepositoriesSetInput, required: true }) },
    resolve: (_root, { id, input }, ctx) =>
      mutate(ctx, async () => {
        const integrationId = requireId(id, "CodehostInstallation");
        await ctx.core.repositories.replace(ctx.tenant, integrationId, toRestBody(input));
        return { codehostInstallation: await ctx.loaders.installation.load(integrationId) };
      }, { notFound: "id" }),
  }),
);
