import { createServer } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type OAuthServer, startOAuthServer } from "../support/oauth-server.js";

/**
 * The test provider's "down" state (pause), which the provider-down tests rely on: requests fail
 * while it lasts, and the port stays its own, so that resume() cannot find it taken by another process.
 */

let provider: OAuthServer;

beforeAll(async () => {
  provider = await startOAuthServer();
});
afterAll(async () => {
  await provider?.close();
});

/** Whether another server can listen on the port of `url`. */
function portFree(url: string): Promise<boolean> {
  const intruder = createServer();
  return new Promise((resolve) => {
    intruder.once("error", () => resolve(false));
    intruder.listen(Number(new URL(url).port), "127.0.0.1", () => intruder.close(() => resolve(true)));
  });
}

describe("the test provider, paused", () => {
  it("fails every request, keeps its port, and answers again once resumed", async () => {
    const discovery = `${provider.issuer}/.well-known/openid-configuration`;
    // A connection kept alive from before the pause is dropped too.
    expect((await fetch(discovery)).status).toBe(200);
    await provider.pause();
    try {
      await expect(fetch(discovery)).rejects.toThrow();
      expect(await portFree(provider.issuer)).toBe(false);
    } finally {
      await provider.resume();
    }
    const res = await fetch(discovery);
    expect(res.status).toBe(200);
    expect(((await res.json()) as { issuer: string }).issuer).toBe(provider.issuer);
  });
});
