import { randomBytes, randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CoreError } from "../../src/core/errors.js";
import { CursorCodec, type KeysetArgs, keysetPage, type Position } from "../../src/core/pagination.js";
import { startTestApp, type TestApp } from "../support/app.js";

describe("CursorCodec", () => {
  const codec = new CursorCodec(randomBytes(32));
  const position: Position = { createdAt: new Date("2026-03-04T05:06:07.089Z"), id: randomUUID() };

  it("round-trips a position through an opaque, URL-safe cursor", () => {
    const cursor = codec.encode("things", position);
    expect(cursor).toMatch(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{22}$/);
    expect(codec.decode("things", cursor)).toEqual(position);
    expect(codec.decodeOrThrow("things", cursor, ["query", "cursor"])).toEqual(position);
  });

  it("refuses cursors it did not issue for this purpose", () => {
    const cursor = codec.encode("things", position);
    const [body, mac] = cursor.split(".") as [string, string];
    const edited = Buffer.from(JSON.stringify({ t: "2099-01-01T00:00:00.000Z", id: position.id })).toString("base64url");
    const refused = {
      "other purpose": codec.encode("other", position),
      "other server key": new CursorCodec(randomBytes(32)).encode("things", position),
      "edited body": `${edited}.${mac}`,
      "edited mac": `${body}.${mac.startsWith("A") ? "B" : "A"}${mac.slice(1)}`,
      "short mac": `${body}.${mac.slice(0, 10)}`,
      "no mac": body,
      "extra part": `${cursor}.x`,
      empty: "",
      garbage: "!!!.???",
    };
    for (const [what, bad] of Object.entries(refused)) expect(codec.decode("things", bad), what).toBeNull();
  });

  it("refuses a correctly signed body that is not a position", () => {
    // Signing is internal; a body with a valid signature but bad content can only come from a key leak, still refused.
    const sign = (codec as unknown as { sign(purpose: string, body: string): string }).sign.bind(codec);
    for (const payload of ['{"t":"yesterday","id":"x"}', "not json", '{"t":"2026-01-01T00:00:00.000Z"}']) {
      const body = Buffer.from(payload).toString("base64url");
      expect(codec.decode("things", `${body}.${sign("things", body)}`), payload).toBeNull();
    }
  });

  it("decodeOrThrow answers a 422-shaped error at the given loc", () => {
    try {
      codec.decodeOrThrow("things", "forged", ["query", "cursor"]);
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(CoreError);
      expect((err as CoreError).code).toBe("VALIDATION");
      expect((err as CoreError).issues).toEqual([
        { loc: ["query", "cursor"], type: "value_error", msg: expect.stringContaining("cursor"), input: "forged" },
      ]);
    }
  });
});

describe("keysetPage", () => {
  let t: TestApp;
  let workspaceId: string;
  /** Every row, in (created_at DESC, id DESC) order. */
  let expected: string[];

  beforeAll(async () => {
    t = await startTestApp();
    workspaceId = (await t.workspace()).workspaceId;
    const base = Date.UTC(2026, 0, 1);
    // 11 rows, in groups sharing a timestamp so that id breaks ties; an odd count leaves a short last page.
    const rows = Array.from({ length: 11 }, (_, n) => ({
      id: randomUUID(),
      workspaceId,
      computeType: "k8s",
      computeId: `c-${n}`,
      computeConfig: {},
      version: "1",
      createdAt: new Date(base + Math.floor(n / 4) * 1000),
    }));
    await t.app.db.prisma.listener.createMany({ data: rows });
    expected = rows.sort((a, b) => b.createdAt.getTime() - a.createdAt.getTime() || (a.id < b.id ? 1 : -1)).map((r) => r.id);
  });
  afterAll(() => t.close());

  const page = (args: KeysetArgs) =>
    keysetPage(args, (q) =>
      t.app.db.prisma.listener.findMany({
        where: { AND: [{ workspaceId }, q.where] },
        orderBy: q.orderBy,
        take: q.take,
        select: { id: true, createdAt: true },
      }),
    );

  it("pages forward with first/after and backward with last/before to the same ordered set (size 2)", async () => {
    const forward: string[] = [];
    let after: Position | undefined;
    for (let n = 0; ; n++) {
      const p = await page({ first: 2, after });
      expect(p.hasPreviousPage, `forward page ${n}`).toBe(n > 0);
      forward.push(...p.items.map((i) => i.id));
      if (!p.hasNextPage) break;
      after = p.items.at(-1);
    }
    expect(forward).toEqual(expected);

    const backward: string[][] = [];
    let before: Position | undefined;
    for (let n = 0; ; n++) {
      const p = await page({ last: 2, before });
      expect(p.hasNextPage, `backward page ${n}`).toBe(n > 0);
      expect(p.items.length).toBeGreaterThan(0);
      backward.unshift(p.items.map((i) => i.id));
      if (!p.hasPreviousPage) break;
      before = p.items[0];
    }
    expect(backward.flat()).toEqual(expected);
    // Pages from the end hold 2 each; the short one is the first.
    expect(backward.map((b) => b.length)).toEqual([1, 2, 2, 2, 2, 2]);
  });

  it("answers a window between two positions, and an empty page past the end", async () => {
    const between = await page({ first: 100, after: { createdAt: await at(2), id: expected[2]! }, before: { createdAt: await at(7), id: expected[7]! } });
    expect(between.items.map((i) => i.id)).toEqual(expected.slice(3, 7));
    const past = await page({ first: 2, after: { createdAt: new Date(0), id: randomUUID() } });
    expect(past).toEqual({ items: [], hasNextPage: false, hasPreviousPage: true });
    const all = await page({});
    expect(all.items.map((i) => i.id)).toEqual(expected);
    expect(all.hasNextPage).toBe(false);
  });

  it("first with last keeps the last items of the first page", async () => {
    const p = await page({ first: 5, last: 2 });
    expect(p.items.map((i) => i.id)).toEqual(expected.slice(3, 5));
    expect(p).toMatchObject({ hasPreviousPage: true, hasNextPage: true });
  });

  async function at(index: number): Promise<Date> {
    const row = await t.app.db.prisma.listener.findUniqueOrThrow({ where: { id: expected[index]! } });
    return row.createdAt;
  }
});
