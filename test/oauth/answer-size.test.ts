import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_PROVIDER_ANSWER_BYTES } from "../../src/core/oauth-client.js";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { closeNow, listenLocally } from "../support/local-server.js";
import { OAUTH_ENV } from "../support/oauth.js";
import { waitFor } from "../support/wait.js";

/**
 * A provider (or an MCP server) is someone else's server: its answers are read only up to
 * MAX_PROVIDER_ANSWER_BYTES. One that sends without end is cut off with a 502 that says so,
 * instead of being read into the service's memory.
 */

const WHOLE_STREAM = 256 * 1024 * 1024;

/** A server that answers every request with JSON that never ends (up to 256 MB), counting what it could write. */
function endlessServer() {
  const sent = { bytes: 0, requests: 0, cutOff: 0 };
  const chunk = Buffer.from(`"${"x".repeat(64 * 1024 - 3)}",`);
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    sent.requests++;
    res.writeHead(200, { "content-type": "application/json" });
    res.write('{"padding": [');
    const pump = () => {
      while (sent.bytes < WHOLE_STREAM) {
        sent.bytes += chunk.length;
        if (!res.write(chunk)) return void res.once("drain", pump);
      }
      res.end('""]}');
    };
    res.on("close", () => {
      if (!res.writableFinished) sent.cutOff++;
    });
    req.resume();
    pump();
  });
  return {
    sent,
    listen: () => listenLocally(server),
    close: () => closeNow(server),
  };
}

let t: TestApp;
let ws: NewWorkspace;
const endless = endlessServer();
let base: string;

beforeAll(async () => {
  base = await endless.listen();
  t = await startTestApp({ ...OAUTH_ENV, PIPELINE_WORKER: "off" });
  ws = await t.workspace();
});
afterAll(async () => {
  await t?.close();
  await endless.close();
});

/** The server stopped being read: what it wrote is bounded by the limit and the sockets' buffers, far from the whole. */
async function expectCutOff(before: { requests: number; cutOff: number }) {
  await waitFor(() => endless.sent.cutOff, (n) => n >= endless.sent.requests && endless.sent.requests > before.requests, { what: "the answers to be cut off" });
  expect(endless.sent.bytes).toBeLessThan(WHOLE_STREAM / 4);
}

describe("a provider answer larger than the service reads", () => {
  it("at the token endpoint: the callback is a 502 that says so, and the flow failed", async () => {
    const created = await t.request("POST", "/v2/auth/providers", {
      key: ws.apiKey,
      body: { provider_id: "endless", name: "Endless", client_id: "client", auth_url: `${base}/auth`, token_url: `${base}/token` },
    });
    expect(created.status, created.text).toBe(200);
    const started = await t.request("POST", "/v2/auth/authenticate", { key: ws.apiKey, body: { provider: "endless", scopes: [] } });
    expect(started.status, started.text).toBe(200);
    // The user consented; the provider sends the browser back with a code.
    const state = new URL(started.body.url).searchParams.get("state")!;
    const before = { ...endless.sent };
    const callback = await t.request("GET", `/v2/auth/callback/endless?code=c&state=${encodeURIComponent(state)}`);
    expect(callback.status, callback.text).toBe(502);
    expect(callback.body.detail).toBe(`Could not exchange the authorization code at provider 'endless': its answer was larger than ${MAX_PROVIDER_ANSWER_BYTES} bytes.`);
    await expectCutOff(before);
    const waited = await t.request("GET", `/v2/auth/wait/${started.body.auth_id}?timeout=0`, { key: ws.apiKey });
    expect(waited.status).toBe(400);
    expect(waited.body.detail).toMatch(/larger than/);
  });

  it("as an MCP server's metadata: mcp-discover is a 502 that says so, and nothing is stored", async () => {
    const before = { ...endless.sent };
    const res = await t.request("POST", "/v2/auth/providers/mcp-discover", { key: ws.apiKey, body: { provider_id: "endless-mcp", name: "Endless", mcp_server_url: `${base}/mcp` } });
    expect(res.status, res.text).toBe(502);
    expect(res.body.detail).toBe(`The answer of the MCP server ${base}/mcp was larger than ${MAX_PROVIDER_ANSWER_BYTES} bytes.`);
    await expectCutOff(before);
    expect((await t.request("GET", "/v2/auth/providers/endless-mcp", { key: ws.apiKey })).status).toBe(404);
  });
});
