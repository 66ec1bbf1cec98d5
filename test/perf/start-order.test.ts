import { afterEach, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/app.js";

let t: TestApp | null = null;
afterEach(async () => {
  await t?.close();
  t = null;
});

/** A deployment whose first revision waits for the pipeline; returns a reader of that revision's status. */
async function waitingRevision(app: TestApp) {
  const ws = await app.workspace();
  const res = await app.request("POST", "/v2/deployments", {
    key: ws.apiKey,
    body: { name: "waits", source: "internal_container", source_revision_config: { image_uri: "registry.example.com/w:1" } },
  });
  expect(res.status).toBe(201);
  const path = `/v2/deployments/${res.body.id}/revisions/${res.body.latest_revision_id}`;
  return async () => (await app.request("GET", path, { key: ws.apiKey })).body.status as string;
}

async function deployedWithin(status: () => Promise<string>, ms: number): Promise<string> {
  const deadline = Date.now() + ms;
  let seen = await status();
  while (seen !== "DEPLOYED" && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
    seen = await status();
  }
  return seen;
}

describe("the pipeline worker of a served app (main.ts) starts after readiness", () => {
  it("does nothing before the server listens, and starts once /readyz has answered ready", async () => {
    t = await startTestApp({ PIPELINE_STEP_MS: "20" }, undefined, { workerStart: "listen" });
    const status = await waitingRevision(t);
    await new Promise((r) => setTimeout(r, 1_500));
    expect(await status()).toBe("CREATING");

    const url = await t.app.start();
    const ready = await fetch(`${url}/readyz`);
    expect(ready.status).toBe(200);
    expect(await deployedWithin(status, 10_000)).toBe("DEPLOYED");
  });

  it("starts a second after listening when nothing probes it", async () => {
    t = await startTestApp({ PIPELINE_STEP_MS: "20" }, undefined, { workerStart: "listen" });
    const status = await waitingRevision(t);
    await t.app.start();
    expect(await deployedWithin(status, 10_000)).toBe("DEPLOYED");
  });
});
