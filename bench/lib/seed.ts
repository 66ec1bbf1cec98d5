import { randomBytes } from "node:crypto";
import { type Client, mapLimit, pollUntil } from "./http.js";

/** The fields of a REST deployment the benchmarks use. */
export interface RestDeployment {
  id: string;
  name: string;
  latest_revision_id: string;
  [field: string]: unknown;
}

export interface RestRevision {
  id: string;
  status: string;
  [field: string]: unknown;
}

/** A resource spec as a team that sizes its deployment gives it (SPEC.md's Resource spec). */
export const SIZED_SPEC = {
  min_scale: 1,
  max_scale: 3,
  cpu: 0.5,
  cpu_limit: 1,
  memory_mb: 1024,
  memory_limit_mb: 2048,
  labels: { team: "agents" },
  service_account_name: "agent",
};

/** What the command-line tool of COMPAT.md sends to create a deployment; with a resource spec if given. */
export const deploymentBody = (name: string, resourceSpec?: Record<string, unknown>) => ({
  name,
  source: "internal_container",
  source_config: { deployment_type: "dev", ...(resourceSpec && { resource_spec: resourceSpec }) },
  source_revision_config: { image_uri: `registry.example.com/agents/${name}:1` },
});

/** Creates n deployments through POST /v2/deployments, `concurrency` at a time. */
export async function seedDeployments(client: Client, n: number, concurrency = 8, resourceSpec?: Record<string, unknown>): Promise<RestDeployment[]> {
  const run = randomBytes(3).toString("hex");
  const names = Array.from({ length: n }, (_, i) => `bench-${run}-${String(i).padStart(5, "0")}`);
  return mapLimit(names, concurrency, (name) => client.expect<RestDeployment>(201, "POST", "/v2/deployments", deploymentBody(name, resourceSpec)));
}

/** Adds `count` revisions to each deployment through POST /v2/deployments/{id}/revisions (one at a time per deployment). */
export async function seedRevisions(client: Client, deployments: RestDeployment[], count: number, concurrency = 8): Promise<void> {
  await mapLimit(deployments, concurrency, async (d) => {
    for (let i = 0; i < count; i++) {
      await client.expect<RestRevision>(201, "POST", `/v2/deployments/${d.id}/revisions`, {
        source_revision_config: { image_uri: `registry.example.com/agents/${d.name}:${i + 2}` },
      });
    }
  });
}

/**
 * Polls until no deployment still waits for its first revision (a deployment becomes READY when its
 * first revision is DEPLOYED): one light request a second. A failed revision leaves its deployment
 * waiting, so that the deadline ends the run and an audit shows the statuses.
 */
export async function waitAllDeployed(client: Client, timeoutSeconds: number): Promise<void> {
  await pollUntil("every deployment READY", timeoutSeconds * 1000, 1000, async () => {
    const page = await client.expect<{ resources: RestDeployment[] }>(200, "GET", "/v2/deployments?status=AWAITING_DATABASE&limit=1");
    return page.resources.length === 0 ? true : undefined;
  });
}

/** PIPELINE_STEP_MS for a seeding server whose pipeline deploys what it seeds: steps of 10 ms. */
export const SEED_STEP_MS = "10";

/**
 * Polls until every deployment serves its latest revision (active_revision_id = latest_revision_id:
 * the pipeline has deployed the last one, and skipped those it superseded), as a workspace at rest
 * looks; the list pages are read once a second. The seeding server runs its pipeline with SEED_STEP_MS.
 */
export async function waitAllServingLatest(client: Client, timeoutSeconds: number): Promise<void> {
  await pollUntil("every deployment serving its latest revision", timeoutSeconds * 1000, 1000, async () => {
    for (let offset = 0; ; offset += 100) {
      const page = await client.expect<{ resources: RestDeployment[] }>(200, "GET", `/v2/deployments?limit=100&offset=${offset}`);
      if (page.resources.some((d) => d.active_revision_id !== d.latest_revision_id)) return undefined;
      if (page.resources.length < 100) return true;
    }
  });
}
