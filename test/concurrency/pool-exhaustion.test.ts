import { describe, expect, it } from "vitest";
import { isDatabaseUnavailable } from "../../src/core/prisma-errors.js";
import { Prisma } from "../../src/generated/prisma/client.js";
import { toErrorAnswer } from "../../src/rest/errors.js";

/**
 * A transaction that cannot start (or finish) in time because every pooled connection is busy is an
 * overload, not a bug: 503 with Retry-After, as for a lost connection, never a 500.
 */
describe("transaction timeouts (P2028)", () => {
  const timedOut = new Prisma.PrismaClientKnownRequestError("Transaction API error: Unable to start a transaction in the given time.", {
    code: "P2028",
    clientVersion: Prisma.prismaVersion.client,
  });

  it("are classified as the database being unavailable", () => {
    expect(isDatabaseUnavailable(timedOut)).toBe(true);
  });

  it("answer 503 {detail} with Retry-After", () => {
    expect(toErrorAnswer(timedOut)).toEqual({
      status: 503,
      body: { detail: expect.stringMatching(/retry/i) },
      headers: { "Retry-After": "1" },
    });
  });
});
