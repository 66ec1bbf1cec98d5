import type * as oidc from "openid-client";
import { describe, expect, it } from "vitest";
import { tokenSet } from "../../src/core/oauth-client.js";

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
