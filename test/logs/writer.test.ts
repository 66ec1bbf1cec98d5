import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LogSweeper, trimRevisionLogs } from "../../src/core/log-retention.js";
import { cleanMessage, logKindOf, LogWriter, MAX_MESSAGE_LENGTH, MAX_STEP_LINES, statusLine } from "../../src/core/log-writer.js";
import { parseInstant } from "../../src/core/schemas/logs.js";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { routeFor } from "../../src/core/revision-machine.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { waitFor } from "../support/wait.js";
import { buildLogsPath, newDeployment, read, readAll, stored, type Target, write } from "./support.js";

let t: TestApp;
let ws: NewWorkspace;

beforeAll(async () => {
  t = await startTestApp({ PIPELINE_WORKER: "off", RATE_LIMIT_PER_MINUTE: "0" });
  ws = await t.workspace();
});
afterAll(() => t.close());

const revisionOf = (x: Target) => t.app.db.prisma.revision.findUniqueOrThrow({ where: { id: x.revisionId } });
const stepLog = async (x: Target) => new LogWriter(t.app.deps, t.app.logger).stepLog(await revisionOf(x), "build", null);

describe("a step's log", () => {
  it("masks the revision's secret values, plain, JSON-escaped or base64, but not values too short to find", async () => {
    const secret = t.guard.secret('tok-"quoted"-0123456789');
    const x = await newDeployment(t, ws.apiKey, { secrets: [{ name: "TOKEN", value: secret }, { name: "SHORT", value: "abc" }] });
    const log = await stepLog(x);
    log.info(`export TOKEN=${secret}`);
    log.warning(`{"TOKEN": ${JSON.stringify(secret)}}`);
    log.error(`auth: ${Buffer.from(secret).toString("base64")}`);
    log.debug("abc stays");
    await log.close();
    const messages = (await stored(t, x.revisionId)).slice(1).map((l) => l.message);
    expect(messages).toEqual(["export TOKEN=********", '{"TOKEN": "********"}', "auth: ********", "abc stays"]);
  });

  it("stores lines in order, all of them by close(), and none after", async () => {
    const x = await newDeployment(t, ws.apiKey);
    const log = await stepLog(x);
    for (let i = 0; i < 1200; i++) log.info(`line ${i}`);
    await new Promise((r) => setTimeout(r, 1));
    log.info("after a pause");
    await log.close();
    log.info("after close");
    const messages = (await stored(t, x.revisionId)).slice(1).map((l) => l.message);
    expect(messages).toEqual([...Array.from({ length: 1200 }, (_, i) => `line ${i}`), "after a pause"]);
  });

  it("writes nothing once the step's lease is another worker's (a worker that stalled past it, taken over)", async () => {
    const x = await newDeployment(t, ws.apiKey);
    const writer = new LogWriter(t.app.deps, t.app.logger);
    const leasedTo = async (owner: string) => {
      await t.app.db.prisma.revision.update({ where: { id: x.revisionId }, data: { leaseOwner: owner, leaseUntil: new Date(Date.now() + 60_000) } });
      return writer.stepLog(await revisionOf(x), "build", owner);
    };
    const stalled = await leasedTo("worker-a");
    stalled.info("a: before it stalled");
    await stalled.close();
    const again = writer.stepLog(await revisionOf(x), "build", "worker-a");
    const taker = await leasedTo("worker-b");
    again.info("a: after its lease was taken over");
    await again.close();
    taker.info("b: the step again");
    await taker.close();
    const messages = (await stored(t, x.revisionId)).slice(1).map((l) => l.message);
    expect(messages).toEqual(["a: before it stalled", "b: the step again"]);
  });

  it("keeps at most MAX_STEP_LINES lines of one step, and says how many it left out", async () => {
    const x = await newDeployment(t, ws.apiKey);
    const log = await stepLog(x);
    for (let i = 0; i < MAX_STEP_LINES + 25; i++) log.info(`l${i}`);
    await log.close();
    const lines = await stored(t, x.revisionId);
    expect(lines).toHaveLength(1 + MAX_STEP_LINES + 1);
    expect(lines.at(-2)!.message).toBe(`l${MAX_STEP_LINES - 1}`);
    expect(lines.at(-1)!.message).toBe(`25 more lines of this step were left out: a step keeps at most ${MAX_STEP_LINES} lines`);
  });

  it("writes nothing more once abandoned (its result is thrown away)", async () => {
    const x = await newDeployment(t, ws.apiKey);
    const log = await stepLog(x);
    log.info("never stored");
    log.abandon();
    await new Promise((r) => setTimeout(r, 20));
    expect((await stored(t, x.revisionId)).map((l) => l.message)).toEqual(["[CREATING] Revision created"]);
  });
});

// PGlite runs one statement at a time: a deletion cannot be in flight while a line is written.
describe.skipIf(!process.env.TEST_DATABASE_URL)("lines of a revision deleted while they are written (PostgreSQL)", () => {
  it("go with the revision, quietly: no warning, no stack", async () => {
    const x = await newDeployment(t, ws.apiKey);
    const prisma = t.app.db.prisma;
    const target = { id: x.revisionId, deploymentId: x.deploymentId, workspaceId: ws.workspaceId };
    // DELETE /v2/deployments/{id} as it stands after its rows are deleted and before it commits: the
    // revision's row is locked by the deletion, which the test lets commit when it says so.
    let deleter: number | null = null;
    let letCommit!: () => void;
    const commitAllowed = new Promise<void>((resolve) => (letCommit = resolve));
    const deleting = prisma.$transaction(
      async (tx) => {
        const pid = (await tx.$queryRaw<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`)[0]!.pid;
        await tx.deployment.delete({ where: { id: x.deploymentId } });
        deleter = pid;
        await commitAllowed;
      },
      { timeout: 30_000 },
    );
    try {
      await waitFor(async () => deleter, (pid) => pid !== null, { what: "the deletion to have deleted" });
      // The append still sees the revision; its insert's foreign key check waits for the deletion.
      const appending = new LogWriter(t.app.deps, t.app.logger).append(target, [{ kind: "build", level: "INFO", message: "a late line" }]);
      await waitFor(
        async () => (await prisma.$queryRaw<{ n: number }[]>`SELECT count(*)::int AS n FROM pg_stat_activity WHERE ${deleter}::int = ANY(pg_blocking_pids(pid))`)[0]!.n,
        (n) => n > 0,
        { what: "the append to wait for the deletion" },
      );
      letCommit();
      await deleting;
      expect(await appending).toBe(0);
    } finally {
      letCommit();
      await deleting.catch(() => {});
    }
    const about = t.guard.logLines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.revision_id === x.revisionId);
    expect(about.filter((l) => (l.level as number) >= 40)).toEqual([]);
    expect(about).toEqual([expect.objectContaining({ level: 20, msg: "logs: the revision was deleted while its lines were written; they went with it" })]);
    expect(about[0]).not.toHaveProperty("err");
  });
});

describe("line ids", () => {
  it("number each deployment's log from 1, whatever other deployments and workspaces write meanwhile", async () => {
    const other = await t.workspace();
    const mine = await newDeployment(t, ws.apiKey);
    const theirs = await newDeployment(t, other.apiKey);
    const ids = async () => (await readAll(t, ws.apiKey, buildLogsPath(mine), { order: "asc", limit: 1000 })).lines.map((l) => l.id);
    const before = await ids();
    // Its first line (the status line of its creation) is 1.
    expect(before).toEqual(before.map((_, i) => String(i + 1)));
    await write(t, mine, [{ message: "a" }, { message: "b" }]);
    // Another workspace's log, and another deployment of this one, take many lines between.
    for (let i = 0; i < 3; i++) await write(t, theirs, Array.from({ length: 40 }, (_, j) => ({ message: `theirs ${i}.${j}` })));
    await write(t, await newDeployment(t, ws.apiKey), [{ message: "elsewhere" }]);
    await write(t, mine, [{ message: "c" }]);
    const after = await ids();
    expect(after).toEqual(after.map((_, i) => String(i + 1)));
    expect(after).toHaveLength(before.length + 3);
    // The other workspace's numbers are its own deployment's too.
    const theirIds = (await readAll(t, other.apiKey, buildLogsPath(theirs), { order: "asc", limit: 1000 })).lines.map((l) => l.id);
    expect(theirIds).toEqual(theirIds.map((_, i) => String(i + 1)));
  });

  it("go on from the last one given when retention has emptied the log, rather than start at 1 again", async () => {
    const x = await newDeployment(t, ws.apiKey);
    await write(t, x, [{ message: "old 1" }, { message: "old 2" }]);
    const last = (await read(t, ws.apiKey, buildLogsPath(x), { order: "desc", limit: 1 })).logs[0]!.id;
    await t.app.db.prisma.revisionLog.deleteMany({ where: { deploymentId: x.deploymentId } });
    await write(t, x, [{ message: "new" }]);
    const lines = (await read(t, ws.apiKey, buildLogsPath(x), { order: "asc" })).logs;
    expect(lines.map((l) => [l.id, l.message])).toEqual([[String(Number(last) + 1), "new"]]);
  });

  it("are counted no longer once the deployment is deleted", async () => {
    const x = await newDeployment(t, ws.apiKey);
    await write(t, x, [{ message: "a" }]);
    expect(await t.app.db.prisma.logLineCounter.count({ where: { deploymentId: x.deploymentId } })).toBe(1);
    const deleted = await t.request("DELETE", `/v2/deployments/${x.deploymentId}`, { key: ws.apiKey });
    expect(deleted.status, deleted.text).toBe(204);
    await waitFor(async () => (await t.app.db.prisma.deployment.count({ where: { id: x.deploymentId } })) === 0);
    expect(await t.app.db.prisma.logLineCounter.count({ where: { deploymentId: x.deploymentId } })).toBe(0);
  });
});

describe("messages", () => {
  it("are stored as PostgreSQL text can hold them, and cut when overlong", async () => {
    expect(cleanMessage("a\u0000b\ud800c\ud83d\ude00")).toBe("a\uFFFDb\uFFFDc\ud83d\ude00");
    const long = cleanMessage("x".repeat(MAX_MESSAGE_LENGTH + 10));
    expect(long).toBe(`${"x".repeat(MAX_MESSAGE_LENGTH)}… (10 more characters left out)`);
    const x = await newDeployment(t, ws.apiKey);
    expect(await write(t, x, [{ message: "nul\u0000here" }])).toBe(1);
    expect((await stored(t, x.revisionId)).at(-1)!.message).toBe("nul\uFFFDhere");
  });
});

describe("status lines", () => {
  const built = routeFor("internal_source");
  const image = routeFor("external_container");

  it("go to the log of the phase the revision is in, failures as errors", () => {
    expect(statusLine(built, "CREATING", "QUEUED", "Queued")).toEqual({ kind: "build", level: "INFO", message: "[QUEUED] Queued" });
    expect(statusLine(built, "BUILDING", "BUILD_FAILED", "why")).toEqual({ kind: "build", level: "ERROR", message: "[BUILD_FAILED] why" });
    expect(statusLine(built, "DEPLOYING", "DEPLOY_FAILED", "why")).toMatchObject({ kind: "deploy", level: "ERROR" });
    expect(statusLine(built, "DEPLOYING", "INTERRUPTED", "stop")).toMatchObject({ kind: "deploy", level: "WARNING" });
    expect(statusLine(built, "QUEUED", "SKIPPED", "newer")).toMatchObject({ kind: "build", level: "WARNING" });
    expect(logKindOf("QUEUED", image)).toBe("deploy");
    expect(logKindOf("AWAITING_DEPLOY", built)).toBe("deploy");
  });
});

describe("retention", () => {
  it("sweeps lines older than the retention period, and keeps the newest lines of an ended revision", async () => {
    const x = await newDeployment(t, ws.apiKey);
    await write(t, x, Array.from({ length: 12 }, (_, i) => ({ message: `old ${i}` })));
    await write(t, x, [{ kind: "deploy", message: "recent" }]);
    await t.app.db.sql.query(`UPDATE revision_logs SET "timestamp" = "timestamp" - interval '31 days' WHERE revision_id = $1 AND message LIKE 'old %'`, [x.revisionId]);
    const sweeper = new LogSweeper(t.app.db.prisma, t.app.logger, 30 * 24 * 3_600_000);
    expect(await sweeper.run()).toBeGreaterThanOrEqual(12);
    expect((await stored(t, x.revisionId)).map((l) => l.message)).toEqual(["[CREATING] Revision created"]);
    expect((await stored(t, x.revisionId, "deploy")).map((l) => l.message)).toEqual(["recent"]);

    await write(t, x, Array.from({ length: 8 }, (_, i) => ({ message: `new ${i}` })));
    const trimmed = await t.app.db.prisma.$transaction((tx) => trimRevisionLogs(tx, x.revisionId, 3));
    expect(trimmed).toBe(9 - 3);
    expect((await stored(t, x.revisionId)).map((l) => l.message)).toEqual(["new 5", "new 6", "new 7"]);
    expect((await stored(t, x.revisionId, "deploy")).map((l) => l.message)).toEqual(["recent"]);
  });
});

describe("instants clients send", () => {
  it("are ISO 8601 date-times in any offset and precision, dates, or epoch milliseconds", () => {
    const at = Date.UTC(2026, 2, 8, 12, 30, 15, 123);
    for (const text of ["2026-03-08T12:30:15.123Z", "2026-03-08T12:30:15.123456+00:00", "2026-03-08T14:30:15.123+02:00", "2026-03-08T12:30:15.1239", "2026-03-08 12:30:15.123z", "2026-03-08T07:00:15.123-0530"]) {
      expect(parseInstant(text)?.getTime(), text).toBe(at);
    }
    expect(parseInstant(at)?.getTime()).toBe(at);
    expect(parseInstant("2026-03-08")?.getTime()).toBe(Date.UTC(2026, 2, 8));
    // Years below 100 are those years (Date.UTC alone would take 0050 for 1950); there is no year 0, as in Python.
    expect(parseInstant("0050-01-01T00:00:00Z")?.toISOString()).toBe("0050-01-01T00:00:00.000Z");
    expect(parseInstant("0001-01-01")?.toISOString()).toBe("0001-01-01T00:00:00.000Z");
    for (const bad of ["2026-13-01T00:00:00Z", "2026-02-29T00:00:00Z", "2026-03-08T24:00:00Z", "2026-03-08T00:00:00+25:00", "0000-01-01T00:00:00Z", "now", ""]) {
      expect(parseInstant(bad), bad).toBeNull();
    }
  });

  it("are no earlier than 0001-01-01T00:00:00Z, in whatever form (PostgreSQL has no year 0 to compare with)", () => {
    const earliest = Date.parse("0001-01-01T00:00:00Z");
    expect(parseInstant(earliest)?.getTime()).toBe(earliest);
    expect(parseInstant("0001-01-01T00:00:00-01:00")?.toISOString()).toBe("0001-01-01T01:00:00.000Z");
    // An offset that takes year 1's first minutes back into year 0, epoch milliseconds before it, a Date before it.
    for (const bad of ["0001-01-01T00:00:00+23:59", "0001-01-01T00:00:00.000+00:01", earliest - 1, -1e15, -8.64e15, new Date(earliest - 1)]) {
      expect(parseInstant(bad), String(bad)).toBeNull();
    }
  });
});
