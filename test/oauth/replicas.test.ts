import { afterAll, describe, expect, it } from "vitest";
import { topics } from "../../src/events/types.js";
import { createTestDatabase, startTestApp, type TestApp } from "../support/app.js";
import { addProvider, OAUTH_ENV, pathOf, TOKEN_ANSWERS } from "../support/oauth.js";
import { type OAuthServer, startOAuthServer } from "../support/oauth-server.js";

// Replicas on one PostgreSQL: a waiter on one learns of the callback another received, over LISTEN/NOTIFY.
describe.skipIf(!process.env.TEST_DATABASE_URL)("waiting for a flow across replicas", () => {
  const apps: TestApp[] = [];
  let server: OAuthServer | null = null;
  afterAll(async () => {
    await Promise.all(apps.map((a) => a.close()));
    await server?.close();
  });

  it("answers the waiter on one replica as soon as another receives the callback", async () => {
    server = await startOAuthServer();
    const db = await createTestDatabase();
    const a = await startTestApp({ ...OAUTH_ENV, PIPELINE_WORKER: "off" }, db);
    apps.push(a);
    const b = await startTestApp({ ...OAUTH_ENV, PIPELINE_WORKER: "off" }, db);
    apps.push(b);
    const ws = await a.workspace();
    await addProvider(a, server, ws.apiKey, "idp");
    const started = await a.request("POST", "/v2/auth/authenticate", { key: ws.apiKey, body: { provider: "idp", scopes: ["openid"] } });
    // What replica b hears of the flow: the NOTIFY of replica a's callback.
    const heard: string[] = [];
    b.app.deps.events.subscribe(topics.oauthFlow(started.body.auth_id), (e) => void heard.push(e.type === "oauth.flow" ? e.status : e.type));
    const waiting = b.request("GET", `/v2/auth/wait/${started.body.auth_id}?timeout=60`, { key: ws.apiKey });
    const back = await server.follow(started.body.url);
    expect((await a.request("GET", pathOf(back))).status).toBe(200);
    const waited = await waiting;
    expect(waited.body).toEqual({ status: "completed", token: expect.any(String) });
    b.guard.secret(waited.body.token, { shownIn: TOKEN_ANSWERS });
    expect(heard).toEqual(["completed"]);
  });
});
