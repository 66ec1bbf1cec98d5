import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CoreDeps } from "../../src/core/context.js";
import { transitionInTx, type Tx } from "../../src/core/transitions.js";
import { Steps } from "../../src/core/revision-steps.js";
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

  /** A new deployment's first revision, leased to the worker `first`; and a takeover of its lease by `second`. */
  async function leasedRevision(name: string) {
    const created = await t.request("POST", "/v2/deployments", { key: ws.apiKey, body: deploymentBody({ name }) });
    expect(created.status).toBe(201);
    const revisionId = created.body.latest_revision_id as string;
    const sql = t.app.db.sql;
    await sql.query(`UPDATE revisions SET lease_owner = 'first', lease_until = now() + interval '1 minute' WHERE id = $1`, [revisionId]);
    const takeOver = () => sql.query(`UPDATE revisions SET lease_owner = 'second', lease_until = now() + interval '1 minute' WHERE id = $1`, [revisionId]);
    const row = async () => (await sql.query<{ status: string; lease_owner: string | null }>(`SELECT status, lease_owner FROM revisions WHERE id = $1`, [revisionId]))[0];
    return { revisionId, takeOver, row };
  }

  it("a step put back to wait (hold) leaves a lease taken over meanwhile to its new holder", async () => {
    const { revisionId, takeOver, row } = await leasedRevision("lease-cas-hold");
    const claimed = (await t.app.db.prisma.revision.findUnique({ where: { id: revisionId } }))!;
    // The takeover is let run for a while after the step's read: before the step's lock on the
    // revision it committed there and then, and the step's write cleared its lease.
    let takingOver: Promise<unknown> = Promise.resolve();
    const deps = t.app.deps;
    const prisma = new Proxy(deps.prisma, {
      get(target, prop) {
        if (prop !== "$transaction") return Reflect.get(target, prop);
        return (change: (tx: Tx) => Promise<unknown>) =>
          target.$transaction((tx) =>
            change(
              readThen(tx, async () => {
                takingOver = takeOver();
                await Promise.race([takingOver, sleep(1_000)]);
              }),
            ),
          );
      },
    });
    const steps = new Steps({ ...deps, prisma } as CoreDeps, "first", 60_000);
    expect(await steps.hold(claimed, "Waiting for something", new Date(Date.now() + 60_000))).toBe("waiting");
    await takingOver;
    // The step's write, then the takeover's: the new holder keeps its lease.
    expect(await row()).toEqual({ status: "CREATING", lease_owner: "second" });
  });

  it("misses when another worker took the lease between its read and its write", async () => {
    const { revisionId, takeOver, row } = await leasedRevision("lease-cas");

    const moved = t.app.db.prisma.$transaction((tx) =>
      transitionInTx(readThen(tx, takeOver), { revisionId, event: "advance", expectedFrom: "CREATING", leaseOwner: "first" }),
    );
    await expect(moved).rejects.toMatchObject({ code: "CONFLICT" });
    expect(await row()).toEqual({ status: "CREATING", lease_owner: "second" });
  });
});
