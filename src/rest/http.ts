import type { Context } from "hono";
import type { z } from "zod";
import type { Tenant } from "../core/auth.js";
import { invalid } from "../core/errors.js";
import { listParams } from "../core/schemas/query.js";
import { jsonFault, parseInput, utf8Text } from "../core/validation.js";
import { isoString } from "../time.js";

export type Env = { Variables: { tenant: Tenant } };

/** The body's text; bytes that are not UTF-8 are a 422 json_invalid (see utf8Text). Read once, however often asked. */
export async function bodyText(c: Context): Promise<string> {
  const text = utf8Text(await c.req.arrayBuffer());
  if (text === null) throw invalid([{ loc: ["body"], msg: "JSON decode error", type: "json_invalid", input: {}, ctx: { error: "Invalid UTF-8" } }]);
  return text;
}

/**
 * The JSON body, or undefined when there is none. Malformed JSON is a 422 as FastAPI answers it,
 * so that no handler sees half-parsed input.
 */
export async function readJson(c: Context): Promise<unknown> {
  const text = await bodyText(c);
  if (text.trim() === "") return undefined;
  try {
    return JSON.parse(text);
  } catch (err) {
    const { error, position } = jsonFault(err);
    throw invalid([{ loc: ["body", position], msg: "JSON decode error", type: "json_invalid", input: {}, ctx: { error } }]);
  }
}


export const pathParams = <S extends z.ZodType>(c: Context, schema: S): z.output<S> =>
  parseInput(schema, c.req.param(), "path");

/**
 * Query parameters. A list parameter given more than once yields an array
 * (`?deployment_ids=a&deployment_ids=b`); any other, its last value, as FastAPI reads it.
 */
export function queryParams<S extends z.ZodType>(c: Context, schema: S): z.output<S> {
  const lists = listParams(schema);
  const flat: Record<string, string | string[]> = {};
  for (const [name, values] of Object.entries(c.req.queries())) flat[name] = values.length > 1 && lists.has(name) ? values : values.at(-1)!;
  return parseInput(schema, flat, "query");
}

/** A timestamp as answers show it: ISO 8601, null kept. */
export function iso(d: Date): string;
export function iso(d: Date | null): string | null;
export function iso(d: Date | null): string | null {
  return d ? isoString(d) : null;
}

/**
 * The headers of an answer that carries a credential (a token, a signed URL, an OAuth flow's
 * single-use state): no cache keeps it, and neither does Idempotency-Key (middleware/idempotency.ts).
 */
export const NO_STORE = { "Cache-Control": "no-store" };

