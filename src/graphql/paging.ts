import { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, type CursorPage } from "../core/cursor-pages.js";

/** Cost of a connection: its selection, once per item asked for (default 20, at most 100). */
export const pageComplexity = (args: { first?: number | null; last?: number | null }) => ({
  field: 1,
  multiplier: Math.max(0, Math.min(args.first ?? args.last ?? DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)),
});

/** A core Relay page as a connection whose totalCount runs its count only when asked. */
export const connection = <T>(page: CursorPage<T>, totalCount: () => Promise<number>) => ({ ...page, totalCount });

export const PAGE_ARGS_DESCRIPTION = `Cursor paging: first/after forward, last/before backward; ${DEFAULT_PAGE_SIZE} items by default, at most ${MAX_PAGE_SIZE}.`;
