import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LeakGuard } from "../support/leak-guard.js";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { type TestApp, startTestApp } from "../support/app.js";

/** The guard must fail when a secret shows: otherwise every test that uses it proves nothing. */
describe("LeakGuard", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(() => t.close());

  it("sees the app's log lines at every level", async () => {
    await t.request("GET", "/healthz");
    t.app.logger.trace({ probe: "trace-line" }, "trace line");
    expect(t.guard.logLines.some((l) => l.includes("trace-line"))).toBe(true);
  });

  it("finds a secret in a log line, raw or JSON-escaped, and in a response", async () => {
    const guard = new LeakGuard();
    const secret = guard.secret('quote"and\\backslash');
    guard.destination.write(JSON.stringify({ msg: "oops", value: secret }));
    expect(await guard.findLeaks()).toEqual([expect.stringMatching(/^log line 1: /)]);
    await expect(guard.assertNoLeaks()).rejects.toThrow(/secret values leaked/);

    const clean = new LeakGuard();
    const other = clean.secret();
    clean.recordResponse("GET /x -> 200", new Headers({ "x-echo": other }), "{}");
    expect(await clean.findLeaks()).toEqual([expect.stringMatching(/^GET \/x -> 200: x-echo/)]);
  });

  it("lets a value show only in the answers meant to hand it out", async () => {
    const guard = new LeakGuard();
    const token = guard.secret(`tok-${randomUUID()}`, { shownIn: /^POST \/v2\/auth\/authenticate -> 200$/ });
    guard.recordResponse("POST /v2/auth/authenticate -> 200", new Headers(), JSON.stringify({ token }));
    expect(await guard.findLeaks()).toEqual([]);
    guard.recordResponse("GET /v2/auth/tokens -> 200", new Headers(), JSON.stringify([{ token }]));
    guard.destination.write(JSON.stringify({ msg: "refreshed", token }));
    expect(await guard.findLeaks()).toEqual([expect.stringMatching(/^log line 1: /), expect.stringMatching(/^GET \/v2\/auth\/tokens -> 200: /)]);
  });

  it("registers an OAuth client secret by itself, and finds a sealed column holding plain text", () =>
    withOwnApp(async (own, ws) => {
      const secret = `client-${randomUUID()}`;
      const res = await own.request("POST", "/v2/auth/providers", {
        key: ws.apiKey,
        body: { provider_id: "p", name: "P", client_id: "c", client_secret: secret, auth_url: "https://a.example/a", token_url: "https://a.example/t" },
      });
      expect(res.status).toBe(200);
      expect(await own.guard.findLeaks(own.app.db.sql)).toEqual([]);
      await own.app.db.sql.query(`UPDATE oauth_providers SET client_secret = $1`, [secret]);
      const leaks = await own.guard.findLeaks(own.app.db.sql);
      expect(leaks.some((l) => l.startsWith("table oauth_providers"))).toBe(true);
      expect(leaks.some((l) => /^oauth_providers .*: client_secret is not ciphertext$/.test(l))).toBe(true);
    }));

  /** An app of its own, which leaks on purpose: it stops without close()'s leak check. */
  async function withOwnApp(fn: (own: TestApp, ws: NewWorkspace) => Promise<void>) {
    const own = await startTestApp();
    try {
      await fn(own, await own.workspace());
    } finally {
      await own.app.stop();
    }
  }
  /** A listener's version is echoed back: a stand-in for any field that would leak a secret. */
  const echo = (own: TestApp, ws: NewWorkspace, value: string) =>
    own.request("POST", "/v2/listeners", { key: ws.apiKey, body: { compute_type: "k8s", compute_id: `c-${randomUUID()}`, version: value, compute_config: { k8s_namespaces: ["default"] } } });
  const createWithSecret = (own: TestApp, ws: NewWorkspace, body: object, value: string) =>
    own.request("POST", "/v2/deployments", { key: ws.apiKey, body: { source: "internal_container", ...body, secrets: [{ name: "TOKEN", value }] } });

  it("finds a response body that carries a secret through the app", () =>
    withOwnApp(async (own, ws) => {
      await echo(own, ws, own.guard.secret());
      expect((await own.guard.findLeaks()).some((l) => l.startsWith("POST /v2/listeners -> 201"))).toBe(true);
      // ...and the row that stores it.
      expect((await own.guard.findLeaks(own.app.db.sql)).some((l) => l.startsWith("table listeners"))).toBe(true);
      await expect(own.assertNoLeaks()).rejects.toThrow(/secret values leaked/);
    }));

  it("registers by itself the secret values of every request body the service accepts", () =>
    withOwnApp(async (own, ws) => {
      const value = `plain-${randomUUID()}`;
      expect((await createWithSecret(own, ws, { name: "guarded", source_revision_config: { image_uri: "r.example/g:1" } }, value)).status).toBe(201);
      expect(await own.guard.findLeaks()).toEqual([]);
      await echo(own, ws, value);
      expect((await own.guard.findLeaks()).some((l) => l.startsWith("POST /v2/listeners -> 201"))).toBe(true);
    }));

  it("leaves out short and repetitive values, and values the same body carries elsewhere", () => {
    const guard = new LeakGuard();
    guard.secretsIn(JSON.stringify({ secrets: [{ name: "A", value: "short" }, { name: "B", value: "ababababababab" }] }));
    guard.secretsIn(JSON.stringify({ name: "same-value-twice", secrets: [{ name: "C", value: "same-value-twice" }] }));
    guard.record("answer", `{"detail":"short ababababababab same-value-twice"}`);
    return expect(guard.findLeaks()).resolves.toEqual([]);
  });

  it("registers nothing from a body the service refused: it stored none of it", () =>
    withOwnApp(async (own, ws) => {
      const value = `refused-${randomUUID()}`;
      expect((await createWithSecret(own, ws, { name: "" }, value)).status).toBe(422);
      await echo(own, ws, value);
      expect(await own.guard.findLeaks()).toEqual([]);
    }));

  it("finds secrets columns that hold anything but ciphertext", async () => {
    const guard = new LeakGuard();
    const ws = await t.workspace();
    await t.app.db.sql.query(
      `INSERT INTO deployments (id, workspace_id, name, display_name, source, status, source_config, secrets, secret_references,
         tracer_session_id, url, image_version, deployment_tier, compute_tier, database_tier)
       VALUES ($1, $2, 'plain', 'plain', 'internal_container', 'READY', '{}', $3, '[]', $4, 'u', '1', 'S', 'S', 'S')`,
      [randomUUID(), ws.workspaceId, JSON.stringify([{ name: "K", value: "not-sealed" }]), randomUUID()],
    );
    const leaks = await guard.findLeaks(t.app.db.sql);
    expect(leaks).toEqual([expect.stringMatching(/^deployments [0-9a-f-]{36}: secrets value "not-sealed" is not ciphertext$/)]);
    await t.app.db.sql.query(`DELETE FROM deployments WHERE workspace_id = $1`, [ws.workspaceId]);
    expect(await guard.findLeaks(t.app.db.sql)).toEqual([]);
  });
});
