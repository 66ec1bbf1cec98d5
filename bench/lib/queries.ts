/**
 * GraphQL selections holding the same data as the REST answers (SPEC.md's Deployment and Revision),
 * so that list and nested compare like with like. REST ids (`uuid`) stand for REST's `id`, and the
 * revision ids REST returns as columns (`latest_revision_id`, `active_revision_id`) are selected as
 * `latestRevision { uuid }` / `activeRevision { uuid }`, which is how the schema offers them.
 */

const RESOURCE_SPEC = `resourceSpec {
  minScale maxScale cpu cpuLimit memoryMb memoryLimitMb
  queueMinScale queueMaxScale queueCpu queueCpuLimit queueMemoryMb queueMemoryLimitMb
  cacheCpu cacheCpuLimit cacheMemoryMb cacheMemoryLimitMb
  coreCpu coreCpuLimit coreMemoryMb coreMemoryLimitMb
  dbCpu dbCpuLimit dbMemoryMb dbMemoryLimitMb dbStorageGi dbMaxConnections
  labels annotations serviceAccountName
  cpuTargetPercent cpuScalingEnabled cpuLimitEnabled queueCpuTargetPercent queueCpuScalingEnabled queueCpuLimitEnabled
}`;

/** A source config's fields, its resource spec's included (bench/views.ts shows them alone). */
export const SOURCE_CONFIG_FIELDS = `
    integrationId repoUrl buildOnPush customUrl ${RESOURCE_SPEC}
    listenerId listenerConfig { k8sNamespace } installCommand buildCommand deploymentType repoBranch`;

const SOURCE_REVISION_CONFIG = `sourceRevisionConfig { repoRef frameworkConfigPath imageUri sourceTarballPath repoCommitSha repoCommitTitle }`;

/** A REST Deployment's fields. */
export const DEPLOYMENT_FIELDS = `
  uuid tenantId createdAt updatedAt name displayName source
  sourceConfig { ${SOURCE_CONFIG_FIELDS} }
  ${SOURCE_REVISION_CONFIG}
  secrets { name } secretReferences { name secretName secretKey }
  status latestRevision { uuid } activeRevision { uuid }
  agent { agentId environment }
  shareable routeThroughGateway tracerSessionId url isPreview imageVersion isManagedDeepAgent
  deploymentTier computeTier databaseTier`;

/** A REST Revision's fields. */
export const REVISION_FIELDS = `uuid createdAt updatedAt status source ${SOURCE_REVISION_CONFIG} statusMessage`;

/** The list benchmark: one page of deployments, as GET /v2/deployments?limit=N returns it. */
export const LIST_QUERY = `query ListDeployments($first: Int!) {
  deployments(first: $first) {
    edges { node { ${DEPLOYMENT_FIELDS} } }
    pageInfo { hasNextPage endCursor }
  }
}`;

/** The nested benchmark: a page of deployments, each with its latest revision and its first 5 revisions. */
export const NESTED_QUERY = `query DeploymentsWithRevisions($first: Int!) {
  deployments(first: $first) {
    edges {
      node {
        ${DEPLOYMENT_FIELDS}
        latestRevision { ${REVISION_FIELDS} }
        revisions(first: 5) { edges { node { ${REVISION_FIELDS} } } }
      }
    }
    pageInfo { hasNextPage endCursor }
  }
}`;
