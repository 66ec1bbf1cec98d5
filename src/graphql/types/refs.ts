import type { AgentConnection, CodehostInstallation, CodehostRepository, Listener, OAuthFlow, OAuthProvider, OAuthToken, Revision, Workspace } from "../../generated/prisma/client.js";
import type { RevisionSummary } from "../../core/revision-reads.js";
import { builder } from "../builder.js";
import type { DeploymentView } from "./deployment-view.js";

/**
 * A revision as the GraphQL face holds it: at least its summary (what pages and loaders read), or
 * the whole row (mutations, subscriptions). Fields outside the summary load the row when it is not
 * there (src/graphql/types/revisions.ts).
 */
export type RevisionView = RevisionSummary & Partial<Revision>;

// The node types' refs, apart from their fields, so that entity files can point at each other.
export const WorkspaceRef = builder.objectRef<Workspace>("Workspace");
export const DeploymentRef = builder.objectRef<DeploymentView>("Deployment");
export const RevisionRef = builder.objectRef<RevisionView>("Revision");
export const ListenerRef = builder.objectRef<Listener>("Listener");
export const InstallationRef = builder.objectRef<CodehostInstallation>("CodehostInstallation");
export const ConnectionRef = builder.objectRef<AgentConnection>("AgentConnection");
export const OAuthProviderRef = builder.objectRef<OAuthProvider>("OAuthProvider");
export const OAuthTokenRef = builder.objectRef<OAuthToken>("OAuthToken");
export const OAuthFlowRef = builder.objectRef<OAuthFlow>("OAuthFlow");
export const RepositoryRef = builder.objectRef<CodehostRepository>("CodehostRepository");
