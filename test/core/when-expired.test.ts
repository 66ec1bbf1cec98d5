import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { Tenant } from "../../src/core/auth.js";
import { whenExpired } from "../../src/core/credential-expiry.js";

const tenant = (expiresAt?: number): Tenant => ({ organizationId: "o", workspaceId: "w", actor: "user:u", expiresAt });
const DAY = 24 * 3600_000;

describe("whenExpired", () => {
  beforeEach(() => vi.useFakeTimers({ now: 1_000_000 }));
  afterEach(() => vi.useRealTimers());

  it("calls back at the credentials' expiry, not before", () => {
    const expired = vi.fn();
    whenExpired(tenant(Date.now() + 5_000), expired);
    vi.advanceTimersByTime(4_999);
    expect(expired).not.toHaveBeenCalled();
    vi.advanceTimersByTime(1);
    expect(expired).toHaveBeenCalledOnce();
  });

  it("waits past setTimeout's longest delay (about 24.8 days) rather than firing at once", () => {
    const expired = vi.fn();
    whenExpired(tenant(Date.now() + 40 * DAY), expired);
    vi.advanceTimersByTime(39 * DAY);
    expect(expired).not.toHaveBeenCalled();
    vi.advanceTimersByTime(DAY);
    expect(expired).toHaveBeenCalledOnce();
  });

  it("never calls back once cancelled, nor for credentials without an expiry (API keys)", () => {
    const cancelled = vi.fn();
    whenExpired(tenant(Date.now() + 5_000), cancelled)();
    const key = vi.fn();
    whenExpired(tenant(), key);
    vi.advanceTimersByTime(60 * DAY);
    expect(cancelled).not.toHaveBeenCalled();
    expect(key).not.toHaveBeenCalled();
    expect(vi.getTimerCount()).toBe(0);
  });

  it("calls back at once for credentials already expired", () => {
    const expired = vi.fn();
    whenExpired(tenant(Date.now() - 1), expired);
    expect(expired).toHaveBeenCalledOnce();
  });
});
