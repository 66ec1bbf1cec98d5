import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { type DomainEvent, topics } from "../../src/events/types.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { listenerBody } from "../support/fixtures.js";

// COMPAT.md's client flows end to end through app.fetch, with the embedded worker and simulator
// running 20 ms steps.
let t: TestApp;

beforeAll(async () => {
  t = await startTestApp({ PIPELINE_STEP_MS: "20" });
});
afterAll(() => t.close());

const TERMINAL = ["DEPLOYED", "CREATE_FAILED", "BUILD_FAILED", "DEPLOY_FAILED", "SKIPPED", "INTERRUPTED"];
const MANAGED = ["CREATING", "QUEUED", "AWAITING_BUILD", "BUILDING", "AWAITING_DEPLOY", "DEPLOYING", "DEPLOYED"];

/**
 * As the CI script polls: GET the revision until DEPLOYED, stopping as soon as the status contains
 * FAILED (or is another terminal status). Returns the last revision and every status seen.
 */
async function poll(key: string, deploymentId: string, revisionId: string, timeoutMs = 20_000) {
  const seen: string[] = [];
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await t.request("GET", `/v2/deployments/${deploymentId}/revisions/${revisionId}`, { key });
    expect(res.status).toBe(200);
    if (seen.at(-1) !== res.body.status) seen.push(res.body.status);
    if (res.body.status === "DEPLOYED" || res.body.status.includes("FAILED") || TERMINAL.includes(res.body.status)) {
      return { revision: res.body, seen };
    }
    if (Date.now() > deadline) throw new Error(`revision ${revisionId} still ${res.body.status}; seen ${seen.join(" → ")}`);
    await sleep(40);
  }
}

const deploymentOf = async (key: string, id: string) => (await t.request("GET", `/v2/deployments/${id}`, { key })).body;

/** Statuses seen in order must follow the documented order (a poller may miss some in between). */
const inOrder = (seen: string[], order: string[]) => {
  const positions = seen.map((s) => order.indexOf(s));
  expect(positions.every((p) => p >= 0)).toBe(true);
  expect(positions).toEqual([...positions].sort((a, b) => a - b));
};

describe("the CI script's flow (COMPAT.md, How clients drive a deployment, 1)", () => {
  let ws: NewWorkspace;
  beforeAll(async () => {
    ws = await t.workspace();
  });

  it("creates, polls to DEPLOYED, patches, polls the new revision to DEPLOYED, and deletes", async () => {
    const key = ws.apiKey;
    const inst = await t.request("POST", "/v2/integrations/forge-codehost/installations", {
      key,
      body: { installation_id: 4242, name: "acme" },
    });
    expect(inst.status).toBe(201);
    const created = await t.request("POST", "/v2/deployments", {
      key,
      body: {
        name: "ci-agent",
        source: "codehost",
        source_config: { integration_id: inst.body.id, repo_url: "https://forge.example/acme/agent", deployment_type: "dev" },
        source_revision_config: { repo_ref: "main", framework_config_path: "agent.json" },
        secrets: [{ name: "OPENAI_API_KEY", value: "sk-test" }],
      },
    });
    expect(created.status).toBe(201);
    expect(created.body.status).toBe("AWAITING_DATABASE");
    const id = created.body.id;

    const listed = await t.request("GET", `/v2/deployments/${id}/revisions`, { key });
    expect(listed.status).toBe(200);
    const firstId = listed.body.resources[0].id;
    expect(firstId).toBe(created.body.latest_revision_id);

    const first = await poll(key, id, firstId);
    expect(first.revision.status).toBe("DEPLOYED");
    inOrder(first.seen, MANAGED);
    expect(first.revision.status_message).toBe("Deployed");
    expect(first.revision.source_revision_config).toMatchObject({
      repo_ref: "main",
      repo_commit_sha: expect.stringMatching(/^[0-9a-f]{40}$/),
      repo_commit_title: expect.stringContaining("acme/agent"),
    });
    expect(first.revision.updated_at > first.revision.created_at).toBe(true);
    let deployment = await deploymentOf(key, id);
    expect(deployment).toMatchObject({ status: "READY", active_revision_id: firstId, latest_revision_id: firstId });
    expect(deployment.source_revision_config.repo_commit_sha).toBe(first.revision.source_revision_config.repo_commit_sha);

    const patched = await t.request("PATCH", `/v2/deployments/${id}`, {
      key,
      body: { source_revision_config: { repo_ref: "release-2" } },
    });
    expect(patched.status).toBe(200);
    const again = await t.request("GET", `/v2/deployments/${id}/revisions`, { key });
    const secondId = again.body.resources[0].id;
    expect(secondId).not.toBe(firstId);
    const second = await poll(key, id, secondId);
    expect(second.revision.status).toBe("DEPLOYED");
    expect(second.revision.source_revision_config.repo_commit_sha).not.toBe(first.revision.source_revision_config.repo_commit_sha);
    deployment = await deploymentOf(key, id);
    expect(deployment).toMatchObject({ status: "READY", active_revision_id: secondId, latest_revision_id: secondId });

    const seen: DomainEvent[] = [];
    const off = t.app.deps.events.subscribe(topics.deploymentStatus(id), (e) => seen.push(e));
    const deleted = await t.request("DELETE", `/v2/deployments/${id}`, { key });
    off();
    expect(deleted.status).toBe(204);
    expect(deleted.text).toBe("");
    // Deleting passed through AWAITING_DELETE, and said so.
    expect(seen).toEqual([{ type: "deployment.status", workspaceId: ws.workspaceId, deploymentId: id, status: "AWAITING_DELETE" }]);
    expect((await t.request("GET", `/v2/deployments/${id}`, { key })).status).toBe(404);
  });
});

describe("the command-line tool's flow (COMPAT.md, How clients drive a deployment, 2)", () => {
  it("finds no deployment by name, creates one, pushes an image with PATCH, and polls the newest revision to DEPLOYED", async () => {
    const { apiKey: key } = await t.workspace();
    const name = `cli-${randomUUID().slice(0, 8)}`;
    const search = await t.request("GET", `/v2/deployments?name_contains=${name}&limit=100`, { key });
    expect(search.status).toBe(200);
    expect(search.body.resources.filter((d: { name: string }) => d.name === name)).toEqual([]);

    const created = await t.request("POST", "/v2/deployments", {
      key,
      body: { name, source: "internal_container", source_config: { deployment_type: "dev" }, source_revision_config: {} },
    });
    expect(created.status).toBe(201);
    const id = created.body.id;
    const patched = await t.request("PATCH", `/v2/deployments/${id}`, {
      key,
      body: { revision_source: "internal_container", source_revision_config: { image_uri: "registry.example/cli/agent:1" } },
    });
    expect(patched.status).toBe(200);

    const newest = await t.request("GET", `/v2/deployments/${id}/revisions?limit=1`, { key });
    expect(newest.body.resources).toHaveLength(1);
    const revId = newest.body.resources[0].id;
    expect(revId).toBe(patched.body.latest_revision_id);
    const done = await poll(key, id, revId);
    expect(done.revision.status).toBe("DEPLOYED");
    expect(done.revision.source_revision_config.image_uri).toBe("registry.example/cli/agent:1");
    inOrder(done.seen, MANAGED);

    // The first revision ended too: SKIPPED if the image came before it started building, else DEPLOYED first.
    const all = await t.request("GET", `/v2/deployments/${id}/revisions`, { key });
    expect(all.body.resources.map((r: { id: string }) => r.id)).toEqual([revId, created.body.latest_revision_id]);
    expect(["SKIPPED", "DEPLOYED"]).toContain(all.body.resources[1].status);
    const byName = await t.request("GET", `/v2/deployments?name_contains=${name}&limit=100`, { key });
    expect(byName.body.resources.find((d: { name: string }) => d.name === name)).toMatchObject({ id, status: "READY", active_revision_id: revId });
  });
});

describe("failure paths, SKIPPED and redeploy through REST", () => {
  for (const [label, status] of [
    ["create", "CREATE_FAILED"],
    ["build", "BUILD_FAILED"],
    ["deploy", "DEPLOY_FAILED"],
  ] as const) {
    it(`ends in ${status} with an actionable status_message (simulate/failure=${label})`, async () => {
      const { apiKey: key } = await t.workspace();
      const created = await t.request("POST", "/v2/deployments", {
        key,
        body: {
          name: `fails-${label}`,
          source: "internal_container",
          source_config: { resource_spec: { labels: { "simulate/failure": label } } },
          source_revision_config: { image_uri: "registry.example/a:1" },
        },
      });
      expect(created.status).toBe(201);
      const { revision, seen } = await poll(key, created.body.id, created.body.latest_revision_id);
      expect(revision.status).toBe(status);
      expect(seen.at(-1)).toBe(status);
      expect(revision.status_message).toContain(`"simulate/failure": "${label}"`);
      expect(revision.status_message).toContain("Remove that label and create a new revision");
      expect(await deploymentOf(key, created.body.id)).toMatchObject({ status: "AWAITING_DATABASE", active_revision_id: null });
      // A terminal revision cannot be interrupted.
      const interrupt = await t.request("POST", `/v2/deployments/${created.body.id}/revisions/${revision.id}/interrupt`, { key });
      expect(interrupt.status).toBe(400);
      expect(interrupt.body.detail).toContain(`already ${status}`);
    });
  }

  it("deploys a self-hosted (external_container) revision without build statuses", async () => {
    const { apiKey: key } = await t.workspace();
    const listener = await t.request("POST", "/v2/listeners", { key, body: listenerBody({ compute_id: "cluster-1" }) });
    const created = await t.request("POST", "/v2/deployments", {
      key,
      body: {
        name: "self-hosted",
        source: "external_container",
        source_config: { listener_id: listener.body.id },
        source_revision_config: { image_uri: "docker.io/acme/agent:1" },
      },
    });
    expect(created.status).toBe(201);
    const done = await poll(key, created.body.id, created.body.latest_revision_id);
    expect(done.revision.status).toBe("DEPLOYED");
    inOrder(done.seen, ["CREATING", "QUEUED", "AWAITING_DEPLOY", "DEPLOYING", "DEPLOYED"]);
    const events = await t.app.db.prisma.revisionEvent.findMany({ where: { revisionId: done.revision.id }, orderBy: { id: "asc" } });
    expect(events.map((e) => e.toStatus)).toEqual(["CREATING", "QUEUED", "AWAITING_DEPLOY", "DEPLOYING", "DEPLOYED"]);
  });

  it("makes older revisions that have not started SKIPPED when newer ones are created, and deploys the newest", async () => {
    const { apiKey: key } = await t.workspace();
    const created = await t.request("POST", "/v2/deployments", {
      key,
      body: { name: "busy", source: "internal_container", source_revision_config: { image_uri: "r.example/a:1" } },
    });
    const id = created.body.id;
    const ids = [created.body.latest_revision_id];
    for (const tag of ["2", "3", "4"]) {
      const res = await t.request("POST", `/v2/deployments/${id}/revisions`, { key, body: { source_revision_config: { image_uri: `r.example/a:${tag}` } } });
      expect(res.status).toBe(201);
      ids.push(res.body.id);
    }
    const newest = await poll(key, id, ids[3]!);
    expect(newest.revision.status).toBe("DEPLOYED");
    const statuses = [];
    for (const rid of ids.slice(0, 3)) statuses.push((await poll(key, id, rid)).revision);
    // Each older one was skipped unless it had started building before the next came.
    for (const r of statuses) expect(["SKIPPED", "DEPLOYED"]).toContain(r.status);
    expect(statuses.some((r) => r.status === "SKIPPED")).toBe(true);
    const skipped = statuses.find((r) => r.status === "SKIPPED")!;
    expect(skipped.status_message).toMatch(/^Skipped: revision [0-9a-f-]{36}, created after it, supersedes it$/);
    expect(await deploymentOf(key, id)).toMatchObject({ status: "READY", active_revision_id: ids[3], latest_revision_id: ids[3] });
  });

  it("redeploys an earlier revision's configuration as a new revision that becomes active (a rollback)", async () => {
    const { apiKey: key } = await t.workspace();
    const created = await t.request("POST", "/v2/deployments", {
      key,
      body: { name: "rollback", source: "internal_container", source_revision_config: { image_uri: "r.example/a:1" } },
    });
    const id = created.body.id;
    const v1 = created.body.latest_revision_id;
    await poll(key, id, v1);
    const v2 = await t.request("POST", `/v2/deployments/${id}/revisions`, { key, body: { source_revision_config: { image_uri: "r.example/a:2" } } });
    expect((await poll(key, id, v2.body.id)).revision.status).toBe("DEPLOYED");

    const redeployed = await t.request("POST", `/v2/deployments/${id}/revisions/${v1}/redeploy`, { key });
    expect(redeployed.status).toBe(200);
    const v3 = redeployed.body.latest_revision_id;
    expect([v1, v2.body.id]).not.toContain(v3);
    const done = await poll(key, id, v3);
    expect(done.revision).toMatchObject({ status: "DEPLOYED", source_revision_config: expect.objectContaining({ image_uri: "r.example/a:1" }) });
    expect(await deploymentOf(key, id)).toMatchObject({ active_revision_id: v3, status: "READY" });
  });
});
