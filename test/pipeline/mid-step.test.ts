import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/app.js";
import { listenerBody } from "../support/fixtures.js";

// Through app.fetch with steps long enough (1 s) to act on a revision while a step is under way.
const TERMINAL = ["DEPLOYED", "CREATE_FAILED", "BUILD_FAILED", "DEPLOY_FAILED", "SKIPPED", "INTERRUPTED"];

describe("interrupting, and references gone mid-step, through REST (1 s steps)", () => {
  let slow: TestApp;
  beforeAll(async () => {
    // Steps long enough to catch a revision mid-build.
    slow = await startTestApp({ PIPELINE_STEP_MS: "1000" });
  });
  afterAll(() => slow.close());

  it("makes an in-flight revision INTERRUPTED; the pipeline does not move it again; a second interrupt is 400", async () => {
    const { apiKey: key } = await slow.workspace();
    const created = await slow.request("POST", "/v2/deployments", {
      key,
      body: { name: "stop-me", source: "internal_container", source_revision_config: { image_uri: "r.example/a:1" } },
    });
    const id = created.body.id;
    const rid = created.body.latest_revision_id;
    const path = `/v2/deployments/${id}/revisions/${rid}`;
    const deadline = Date.now() + 20_000;
    while ((await slow.request("GET", path, { key })).body.status !== "BUILDING") {
      if (Date.now() > deadline) throw new Error("never reached BUILDING");
      await sleep(20);
    }
    const interrupted = await slow.request("POST", `${path}/interrupt`, { key });
    expect(interrupted.status).toBe(200);
    expect(interrupted.body).toMatchObject({ id: rid, status: "INTERRUPTED", status_message: "Interrupted by a user" });
    // Longer than a step: the build the worker was doing finishes and is thrown away.
    await sleep(1500);
    const after = await slow.request("GET", path, { key });
    expect(after.body.status).toBe("INTERRUPTED");
    const events = await slow.app.db.prisma.revisionEvent.findMany({ where: { revisionId: rid }, orderBy: { id: "asc" } });
    expect(events.map((e) => e.toStatus)).toEqual(["CREATING", "QUEUED", "AWAITING_BUILD", "BUILDING", "INTERRUPTED"]);
    const again = await slow.request("POST", `${path}/interrupt`, { key });
    expect(again.status).toBe(400);
    expect(again.body.detail).toBe(`Revision ${rid} cannot be interrupted: revision is already INTERRUPTED.`);
    expect(await (await slow.request("GET", `/v2/deployments/${id}`, { key })).body).toMatchObject({ status: "AWAITING_DATABASE", active_revision_id: null });
  });

  it("fails with CREATE_FAILED when the listener of a self-hosted deployment is gone before its create step ends", async () => {
    const { apiKey: key } = await slow.workspace();
    const listener = await slow.request("POST", "/v2/listeners", { key, body: listenerBody({ compute_id: "cluster-1" }) });
    const created = await slow.request("POST", "/v2/deployments", {
      key,
      body: {
        name: "self-hosted",
        source: "external_container",
        source_config: { listener_id: listener.body.id },
        source_revision_config: { image_uri: "docker.io/acme/agent:1" },
      },
    });
    expect(created.status).toBe(201);
    expect((await slow.request("DELETE", `/v2/listeners/${listener.body.id}`, { key })).status).toBe(204);
    const path = `/v2/deployments/${created.body.id}/revisions/${created.body.latest_revision_id}`;
    const deadline = Date.now() + 20_000;
    let revision = (await slow.request("GET", path, { key })).body;
    while (!TERMINAL.includes(revision.status) && Date.now() < deadline) {
      await sleep(50);
      revision = (await slow.request("GET", path, { key })).body;
    }
    expect(revision.status).toBe("CREATE_FAILED");
    expect(revision.status_message).toContain(`listener ${listener.body.id} of this deployment no longer exists`);
    expect(revision.status_message).toContain("POST /v2/listeners");
  });
});
