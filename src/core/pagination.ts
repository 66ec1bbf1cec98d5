import { createHmac, timingSafeEqual } from "node:crypto";
import { z } from "zod";
import { CoreError } from "./errors.js";
import { queryInt } from "./validation.js";

/** Offset paging of REST listings: `offset` in the answer is where the next page starts. */
export const offsetQuery = {
  limit: queryInt({ min: 1, max: 100 }).default(20),
  offset: queryInt({ min: 0 }).default(0),
};

export interface OffsetPage<T> {
  resources: T[];
  offset: number;
}

/** A position in a listing ordered by (created_at, id): a row's uuid, or a log line's numeric id. */
export interface Position {
  createdAt: Date;
  id: string;
}

const positionSchema = z.object({ t: z.iso.datetime(), id: z.union([z.uuid(), z.string().regex(/^[1-9][0-9]{0,18}$/)]) });

/**
 * Opaque cursors: the position, signed with HMAC-SHA256 so that a cursor the server did not issue
 * (edited, forged or from another purpose) is refused instead of silently reinterpreted.
 */
export class CursorCodec {
  constructor(private readonly key: Buffer) {}

  encode(purpose: string, position: Position): string {
    const body = Buffer.from(JSON.stringify({ t: position.createdAt.toISOString(), id: position.id })).toString("base64url");
    return `${body}.${this.sign(purpose, body)}`;
  }

  /** Returns the position, or null when the cursor is not one this server issued for this purpose. */
  decode(purpose: string, cursor: string): Position | null {
    const [body, mac] = cursor.split(".");
    if (!body || !mac || cursor.split(".").length !== 2) return null;
    const expected = Buffer.from(this.sign(purpose, body));
    const given = Buffer.from(mac);
    if (expected.length !== given.length || !timingSafeEqual(expected, given)) return null;
    try {
      const parsed = positionSchema.safeParse(JSON.parse(Buffer.from(body, "base64url").toString("utf8")));
      return parsed.success ? { createdAt: new Date(parsed.data.t), id: parsed.data.id } : null;
    } catch {
      return null;
    }
  }

  /** decode, or a 422-shaped error at the given location. */
  decodeOrThrow(purpose: string, cursor: string, loc: (string | number)[]): Position {
    const position = this.decode(purpose, cursor);
    if (position) return position;
    throw new CoreError("VALIDATION", "invalid cursor", [
      { loc, msg: "Value error, invalid cursor: pass a next_cursor value from a previous page", type: "value_error", input: cursor },
    ]);
  }

  private sign(purpose: string, body: string): string {
    return createHmac("sha256", this.key).update(`${purpose}\n${body}`).digest("base64url").slice(0, 22);
  }
}

/** Prisma `where` for the rows strictly after a position in (created_at DESC, id DESC) order. */
export const afterPosition = (p: Position) => ({
  OR: [{ createdAt: { lt: p.createdAt } }, { createdAt: p.createdAt, id: { lt: p.id } }],
});

/** Prisma `where` for the rows strictly before a position in (created_at DESC, id DESC) order. */
export const beforePosition = (p: Position) => ({
  OR: [{ createdAt: { gt: p.createdAt } }, { createdAt: p.createdAt, id: { gt: p.id } }],
});

export const newestFirst = [{ createdAt: "desc" as const }, { id: "desc" as const }];
export const oldestFirst = [{ createdAt: "asc" as const }, { id: "asc" as const }];

/** Relay-style paging over (created_at DESC, id DESC): `first`/`after` forward, `last`/`before` backward. */
export interface KeysetArgs {
  first?: number;
  after?: Position;
  last?: number;
  before?: Position;
}

export interface KeysetPage<T> {
  items: T[];
  hasNextPage: boolean;
  hasPreviousPage: boolean;
}

type Ordering = typeof newestFirst | typeof oldestFirst;

/**
 * One query for any keyset page: fetches one row more than asked to learn whether another page
 * exists. Positions compare on (created_at, id), so rows inserted meanwhile never shift a page.
 * `query` runs the model's findMany with the caller's own filters ANDed with `where`.
 */
export async function keysetPage<T extends Position>(
  args: KeysetArgs,
  query: (q: { where: object; orderBy: Ordering; take: number }) => Promise<T[]>,
  defaultSize = 20,
): Promise<KeysetPage<T>> {
  const bounds = [args.after && afterPosition(args.after), args.before && beforePosition(args.before)].filter(
    (b): b is ReturnType<typeof afterPosition> => Boolean(b),
  );
  const where = bounds.length > 0 ? { AND: bounds } : {};
  if (args.last !== undefined && args.first === undefined) {
    const rows = await query({ where, orderBy: oldestFirst, take: args.last + 1 });
    return {
      items: rows.slice(0, args.last).reverse(),
      hasPreviousPage: rows.length > args.last,
      hasNextPage: args.before !== undefined,
    };
  }
  const size = args.first ?? defaultSize;
  const rows = await query({ where, orderBy: newestFirst, take: size + 1 });
  const items = rows.slice(0, size);
  if (args.last !== undefined && items.length > args.last) {
    return { items: items.slice(items.length - args.last), hasPreviousPage: true, hasNextPage: rows.length > size };
  }
  return { items, hasNextPage: rows.length > size, hasPreviousPage: args.after !== undefined };
}

/**
 * The page of a batched keyset read (RevisionPages, log pages): `rows` are one parent's rows as read
 * for the page, `size` + 1 of them at most, in the direction of travel (`backward`: from `before`
 * towards the start). The same page semantics as keysetPage.
 */
export function pageOfRows<T>(rows: T[], args: KeysetArgs, size: number, backward: boolean): KeysetPage<T> {
  if (backward) {
    return { items: rows.slice(0, size).reverse(), hasPreviousPage: rows.length > size, hasNextPage: args.before !== undefined };
  }
  const items = rows.slice(0, size);
  if (args.last !== undefined && items.length > args.last) {
    return { items: items.slice(items.length - args.last), hasPreviousPage: true, hasNextPage: rows.length > size };
  }
  return { items, hasNextPage: rows.length > size, hasPreviousPage: args.after !== undefined };
}
