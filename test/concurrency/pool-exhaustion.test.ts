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

  it("answer 503 {detail} with Retry-After, saying the database did not answer in time", () => {
    expect(toErrorAnswer(timedOut)).toEqual({
      status: 503,
      body: { detail: "The database did not answer in time; retry shortly." },
      headers: { "Retry-After": "1" },
    });
  });
});

describe("what a 503 says of the database", () => {
  const pgError = (code: string, message: string) => Object.assign(new Error(message), { code, severity: "ERROR" });
  const answered = (err: unknown) => toErrorAnswer(err)?.body;

  it("a statement cancelled past its bound (a row lock held long, a slow database): it did not answer in time", () => {
    // As Prisma's driver adapter wraps the pg error.
    const cancelled = new Prisma.PrismaClientKnownRequestError("canceling statement due to statement timeout", {
      code: "P2010",
      clientVersion: Prisma.prismaVersion.client,
      meta: { driverAdapterError: { cause: pgError("57014", "canceling statement due to statement timeout") } },
    });
    expect(answered(cancelled)).toEqual({ detail: "The database did not answer in time; retry shortly." });
    expect(answered(new Error("Query read timeout"))).toEqual({ detail: "The database did not answer in time; retry shortly." });
  });

  it("a connection refused or lost: it is unavailable", () => {
    expect(answered(Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), { code: "ECONNREFUSED" }))).toEqual({ detail: "The database is unavailable; retry shortly." });
    expect(answered(pgError("57P01", "terminating connection due to administrator command"))).toEqual({ detail: "The database is unavailable; retry shortly." });
  });
});
