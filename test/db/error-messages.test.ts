import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "../../src/logger.js";
import { startTestApp, type TestApp } from "../support/app.js";

/**
 * What Prisma's errors say ends up in the service's log (a 500 logs its error). Prisma's default
 * messages quote the source lines of the call and, for an invalid argument, every argument's value:
 * a sealed token, a hashed key. The clients are made with the minimal format, and the logger leaves
 * out the arguments that format still renders.
 */

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({ PIPELINE_WORKER: "off" });
  await t.workspace();
});
afterAll(async () => {
  await t?.close();
});

const SEALED = "v1.sealed-ciphertext-of-a-token";

async function errorOf(write: () => Promise<unknown>): Promise<Error> {
  try {
    await write();
  } catch (err) {
    return err as Error;
  }
  throw new Error("the write was expected to fail");
}

/** Its message, and the lines the service's logger writes of it (as a 500 logs it), alone and as a cause. */
async function failure(write: () => Promise<unknown>): Promise<{ message: string; logged: string[] }> {
  const err = await errorOf(write);
  const lines: string[] = [];
  const logger = createLogger("info", { write: (line: string) => void lines.push(line) });
  logger.error({ err }, "unhandled error");
  logger.error({ err: new Error("a step failed", { cause: err }) }, "wrapped");
  return { message: err.message, logged: lines };
}

describe("the database client's error messages", () => {
  it("quote neither the values written nor the code that wrote them, and neither do the log lines of them", async () => {
    const workspace = await t.app.db.prisma.workspace.findFirstOrThrow();
    const token = { workspaceId: workspace.id, providerId: "p", owner: "o", accessToken: SEALED, tokenType: "bearer", scopes: [], isDefault: false, tokenUrl: "https://provider.example/token" };
    const failures = [
      // Refused by the database: a foreign key, a value that is not a uuid.
      await failure(() => t.app.db.prisma.oAuthToken.create({ data: { ...token, oauthProviderId: "00000000-0000-0000-0000-000000000000" } })),
      await failure(() => t.app.db.prisma.oAuthToken.create({ data: { ...token, oauthProviderId: "not-a-uuid" } })),
      // Refused by Prisma before it sends anything: an argument of the wrong type. Its message renders
      // every argument, whatever the error format: the log line leaves them out.
      await failure(() => t.app.db.prisma.oAuthToken.create({ data: { ...token, oauthProviderId: "00000000-0000-0000-0000-000000000000", tokenType: 5 as unknown as string } })),
    ];
    const reasons = [/Foreign key constraint violated/, /invalid input syntax for type uuid/, /Argument `tokenType`: Invalid value provided/];
    failures.forEach(({ message, logged }, i) => {
      expect(message).toMatch(reasons[i]!);
      // Prisma's pretty formats quote the calling code, an arrow at the calling line.
      expect(message).not.toContain("→");
      expect(logged).toHaveLength(2);
      for (const line of logged) {
        expect(JSON.parse(line).err.message).toMatch(reasons[i]!);
        expect(line).not.toContain(SEALED);
      }
    });
  });
});
