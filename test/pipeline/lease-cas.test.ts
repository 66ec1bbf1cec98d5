import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { transitionInTx, type Tx } from "../../src/core/transitions.js";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { deploymentBody } from "../support/fixtures.js";

/**
 * A step's transition applies only while its worker holds the revision's lease, checked in the
 * write itself: a lease taken over by another worker between the transition's read and its write
 * (the first worker stalled past its lease) makes the write miss, where it once cleared the other's
 * lease and moved the revision on under it. PostgreSQL only: the takeover commits on another
 * connection while the transition's transaction is open (PGlite has one connection).
 */
describe.skipIf(!process.env.TEST_DATABASE_URL)("a step's transition", () => {
  let t: TestApp;
  let ws: NewWorkspace;

  beforeAll(async () => {
    t = await startTestApp({ PIPELINE_WORKER: "off" });
    ws = await t.workspace();
  });
  afterAll(() => t.close());

  /** tx, whose revision.findUnique lets `meanwhile` commit elsewhere before it answers. */
  const readThen = (tx: Tx, meanwhile: () => Promise<unknown>): Tx =>
    new Proxy(tx, {
      get(target, prop) {
        const value: unknown = Reflect.get(target, prop);
        if (prop !== "revision") return value;
        const revisions = value as Tx["revision"];
        return new Proxy(revisions, {
          get(r, p) {
            if (p !== "findUnique") return Reflect.get(r, p);
            return async (args: Parameters<Tx["revision"]["findUnique"]>[0]) => {
              const row = await r.findUnique(args);
              await meanwhile();
              return row;
            };
          },
        });
      },
    });

  it("misses when another worker took the lease between its read and its write", async () => {
    const created = await t.request("POST", "/v2/deployments", { key: ws.apiKey, body: deploymentBody({ name: "lease-cas" }) });
    expect(created.status).toBe(201);
    const revisionId = created.body.latest_revision_id as string;
    const sql = t.app.db.sql;
    await sql.query(`UPDATE revisions SET lease_owner = 'first', lease_until = now() + interval '1 minute' WHERE id = $1`, [revisionId]);
    const takeOver = () => sql.query(`UPDATE revisions SET lease_owner = 'second', lease_until = now() + interval '1 minute' WHERE id = $1`, [revisionId]);

    const moved = t.app.db.prisma.$transaction((tx) =>
      transitionInTx(readThen(tx, takeOver), { revisionId, event: "advance", expectedFrom: "CREATING", leaseOwner: "first" }),
    );
    await expect(moved).rejects.toMatchObject({ code: "CONFLICT" });
    const [row] = await sql.query<{ status: string; lease_owner: string | null }>(`SELECT status, lease_owner FROM revisions WHERE id = $1`, [revisionId]);
    expect(row).toEqual({ status: "CREATING", lease_owner: "second" });
  });
});
