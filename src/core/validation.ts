import { z } from "zod";
import { type ValidationIssue, invalid } from "./errors.js";
import { quotable, secretsSent } from "./secret-schemas.js";

export type Location = "body" | "query" | "path";

/**
 * Parses input with a zod schema; on failure throws a VALIDATION CoreError whose issues are in
 * FastAPI's shape (loc starting with the location, pydantic's `type` names and messages), all at once.
 * An issue quotes what was sent (`input`) unless it may be or hold a secret value (secret-schemas.ts):
 * a secret, a list of them, or the whole body that carries them, whatever shape the client sent.
 */
export function parseInput<S extends z.ZodType>(schema: S, input: unknown, location: Location): z.output<S> {
  const deep = tooDeep(input, [location]);
  if (deep) throw invalid([deep]);
  const result = schema.safeParse(input, { reportInput: true });
  if (!result.success) {
    const sent = secretsSent(schema, input);
    throw invalid(
      withoutSafeIntegerBounds(result.error.issues).map((issue) => {
        const shown = toFastApiIssue(withSentInput(issue, input), location);
        if (!("input" in shown) || quotable(schema, issue.path, shown.input, sent)) return shown;
        const { input: _secret, ...rest } = shown;
        return rest;
      }),
    );
  }
  const unstorable = unstorableIssues(result.data, [location]);
  if (unstorable.length > 0) throw invalid(unstorable);
  return result.data;
}

/**
 * zod's int() also bounds a number by the safe integers, so a value far past a field's own bound
 * (`limit: 1e308`) would be told both bounds; its own is the one to tell.
 */
function withoutSafeIntegerBounds(issues: z.core.$ZodIssue[]): z.core.$ZodIssue[] {
  const safeBound = (i: z.core.$ZodIssue) =>
    (i.code === "too_big" && Number(i.maximum) === Number.MAX_SAFE_INTEGER) || (i.code === "too_small" && Number(i.minimum) === Number.MIN_SAFE_INTEGER);
  const samePath = (a: z.core.$ZodIssue, b: z.core.$ZodIssue) => a.path.length === b.path.length && a.path.every((p, n) => p === b.path[n]);
  return issues.filter((i) => !safeBound(i) || !issues.some((other) => other !== i && other.code === i.code && !safeBound(other) && samePath(i, other)));
}

/** No API input nests this deep (a Kubernetes volume source is about a dozen levels down a body). */
export const MAX_INPUT_DEPTH = 64;

/**
 * Deeper input is refused before zod sees it: zod, the 422's echo of the input and the JSON written
 * to the database all recurse, and a body of a million brackets would overflow the stack (a 500).
 * Walked without recursion; the issue names where the limit was crossed and does not echo the input.
 */
function tooDeep(input: unknown, root: (string | number)[]): ValidationIssue | null {
  const stack: { value: unknown; path: (string | number)[] }[] = [{ value: input, path: [] }];
  while (stack.length > 0) {
    const { value, path } = stack.pop()!;
    if (typeof value !== "object" || value === null) continue;
    if (path.length >= MAX_INPUT_DEPTH) {
      return { loc: [...root, ...path], type: "value_error", msg: `Value error, nested deeper than ${MAX_INPUT_DEPTH} levels` };
    }
    const entries: [string | number, unknown][] = Array.isArray(value) ? [...value.entries()] : Object.entries(value);
    for (const [key, v] of entries) stack.push({ value: v, path: [...path, key] });
  }
  return null;
}

/** An unpaired UTF-16 surrogate: valid in a JS string, not in UTF-8 (text is altered) or in jsonb (refused). */
const LONE_SURROGATE = /\p{Cs}/u;

/** Whether PostgreSQL can store a string as sent (no NUL, no unpaired surrogate). */
export const isStorable = (s: string) => unstorable(s) === null;

/** Why PostgreSQL cannot store a string as sent, or null. */
function unstorable(s: string): string | null {
  if (s.includes("\u0000")) return "must not contain NUL (\\u0000) characters";
  if (LONE_SURROGATE.test(s)) return "must be valid Unicode: unpaired surrogates (\\ud800-\\udfff) cannot be stored";
  return null;
}

/**
 * Strings PostgreSQL cannot store as sent: U+0000 (text and jsonb refuse it, a 500) and unpaired
 * surrogates (jsonb refuses them, text stores U+FFFD instead). Only the parsed value is searched, so
 * unknown (ignored) fields may hold anything; the value is not echoed, as it may be a secret.
 */
function unstorableIssues(value: unknown, loc: (string | number)[]): ValidationIssue[] {
  if (typeof value === "string") {
    const problem = unstorable(value);
    return problem ? [{ loc, type: "value_error", msg: `Value error, ${problem}` }] : [];
  }
  if (Array.isArray(value)) return value.flatMap((v, i) => unstorableIssues(v, [...loc, i]));
  if (typeof value === "object" && value !== null && Object.getPrototypeOf(value) === Object.prototype) {
    return Object.entries(value).flatMap(([k, v]) => {
      const problem = unstorable(k);
      return [
        ...(problem ? [{ loc: [...loc, k], type: "value_error", msg: `Value error, keys ${problem}` }] : []),
        ...unstorableIssues(v, [...loc, k]),
      ];
    });
  }
  return [];
}

/** Coercion reports what it made (NaN from `limit=abc`); a client is shown what it sent. */
function withSentInput(issue: z.core.$ZodIssue, input: unknown): z.core.$ZodIssue {
  if (!(typeof issue.input === "number" && Number.isNaN(issue.input))) return issue;
  let sent: unknown = input;
  for (const key of issue.path) sent = typeof sent === "object" && sent !== null ? (sent as Record<PropertyKey, unknown>)[key] : undefined;
  return { ...issue, input: sent } as z.core.$ZodIssue;
}

export function toFastApiIssue(issue: z.core.$ZodIssue, location: Location): ValidationIssue {
  const loc = [location, ...issue.path.map((p) => (typeof p === "symbol" ? String(p) : p))];
  const input = issue.input;
  const base = { loc, input };
  switch (issue.code) {
    case "invalid_type": {
      if (input === undefined) return { loc, type: "missing", msg: "Field required" };
      return { ...base, ...typeMismatch(issue.expected) };
    }
    case "invalid_format": {
      // Ids are z.guid(): any 8-4-4-4-12 hex UUID, of any version or variant, as pydantic and PostgreSQL take them.
      if (issue.format === "uuid" || issue.format === "guid") {
        return { ...base, type: "uuid_parsing", msg: "Input should be a valid UUID, invalid character or length" };
      }
      if (issue.format === "regex") {
        // zod gives the regex literal (`/^a$/i`); pydantic shows its source (`^a$`).
        const raw = (issue as { pattern?: string }).pattern ?? "";
        const pattern = /^\/(.*)\/[a-z]*$/s.exec(raw)?.[1] ?? raw;
        return { ...base, type: "string_pattern_mismatch", msg: `String should match pattern '${pattern}'`, ctx: { pattern } };
      }
      return { ...base, type: "value_error", msg: `Value error, ${issue.message}` };
    }
    case "too_small":
      return { ...base, ...bound("greater_than", issue.origin, issue.minimum, issue.inclusive) };
    case "too_big":
      return { ...base, ...bound("less_than", issue.origin, issue.maximum, issue.inclusive) };
    case "invalid_value": {
      if (input === undefined) return { loc, type: "missing", msg: "Field required" };
      const expected = issue.values.map((v) => `'${String(v)}'`);
      const list = expected.length > 1 ? `${expected.slice(0, -1).join(", ")} or ${expected.at(-1)}` : expected[0];
      return { ...base, type: "enum", msg: `Input should be ${list}`, ctx: { expected: list } };
    }
    case "unrecognized_keys":
      return { ...base, type: "extra_forbidden", msg: "Extra inputs are not permitted" };
    case "custom": {
      const type = (issue.params as { type?: unknown } | undefined)?.type;
      if (typeof type === "string") return { ...base, type, msg: issue.message };
      return { ...base, type: "value_error", msg: `Value error, ${issue.message}` };
    }
    default:
      return { ...base, type: "value_error", msg: `Value error, ${issue.message}` };
  }
}

/**
 * The schemas that read a query parameter's text as a value of another type (queryInt, queryBool,
 * commaList), each with the JSON Schema of what it reads, when zod's own input schema (the text) is
 * not it. The OpenAPI document (rest/docs.ts) shows a parameter as what it is read as: `limit` an
 * integer, not a string.
 */
export const queryDecoders = new WeakMap<z.ZodType, QueryDecoded | null>();

/** What a query decoder reads its text as, in JSON Schema's words. */
export interface QueryDecoded {
  type: "integer" | "boolean";
  minimum?: number;
  maximum?: number;
}

/** Marks `schema` as reading query text as `as` (null: zod's input schema already tells it); returns it. */
export function queryDecoder<S extends z.ZodType>(schema: S, as: QueryDecoded | null): S {
  queryDecoders.set(schema, as);
  return schema;
}

/**
 * An integer carried as a string (a query parameter). Unlike z.coerce.number(), a value that is not
 * an integer fails as pydantic's int_parsing, and "" is not 0. Its bounds (documented with its type)
 * are checked before the range of safe integers, beyond which nothing is passed on (a database
 * offset would fail on it): a limit far too large is told its own bound, not that range's.
 */
export const queryInt = (bounds: { min?: number; max?: number } = {}) => {
  let range = z.number();
  if (bounds.min !== undefined) range = range.min(bounds.min);
  if (bounds.max !== undefined) range = range.max(bounds.max);
  return queryDecoder(
    z
      .string()
      .refine((s) => /^\s*[-+]?\d+\s*$/.test(s), {
        message: "Input should be a valid integer, unable to parse string as an integer",
        params: { type: "int_parsing" },
      })
      .transform(Number)
      .pipe(range)
      .pipe(z.int()),
    { type: "integer", ...(bounds.min !== undefined && { minimum: bounds.min }), ...(bounds.max !== undefined && { maximum: bounds.max }) },
  );
};

function typeMismatch(expected: string): Pick<ValidationIssue, "type" | "msg"> {
  switch (expected) {
    case "string":
      return { type: "string_type", msg: "Input should be a valid string" };
    case "number":
      return { type: "float_parsing", msg: "Input should be a valid number" };
    case "int":
      return { type: "int_parsing", msg: "Input should be a valid integer" };
    case "boolean":
      return { type: "bool_parsing", msg: "Input should be a valid boolean" };
    case "array":
      return { type: "list_type", msg: "Input should be a valid list" };
    case "object":
    case "record":
      return { type: "dict_type", msg: "Input should be a valid dictionary or object to extract fields from" };
    default:
      return { type: `${expected}_type`, msg: `Input should be a valid ${expected}` };
  }
}

function bound(
  direction: "greater_than" | "less_than",
  origin: string,
  limit: number | bigint,
  inclusive: boolean | undefined,
): Pick<ValidationIssue, "type" | "msg" | "ctx"> {
  const n = Number(limit);
  if (origin === "string") {
    const short = direction === "greater_than";
    return short
      ? { type: "string_too_short", msg: `String should have at least ${n} character${n === 1 ? "" : "s"}`, ctx: { min_length: n } }
      : { type: "string_too_long", msg: `String should have at most ${n} character${n === 1 ? "" : "s"}`, ctx: { max_length: n } };
  }
  if (origin === "array") {
    return direction === "greater_than"
      ? { type: "too_short", msg: `List should have at least ${n} item${n === 1 ? "" : "s"}`, ctx: { min_length: n } }
      : { type: "too_long", msg: `List should have at most ${n} item${n === 1 ? "" : "s"}`, ctx: { max_length: n } };
  }
  const type = `${direction}${inclusive ? "_equal" : ""}`;
  const words = `${direction.replace("_", " ")}${inclusive ? " or equal to" : ""}`;
  // pydantic's ctx keys: gt, ge, lt, le.
  const key = { greater_than: inclusive ? "ge" : "gt", less_than: inclusive ? "le" : "lt" }[direction];
  return { type, msg: `Input should be ${words} ${n}`, ctx: { [key]: n } };
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * A body's text, or null when its bytes are not UTF-8. Decoded leniently, each bad byte would
 * become U+FFFD: input stored altered (a secret's value too), and two different bodies read alike.
 */
export function utf8Text(bytes: ArrayBuffer): string | null {
  try {
    return utf8.decode(bytes);
  } catch {
    return null;
  }
}

/**
 * What JSON.parse's failure (or its `{message}`) says, without the body: V8 quotes some ten
 * characters around an unexpected token (`Unexpected token 'h', "…":hunter2}" is not valid JSON`),
 * which may be a secret a script left unquoted. Its other messages name the fault and its position.
 */
export function jsonFault(err: unknown): { error: string; position: number } {
  const message = typeof err === "object" && err !== null && typeof (err as { message?: unknown }).message === "string" ? (err as { message: string }).message : "";
  const position = Number(/ at position (\d+)/.exec(message)?.[1] ?? 0);
  const error = message.startsWith("Unexpected token") || message.includes('"') ? "Unexpected token" : message || "invalid JSON";
  return { error, position };
}
