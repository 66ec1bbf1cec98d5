import { createServer } from "node:http";
import type * as oidc from "openid-client";
import { describe, expect, it } from "vitest";
import { OAuthClient, type ProviderEndpoints, tokenSet } from "../../src/core/oauth-client.js";
import { closeNow, listenLocally } from "../support/local-server.js";

const answer = (fields: Record<string, unknown>) => ({ access_token: "a1", token_type: "bearer", ...fields }) as unknown as oidc.TokenEndpointResponse;

describe("a token endpoint's answer, as stored", () => {
  it("keeps the tokens, scopes and expiry of a sane answer", () => {
    const before = Date.now();
    const set = tokenSet(answer({ refresh_token: "r1", scope: "repo  read:org", expires_in: 3600 }));
    expect(set).toMatchObject({ accessToken: "a1", refreshToken: "r1", tokenType: "bearer", scopes: ["repo", "read:org"], accountLabel: null });
    expect(set.expiresAt!.getTime()).toBeGreaterThanOrEqual(before + 3600_000);
    expect(tokenSet(answer({})).expiresAt).toBeNull();
  });

  it("is nonsense (a 502 that stores nothing) when a value cannot be stored: an expires_in no date holds, a scope with a NUL", () => {
    for (const bad of [{ expires_in: 1e13 }, { expires_in: -1e13 }, { expires_in: Number.NaN }, { expires_in: "3600" }, { scope: "x\u0000y" }, { token_type: "be\u0000arer" }]) {
      expect(() => tokenSet(answer(bad)), JSON.stringify(bad)).toThrow(expect.objectContaining({ code: "UPSTREAM", message: expect.stringMatching(/not a valid OAuth response/) }));
    }
  });
});

describe("a token endpoint's answer that cannot be kept", () => {
  // README: nothing is stored then, and tokens the provider issued all the same are revoked there.
  it("has what it issued revoked at the provider, for an exchange and for a refresh", async () => {
    const revoked: string[] = [];
    const server = createServer((req, res) => {
      let body = "";
      req.on("data", (chunk: Buffer) => (body += chunk.toString()));
      req.on("end", () => {
        if (req.url === "/revoke") revoked.push(new URLSearchParams(body).get("token") ?? "");
        const answer = req.url === "/token" ? { access_token: "issued-access", refresh_token: "issued-refresh", token_type: "bearer", expires_in: 1e13 } : {};
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(answer));
      });
    });
    const base = await listenLocally(server);
    try {
      const client = new OAuthClient({ allowHttp: true, timeoutSeconds: 5 });
      const endpoints: ProviderEndpoints = {
        providerId: "p", clientId: "c", clientSecret: "s", authUrl: `${base}/auth`, tokenUrl: `${base}/token`,
        revocationUrl: `${base}/revoke`, issuer: null, tokenEndpointAuthMethod: "client_secret_post",
      };
      const callback = new URL("https://dcp.example/cb?code=the-code&state=the-state");
      const nonsense = expect.objectContaining({ code: "UPSTREAM", message: expect.stringMatching(/expires_in is out of range/) });
      await expect(client.exchange(endpoints, callback, { state: "the-state", codeVerifier: null, redirectUri: "https://dcp.example/cb" })).rejects.toEqual(nonsense);
      expect(revoked).toEqual(["issued-refresh"]);
      await expect(client.refresh(endpoints, "old-refresh")).rejects.toEqual(nonsense);
      expect(revoked).toEqual(["issued-refresh", "issued-refresh"]);
    } finally {
      await closeNow(server);
    }
  });
});
