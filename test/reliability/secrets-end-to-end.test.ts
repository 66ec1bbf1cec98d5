import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rotateSecrets } from "../../src/core/secret-rotation.js";
import { MASK, SecretBox } from "../../src/core/secrets.js";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { CIPHERTEXT } from "../support/leak-guard.js";
import { type TestApp, startTestApp } from "../support/app.js";

const OLD = Buffer.alloc(32, 21);
const NEW = Buffer.alloc(32, 22);

let t: TestApp;
let ws: NewWorkspace;

beforeAll(async () => {
  // A running pipeline too: its log lines are watched as well.
  t = await startTestApp({ SECRETS_KEY: OLD.toString("base64"), PIPELINE_STEP_MS: "5" });
  ws = await t.workspace();
});
afterAll(async () => {
  // The whole file: no log line, response or row held a plain value, and stored values are ciphertext.
  await t.close();
});

const deployment = (name: string, secrets: { name: string; value: string }[]) => ({
  name,
  source: "internal_container",
  source_config: { deployment_type: "dev" },
  source_revision_config: { image_uri: "registry.example/agent:1" },
  secrets,
});

describe("secrets through the REST face", () => {
  const plain: Record<string, string> = {};

  it("are masked in every answer, replayed answers included, and sealed at rest", async () => {
    plain.API_TOKEN = t.guard.secret();
    plain.DB_PASSWORD = t.guard.secret();
    const body = deployment("leaky", [
      { name: "API_TOKEN", value: plain.API_TOKEN },
      { name: "DB_PASSWORD", value: plain.DB_PASSWORD },
    ]);
    const created = await t.request("POST", "/v2/deployments", { key: ws.apiKey, body, headers: { "idempotency-key": "create-leaky" } });
    expect(created.status).toBe(201);
    expect(created.body.secrets).toEqual([
      { name: "API_TOKEN", value: MASK },
      { name: "DB_PASSWORD", value: MASK },
    ]);
    const replay = await t.request("POST", "/v2/deployments", { key: ws.apiKey, body, headers: { "idempotency-key": "create-leaky" } });
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.body).toEqual(created.body);
    const id = created.body.id;

    plain.ROTATED = t.guard.secret();
    const patched = await t.request("PATCH", `/v2/deployments/${id}`, {
      key: ws.apiKey,
      body: { secrets: [{ name: "API_TOKEN", value: plain.API_TOKEN }, { name: "ROTATED", value: plain.ROTATED }] },
    });
    expect(patched.status).toBe(200);
    plain.REVISION_ONLY = t.guard.secret();
    const revision = await t.request("POST", `/v2/deployments/${id}/revisions`, {
      key: ws.apiKey,
      body: { secrets: [{ name: "REVISION_ONLY", value: plain.REVISION_ONLY }] },
      headers: { "idempotency-key": "rev-1" },
    });
    expect(revision.status).toBe(201);

    // Reads of every kind while the pipeline works on the revisions.
    await sleep(200);
    expect((await t.request("GET", `/v2/deployments/${id}`, { key: ws.apiKey })).body.secrets.every((s: { value: string }) => s.value === MASK)).toBe(true);
    const revisions = await t.request("GET", `/v2/deployments/${id}/revisions`, { key: ws.apiKey });
    expect(revisions.status).toBe(200);
    for (const r of revisions.body.resources) expect((await t.request("GET", `/v2/deployments/${id}/revisions/${r.id}`, { key: ws.apiKey })).status).toBe(200);
    expect((await t.request("GET", `/v2/deployments?name=leaky`, { key: ws.apiKey })).body.resources).toHaveLength(1);
    // A bad request that carries a secret: the 422 must not echo it.
    const bad = await t.request("POST", "/v2/deployments", {
      key: ws.apiKey,
      body: {
        ...deployment("bad", [
          { name: "1-not-a-name", value: t.guard.secret() },
          { name: "TOO_LONG", value: t.guard.secret(`long-${"s".repeat(70_000)}`) },
        ]),
        source: "nope",
      },
    });
    expect(bad.status).toBe(422);
    expect(bad.body.detail.map((d: { loc: unknown[] }) => d.loc)).toEqual(
      expect.arrayContaining([["body", "secrets", 1, "value"]]),
    );

    const rows = await t.app.db.sql.query<{ secrets: { name: string; value: string }[] }>(
      `SELECT secrets FROM deployments WHERE id = $1 UNION ALL SELECT secrets FROM revisions WHERE deployment_id = $1`,
      [id],
    );
    expect(rows.length).toBeGreaterThanOrEqual(3);
    for (const row of rows) for (const s of row.secrets) expect(s.value).toMatch(CIPHERTEXT);
    await t.assertNoLeaks();
  });

  it("survive a key rotation: every value the API stored opens under the new key alone", async () => {
    const box = new SecretBox(NEW, [OLD]);
    const report = await rotateSecrets(t.app.db.prisma, box);
    expect(report.failed).toEqual([]);
    expect(report.deployments.rotated).toBeGreaterThanOrEqual(1);
    expect(report.revisions.rotated).toBeGreaterThanOrEqual(2);
    const newOnly = new SecretBox(NEW);
    const rows = await t.app.db.sql.query<{ secrets: { name: string; value: string }[] }>(
      `SELECT secrets FROM deployments UNION ALL SELECT secrets FROM revisions`,
    );
    const opened = new Map<string, string>();
    for (const row of rows) for (const s of row.secrets) opened.set(s.name, newOnly.open(s.value));
    expect(Object.fromEntries(opened)).toEqual(plain);
  });
});
