import { invalid, type ValidationIssue } from "./errors.js";
import type { CursorCodec, KeysetArgs, KeysetPage, Position } from "./pagination.js";

/** Cursor paging arguments as a client sends them (first/after, last/before, as in Relay): cursors are opaque strings. */
export interface CursorArgs {
  first?: number | null;
  after?: string | null;
  last?: number | null;
  before?: string | null;
}

export interface Edge<T> {
  cursor: string;
  node: T;
}

export interface PageInfo {
  hasNextPage: boolean;
  hasPreviousPage: boolean;
  startCursor: string | null;
  endCursor: string | null;
}

export interface CursorPage<T> {
  edges: Edge<T>[];
  pageInfo: PageInfo;
}

export const DEFAULT_PAGE_SIZE = 20;
export const MAX_PAGE_SIZE = 100;

/**
 * Checks sizes (0..100) and opens the signed cursors; every problem at once, as VALIDATION issues
 * located at the argument's name. A cursor of another listing (another purpose) is refused.
 */
export function keysetArgs(cursors: CursorCodec, purpose: string, args: CursorArgs): KeysetArgs {
  const issues: ValidationIssue[] = [];
  const size = (name: "first" | "last") => {
    const n = args[name];
    if (n == null) return undefined;
    if (n < 0) issues.push({ loc: ["query", name], msg: "Input should be greater than or equal to 0", type: "greater_than_equal", input: n, ctx: { ge: 0 } });
    else if (n > MAX_PAGE_SIZE) {
      issues.push({ loc: ["query", name], msg: `Input should be less than or equal to ${MAX_PAGE_SIZE}`, type: "less_than_equal", input: n, ctx: { le: MAX_PAGE_SIZE } });
    }
    return n;
  };
  const position = (name: "after" | "before") => {
    const cursor = args[name];
    if (cursor == null) return undefined;
    const p = cursors.decode(purpose, cursor);
    if (!p) issues.push({ loc: ["query", name], msg: "Value error, invalid cursor: pass a cursor from this connection", type: "value_error", input: cursor });
    return p ?? undefined;
  };
  const result: KeysetArgs = { first: size("first"), last: size("last"), after: position("after"), before: position("before") };
  if (issues.length > 0) throw invalid(issues);
  return result;
}

/**
 * An edge whose cursor is signed when first read: a page of 100 items costs 100 HMACs only if the
 * client selects every edge's cursor, and most select pageInfo's endCursor or none.
 */
class LazyEdge<T> implements Edge<T> {
  private signed: string | null = null;

  constructor(
    readonly node: T,
    private readonly sign: (node: T) => string,
  ) {}

  get cursor(): string {
    return (this.signed ??= this.sign(this.node));
  }
}

/** A keyset page as Relay edges, each with its own signed cursor (signed on demand). */
export function toCursorPage<T extends Position>(cursors: CursorCodec, purpose: string, page: KeysetPage<T>): CursorPage<T> {
  return toCursorPageBy(cursors, purpose, page, (node) => node);
}

/** toCursorPage for nodes that are not positions themselves: `position` says where each one is. */
export function toCursorPageBy<T>(cursors: CursorCodec, purpose: string, page: KeysetPage<T>, position: (node: T) => Position): CursorPage<T> {
  const sign = (node: T) => cursors.encode(purpose, position(node));
  const edges: Edge<T>[] = page.items.map((node) => new LazyEdge(node, sign));
  return { edges, pageInfo: new LazyPageInfo(edges, page.hasNextPage, page.hasPreviousPage) };
}

class LazyPageInfo implements PageInfo {
  constructor(
    private readonly edges: Edge<unknown>[],
    readonly hasNextPage: boolean,
    readonly hasPreviousPage: boolean,
  ) {}

  get startCursor(): string | null {
    return this.edges[0]?.cursor ?? null;
  }

  get endCursor(): string | null {
    return this.edges.at(-1)?.cursor ?? null;
  }
}

/** Opens the arguments, fetches one keyset page, and shapes it as a Relay page. */
export async function cursorPage<T extends Position>(
  cursors: CursorCodec,
  purpose: string,
  args: CursorArgs,
  fetch: (args: KeysetArgs) => Promise<KeysetPage<T>>,
): Promise<CursorPage<T>> {
  return toCursorPage(cursors, purpose, await fetch(keysetArgs(cursors, purpose, args)));
}
