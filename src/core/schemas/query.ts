import { z } from "zod";
import { queryDecoder } from "../validation.js";

/**
 * A list in a query string, given comma separated (`?ids=a,b`), repeated (`?ids=a&ids=b`) or both.
 * Items are trimmed and empty ones dropped, then each is validated by `item`; a list with no items
 * (`?ids=`) is no list at all (unset).
 */
export const commaList = <T extends z.ZodType>(item: T) => {
  const list = z.preprocess((raw) => {
    if (raw === undefined) return undefined;
    const values = Array.isArray(raw) ? raw : [raw];
    const items = values.flatMap((v) => (typeof v === "string" ? v.split(",") : [v])).map((v) => (typeof v === "string" ? v.trim() : v)).filter((v) => v !== "");
    return items.length > 0 ? items : undefined;
  }, z.array(item).optional());
  LISTS.add(list);
  // Its input schema (the preprocess's output) is already the array it reads.
  return queryDecoder(list, null);
};

/** The schemas commaList made: the parameters that may be repeated. */
const LISTS = new WeakSet<z.ZodType>();
const listNamesOf = new WeakMap<z.ZodType, ReadonlySet<string>>();

/** A parameter's schema is a list when it is commaList's, piped or made optional after. */
const isList = (schema: z.ZodType): boolean =>
  LISTS.has(schema) || (schema instanceof z.ZodPipe && isList(schema.in as z.ZodType)) || (schema instanceof z.ZodOptional && isList(schema.unwrap() as z.ZodType));

/** The query object inside a schema (emptyFiltersUnset wraps it in a pipe). */
export const objectOf = (schema: z.ZodType): z.ZodObject | null =>
  schema instanceof z.ZodObject ? schema : schema instanceof z.ZodPipe ? (objectOf(schema.out as z.ZodType) ?? objectOf(schema.in as z.ZodType)) : null;

/**
 * The names of a query schema's list parameters (commaList). Any other parameter given more than
 * once is read as FastAPI reads it: its last value.
 */
export function listParams(schema: z.ZodType): ReadonlySet<string> {
  let names = listNamesOf.get(schema);
  if (!names) {
    const shape = objectOf(schema)?.shape ?? {};
    names = new Set(Object.entries(shape).flatMap(([name, field]) => (isList(field as z.ZodType) ? [name] : [])));
    listNamesOf.set(schema, names);
  }
  return names;
}

/**
 * Query filters as the real API reads them: a filter sent empty (`?name_contains=`) filters
 * nothing, as if it were not sent. `keep` names parameters whose empty value stays an error (limit, offset).
 */
export const emptyFiltersUnset = <S extends z.ZodType>(schema: S, keep: readonly string[] = ["limit", "offset"]) =>
  z.preprocess((raw) => {
    if (typeof raw !== "object" || raw === null || Array.isArray(raw)) return raw;
    return Object.fromEntries(Object.entries(raw).filter(([name, value]) => keep.includes(name) || !(value === "" || (Array.isArray(value) && value.every((v) => v === "")))));
  }, schema);

const TRUE = new Set(["true", "1", "yes", "on", "t", "y"]);
const FALSE = new Set(["false", "0", "no", "off", "f", "n"]);

/** A boolean query parameter, parsed as pydantic does (`true`/`false`, `1`/`0`, `yes`/`no`, ...). */
export const queryBool = queryDecoder(
  z.string().transform((raw, ctx) => {
    const v = raw.trim().toLowerCase();
    if (TRUE.has(v)) return true;
    if (FALSE.has(v)) return false;
    ctx.addIssue({ code: "invalid_type", expected: "boolean", input: raw });
    return z.NEVER;
  }),
  { type: "boolean" },
);
