import type { Deployment } from "../../generated/prisma/client.js";
import type { RevisionSummary } from "../../core/revision-reads.js";
import type { RevisionConfig } from "../../core/revisions.js";
import type { Position } from "../../core/pagination.js";
import type { AgentEnvironment } from "../../core/schemas/agent.js";
import { maskedSecrets } from "../../core/schemas/secrets.js";
import type { DeploymentStatus, Source } from "../../core/schemas/source.js";
import { type SecretReferenceView, secretReferencesView } from "./source-config.js";

/**
 * A deployment's row as the GraphQL face reads it, with its latest revision when a page's statement
 * read it along: its summary, or its config alone on a page whose selection shows no more of it
 * (latestRevisionRead in deployments.ts).
 */
export type DeploymentRow = Deployment & { latestRevision?: RevisionSummary | RevisionConfig | null };

interface AgentView {
  agentId: string;
  environment: AgentEnvironment;
}

/**
 * A deployment as GraphQL shows it: its row, and each field that shows a column or a small stored
 * JSON (secrets, secret references, agent) as an own property under its GraphQL name, which
 * graphql-jit answers by a property read where a resolver costs a call with its own resolve info,
 * path and closures (seven a deployment, 700 a list page of 100; 4–6 % of the page's server CPU,
 * bench/README.md). Properties rather than getters: graphql-jit reads a field again for each field
 * below it, and V8 does not inline getters into its handler of a page (getters for every field made
 * the page slower than the resolvers did). The source config, large with its resource spec, keeps
 * its resolver, so that a page that does not show it does not build it; so do the fields that load
 * or plan. Every field that answers a Deployment gives one of these (deploymentView).
 */
export class DeploymentView implements Position {
  /** The REST id (also what cursors are made of). */
  readonly id: string;
  readonly uuid: string;
  readonly tenantId: string;
  readonly createdAt: Date;
  readonly updatedAt: Date;
  readonly name: string;
  readonly displayName: string;
  readonly source: Source;
  readonly status: DeploymentStatus;
  readonly shareable: boolean;
  readonly routeThroughGateway: boolean;
  readonly tracerSessionId: string;
  readonly url: string;
  readonly isPreview: boolean;
  readonly imageVersion: string;
  readonly isManagedDeepAgent: boolean;
  readonly deploymentTier: string;
  readonly computeTier: string;
  readonly databaseTier: string;
  readonly remoteReconciled: boolean;
  readonly tagValueIds: string[];
  /** Names only: values are never shown. */
  readonly secrets: { name: string }[];
  readonly secretReferences: SecretReferenceView[];
  readonly agent: AgentView | null;

  constructor(readonly row: DeploymentRow) {
    this.id = row.id;
    this.uuid = row.id;
    this.tenantId = row.workspaceId;
    this.createdAt = row.createdAt;
    this.updatedAt = row.updatedAt;
    this.name = row.name;
    this.displayName = row.displayName;
    this.source = row.source as Source;
    this.status = row.status as DeploymentStatus;
    this.shareable = row.shareable;
    this.routeThroughGateway = row.routeThroughGateway;
    this.tracerSessionId = row.tracerSessionId;
    this.url = row.url;
    this.isPreview = row.isPreview;
    this.imageVersion = row.imageVersion;
    this.isManagedDeepAgent = row.isManagedDeepAgent;
    this.deploymentTier = row.deploymentTier;
    this.computeTier = row.computeTier;
    this.databaseTier = row.databaseTier;
    this.remoteReconciled = row.remoteReconciled;
    this.tagValueIds = row.tagValueIds;
    this.secrets = maskedSecrets(row.secrets).map(({ name }) => ({ name }));
    this.secretReferences = secretReferencesView(row.secretReferences);
    const { agentId, agentEnvironment } = row;
    this.agent = agentId && agentEnvironment ? { agentId, environment: agentEnvironment as AgentEnvironment } : null;
  }
}

export const deploymentView = (row: DeploymentRow) => new DeploymentView(row);

/** deploymentView for a field that may have no deployment (a deleted one, a payload of an error). */
export const deploymentViewOrNull = (row: DeploymentRow | null | undefined) => (row ? new DeploymentView(row) : null);
