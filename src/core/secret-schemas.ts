import type { z } from "zod";

/**
 * Which parts of an input schema hold secret values. A schema is marked once where it is defined
 * (the `value` of a secret); a 422 then never quotes the input at a place where the schema could hold
 * one: at a secret, inside one, or at any place above one (the body as a whole, a `secrets` list),
 * whatever shape the client actually sent there.
 */
const SECRET = new WeakSet<z.core.$ZodType>();

/** Marks a schema's values as secrets: never quoted in an error. */
export function secretValue<S extends z.core.$ZodType>(schema: S): S {
  SECRET.add(schema);
  return schema;
}

type Def = {
  type: string;
  shape?: Record<string, z.core.$ZodType>;
  element?: z.core.$ZodType;
  innerType?: z.core.$ZodType;
  in?: z.core.$ZodType;
  out?: z.core.$ZodType;
  options?: readonly z.core.$ZodType[];
  left?: z.core.$ZodType;
  right?: z.core.$ZodType;
  valueType?: z.core.$ZodType;
  items?: readonly z.core.$ZodType[];
  rest?: z.core.$ZodType | null;
  catchall?: z.core.$ZodType;
  getter?: () => z.core.$ZodType;
};

const defOf = (schema: z.core.$ZodType) => schema._zod.def as unknown as Def;

/** Schemas that only wrap others: what they check is what their inner schemas check. */
function inner(def: Def): z.core.$ZodType[] | null {
  switch (def.type) {
    case "optional":
    case "nullable":
    case "default":
    case "prefault":
    case "nonoptional":
    case "readonly":
    case "catch":
    case "success":
      return def.innerType ? [def.innerType] : [];
    case "pipe":
      return [def.in, def.out].filter((s): s is z.core.$ZodType => s != null);
    case "union":
      return [...(def.options ?? [])];
    case "intersection":
      return [def.left, def.right].filter((s): s is z.core.$ZodType => s != null);
    case "lazy":
      return def.getter ? [def.getter()] : [];
    default:
      return null;
  }
}

/** The schemas that check a value for `schema`, wrappers looked through (a secret is never looked into). */
function unwrap(schema: z.core.$ZodType, seen = new Set<z.core.$ZodType>()): z.core.$ZodType[] {
  if (SECRET.has(schema)) return [schema];
  if (seen.has(schema)) return [];
  seen.add(schema);
  const wrapped = inner(defOf(schema));
  return wrapped ? wrapped.flatMap((s) => unwrap(s, seen)) : [schema];
}

/** What checks the value at `key` of a value that `schema` (unwrapped) checks. */
function child(schema: z.core.$ZodType, key: string | number): z.core.$ZodType[] {
  const def = defOf(schema);
  switch (def.type) {
    case "object": {
      const field = typeof key === "string" && def.shape && Object.hasOwn(def.shape, key) ? def.shape[key] : def.catchall;
      return field ? [field] : [];
    }
    case "array":
      return def.element ? [def.element] : [];
    case "record":
      return def.valueType ? [def.valueType] : [];
    case "tuple": {
      const item = typeof key === "number" ? def.items?.[key] : undefined;
      return item ? [item] : def.rest ? [def.rest] : [];
    }
    default:
      return [];
  }
}

const holds = new WeakMap<z.core.$ZodType, boolean>();

/** Whether a value checked against `schema` may hold a secret anywhere inside. */
function holdsSecret(schema: z.core.$ZodType, visiting = new Set<z.core.$ZodType>()): boolean {
  const known = holds.get(schema);
  if (known !== undefined) return known;
  if (SECRET.has(schema)) return true;
  // A recursive schema (z.json()) is walked once.
  if (visiting.has(schema)) return false;
  visiting.add(schema);
  const def = defOf(schema);
  const parts = [
    ...Object.values(def.shape ?? {}),
    ...(def.options ?? []),
    ...(def.items ?? []),
    ...[def.element, def.innerType, def.in, def.out, def.left, def.right, def.valueType, def.rest, def.catchall].filter(
      (s): s is z.core.$ZodType => s != null,
    ),
    ...(def.type === "lazy" && def.getter ? [def.getter()] : []),
  ];
  const result = parts.some((part) => holdsSecret(part, visiting));
  visiting.delete(schema);
  if (visiting.size === 0 || result) holds.set(schema, result);
  return result;
}

/**
 * Whether a 422 may quote `input`, sent at `path` of a value that `schema` checks. Not when the schema
 * may hold a secret there: the path passes through a secret, or the schema at its end holds one (the
 * body as a whole, a `secrets` list). And in an input that carries secrets, not an object or a list
 * either, wherever it was sent: it may be a secrets list, or the whole body, put in the wrong place;
 * nor a string that holds one of the secret values sent (`sent`: secretsSent of the whole input).
 */
export function quotable(schema: z.core.$ZodType, path: readonly PropertyKey[], input: unknown, sent: readonly string[] = []): boolean {
  if (!holdsSecret(schema)) return true;
  if (mayHoldSecret(schema, path)) return false;
  if (typeof input === "string") return !sent.some((secret) => secret !== "" && input.includes(secret));
  return input === null || typeof input !== "object";
}

/** The strings `input` holds where `schema` keeps secrets: the secret values a client sent. */
export function secretsSent(schema: z.core.$ZodType, input: unknown): string[] {
  if (!holdsSecret(schema)) return [];
  const found: string[] = [];
  const stack: { at: z.core.$ZodType[]; value: unknown }[] = [{ at: unwrap(schema), value: input }];
  while (stack.length > 0) {
    const { at, value } = stack.pop()!;
    if (at.some((s) => SECRET.has(s))) {
      if (typeof value === "string") found.push(value);
      continue;
    }
    if (typeof value !== "object" || value === null) continue;
    const entries: [string | number, unknown][] = Array.isArray(value) ? [...value.entries()] : Object.entries(value);
    for (const [key, v] of entries) {
      const next = at.flatMap((s) => child(s, key)).flatMap((s) => unwrap(s));
      if (next.length > 0) stack.push({ at: next, value: v });
    }
  }
  return found;
}

/** Whether what is sent at `path` of a value that `schema` checks may be, or hold, a secret. */
function mayHoldSecret(schema: z.core.$ZodType, path: readonly PropertyKey[]): boolean {
  let at = unwrap(schema);
  for (const key of path) {
    if (at.some((s) => SECRET.has(s))) return true;
    if (typeof key === "symbol") break;
    at = at.flatMap((s) => child(s, key)).flatMap((s) => unwrap(s));
    if (at.length === 0) return false;
  }
  return at.some((s) => holdsSecret(s));
}
