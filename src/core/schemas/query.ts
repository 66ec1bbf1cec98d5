import { z } from "zod";

/**
 * A list in a query string, given comma separated (`?ids=a,b`), repeated (`?ids=a&ids=b`) or both.
 * Items are trimmed and empty ones dropped, then each is validated by `item`.
 */
export const commaList = <T extends z.ZodType>(item: T) =>
  z.preprocess((raw) => {
    if (raw === undefined) return undefined;
    const values = Array.isArray(raw) ? raw : [raw];
    return values.flatMap((v) => (typeof v === "string" ? v.split(",") : [v])).map((v) => (typeof v === "string" ? v.trim() : v)).filter((v) => v !== "");
  }, z.array(item));

const TRUE = new Set(["true", "1", "yes", "on", "t", "y"]);
const FALSE = new Set(["false", "0", "no", "off", "f", "n"]);

/** A boolean query parameter, parsed as pydantic does (`true`/`false`, `1`/`0`, `yes`/`no`, ...). */
export const queryBool = z.string().transform((raw, ctx) => {
  const v = raw.trim().toLowerCase();
  if (TRUE.has(v)) return true;
  if (FALSE.has(v)) return false;
  ctx.addIssue({ code: "invalid_type", expected: "boolean", input: raw });
  return z.NEVER;
});
