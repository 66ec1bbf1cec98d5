import type { AgentConnection, CodehostInstallation, CodehostRepository, Deployment, Listener, OAuthFlow, OAuthProvider, OAuthToken, Revision, Workspace } from "../../generated/prisma/client.js";
import { builder } from "../builder.js";

// The node types' refs, apart from their fields, so that entity files can point at each other.
export const WorkspaceRef = builder.objectRef<Workspace>("Workspace");
export const DeploymentRef = builder.objectRef<Deployment>("Deployment");
export const RevisionRef = builder.objectRef<Revision>("Revision");
export const ListenerRef = builder.objectRef<Listener>("Listener");
export const InstallationRef = builder.objectRef<CodehostInstallation>("CodehostInstallation");
export const ConnectionRef = builder.objectRef<AgentConnection>("AgentConnection");
export const OAuthProviderRef = builder.objectRef<OAuthProvider>("OAuthProvider");
export const OAuthTokenRef = builder.objectRef<OAuthToken>("OAuthToken");
export const OAuthFlowRef = builder.objectRef<OAuthFlow>("OAuthFlow");
export const RepositoryRef = builder.objectRef<CodehostRepository>("CodehostRepository");
