import { z } from "zod";
import { EARLIEST_INSTANT_MS } from "../../time.js";

/** A revision has two logs: what its build did (creating, queueing, building) and what its deploy did. */
export const LOG_KINDS = ["build", "deploy"] as const;
export type LogKind = (typeof LOG_KINDS)[number];

/** Levels from least to most severe; a `level` filter keeps its level and the more severe ones. */
export const LOG_LEVELS = ["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** The levels a `level` filter keeps: that level and every more severe one. */
export const levelsFrom = (level: LogLevel): LogLevel[] => LOG_LEVELS.slice(LOG_LEVELS.indexOf(level));

export const DEFAULT_LOG_LIMIT = 100;
export const MAX_LOG_LIMIT = 1000;
export const MAX_LOG_QUERY_LENGTH = 1000;

/** What a log read keeps, the same for REST and GraphQL. */
export interface LogFilter {
  /** Lines at least this severe. */
  level?: LogLevel;
  /** Lines whose message contains this, case-insensitively (no wildcards: `%` and `_` are literal). */
  query?: string;
  /** Lines at or after this instant. */
  start?: Date;
  /** Lines at or before this instant. */
  end?: Date;
}

const ISO_INSTANT =
  /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?)?(Z|z|[+-]\d{2}(?::?\d{2})?)?$/;

/**
 * An instant as clients send one: an ISO 8601 date-time (any offset, `Z` or none for UTC, any
 * number of fractional digits, as Python's isoformat() writes them) or a date, or epoch milliseconds
 * (the form timestamps may take in answers). Precision beyond the millisecond is dropped: stored
 * timestamps have milliseconds, and bounds are inclusive, so nothing a bound names is lost. Nothing
 * before year 1 (EARLIEST_INSTANT_MS).
 */
export function parseInstant(value: string | number | Date): Date | null {
  const date = instantOf(value);
  // Not before year 1 (EARLIEST_INSTANT_MS), whichever form named it.
  return date && date.getTime() >= EARLIEST_INSTANT_MS ? date : null;
}

function instantOf(value: string | number | Date): Date | null {
  if (value instanceof Date) return Number.isNaN(value.getTime()) ? null : value;
  if (typeof value === "number") {
    if (!Number.isFinite(value) || Math.abs(value) > 8.64e15) return null;
    return new Date(Math.floor(value));
  }
  const m = ISO_INSTANT.exec(value.trim());
  if (!m) return null;
  const [, y, mo, d, h = "0", mi = "0", s = "0", fraction = "", zone = "Z"] = m;
  const ms = Number(fraction.slice(0, 3).padEnd(3, "0"));
  // setUTCFullYear, unlike Date.UTC, takes years below 100 as they are (0050, not 1950).
  const date = new Date(0);
  date.setUTCFullYear(Number(y), Number(mo) - 1, Number(d));
  date.setUTCHours(Number(h), Number(mi), Number(s), ms);
  const utc = date.getTime();
  // 2026-02-30 rolls over into March: refuse what does not name a real date and time (nor year 0, as Python has none).
  if (Number(y) === 0 || date.getUTCDate() !== Number(d) || date.getUTCMonth() !== Number(mo) - 1 || Number(h) > 23 || Number(mi) > 59 || Number(s) > 59) {
    return null;
  }
  if (zone === "Z" || zone === "z") return date;
  const sign = zone.startsWith("-") ? -1 : 1;
  const [zh, zm = "0"] = [zone.slice(1, 3), zone.slice(3).replace(":", "")];
  if (Number(zh) > 23 || Number(zm) > 59) return null;
  return new Date(utc - sign * (Number(zh) * 60 + Number(zm)) * 60_000);
}

// Dates come from GraphQL's DateTime scalar, already parsed.
const instant = z.union([z.string(), z.number(), z.date()]).transform((value, ctx) => {
  const date = parseInstant(value);
  if (date) return date;
  ctx.addIssue({
    code: "custom",
    input: value,
    params: { type: "datetime_parsing" },
    message: "Input should be a valid datetime: an ISO 8601 date-time such as 2026-03-08T00:00:00Z, or epoch milliseconds",
  });
  return z.NEVER;
});

const level = z.preprocess((v) => (typeof v === "string" ? v.trim().toUpperCase() : v), z.enum(LOG_LEVELS));

const filterFields = {
  level: level.nullish(),
  // An empty query is no filter, as empty query-string values are elsewhere.
  query: z.string().max(MAX_LOG_QUERY_LENGTH).nullish(),
  start_time: instant.nullish(),
  end_time: instant.nullish(),
};

type FilterFields = { start_time?: Date | null; end_time?: Date | null };

function boundsInOrder(f: FilterFields, ctx: z.RefinementCtx) {
  if (f.start_time && f.end_time && f.end_time < f.start_time) {
    ctx.addIssue({ code: "custom", path: ["end_time"], input: f.end_time.toISOString(), message: "end_time must not be before start_time" });
  }
}

/** The filters, as GraphQL's LogFilter carries them (after renaming); null means none. */
export const logFilterSchema = z.object(filterFields).superRefine(boundsInOrder);

/** Body of the REST log reads (`POST …/build_logs`, `…/deploy_logs`): the filters and the page. */
export const logQuerySchema = z
  .object({
    ...filterFields,
    order: z.enum(["asc", "desc"]).default("desc"),
    limit: z.number().int().min(1).max(MAX_LOG_LIMIT).default(DEFAULT_LOG_LIMIT),
    offset: z.string().max(2048).nullish(),
  })
  .superRefine(boundsInOrder);
export type LogQueryInput = z.output<typeof logQuerySchema>;

/** The filters of a parsed body or filter input, without nulls. */
export const toLogFilter = (f: z.output<typeof logFilterSchema>): LogFilter => ({
  ...(f.level && { level: f.level }),
  ...(f.query && { query: f.query }),
  ...(f.start_time && { start: f.start_time }),
  ...(f.end_time && { end: f.end_time }),
});
