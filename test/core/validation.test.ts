import { describe, expect, it } from "vitest";
import { z } from "zod";
import { CoreError, type ValidationIssue } from "../../src/core/errors.js";
import { type Location, parseInput, queryInt } from "../../src/core/validation.js";

/** The issues parseInput reports for one field's schema and value, at body.field. */
function issuesOf(schema: z.ZodType, value: unknown, location: Location = "body"): ValidationIssue[] {
  try {
    parseInput(z.object({ field: schema }), value === undefined ? {} : { field: value }, location);
  } catch (err) {
    expect(err).toBeInstanceOf(CoreError);
    expect((err as CoreError).code).toBe("VALIDATION");
    return (err as CoreError).issues;
  }
  throw new Error("expected a validation error");
}

const one = (schema: z.ZodType, value: unknown) => {
  const issues = issuesOf(schema, value);
  expect(issues).toHaveLength(1);
  return issues[0]!;
};

describe("parseInput", () => {
  it("returns the parsed (coerced, defaulted) value on success, ignoring unknown fields", () => {
    const schema = z.object({ limit: z.coerce.number().int().default(20), name: z.string() });
    expect(parseInput(schema, { limit: "5", name: "a", extra: 1 }, "query")).toEqual({ limit: 5, name: "a" });
    expect(parseInput(schema, { name: "a" }, "query")).toEqual({ limit: 20, name: "a" });
  });

  it("reports every problem at once, each at its full loc under the location, and a readable message", () => {
    const schema = z.object({
      a: z.string(),
      nested: z.object({ list: z.array(z.object({ b: z.number() })) }),
      c: z.uuid(),
    });
    try {
      parseInput(schema, { nested: { list: [{ b: 1 }, { b: "x" }] }, c: "nope" }, "body");
      expect.unreachable();
    } catch (err) {
      const e = err as CoreError;
      expect(e.issues.map((i) => i.loc)).toEqual([
        ["body", "a"],
        ["body", "nested", "list", 1, "b"],
        ["body", "c"],
      ]);
      expect(e.message).toBe(
        "body.a: Field required; body.nested.list.1.b: Input should be a valid number; body.c: Input should be a valid UUID, invalid character or length",
      );
    }
  });

  it("uses the given location as loc[0]", () => {
    for (const location of ["body", "query", "path"] as const) {
      expect(issuesOf(z.string(), 1, location)[0]!.loc).toEqual([location, "field"]);
    }
  });

  it("a missing value is `missing` without an input; a missing body is one issue at [body]", () => {
    expect(one(z.string(), undefined)).toEqual({ loc: ["body", "field"], type: "missing", msg: "Field required" });
    try {
      parseInput(z.object({ a: z.string() }), undefined, "body");
    } catch (err) {
      expect((err as CoreError).issues).toEqual([{ loc: ["body"], type: "missing", msg: "Field required" }]);
    }
  });
});

describe("an integer far past its bound", () => {
  it("is told its field's bound alone, not also the safe integers' that zod's int() checks", () => {
    const limit = z.number().int().min(1).max(1000);
    expect(issuesOf(limit, 1e308)).toEqual([
      { loc: ["body", "field"], type: "less_than_equal", msg: "Input should be less than or equal to 1000", ctx: { le: 1000 }, input: 1e308 },
    ]);
    expect(issuesOf(limit, -1e308)).toEqual([
      { loc: ["body", "field"], type: "greater_than_equal", msg: "Input should be greater than or equal to 1", ctx: { ge: 1 }, input: -1e308 },
    ]);
    // Without a bound of its own, the safe integers' is the one it has.
    expect(issuesOf(z.number().int(), 1e308)).toEqual([expect.objectContaining({ type: "less_than_equal", ctx: { le: Number.MAX_SAFE_INTEGER } })]);
  });
});

describe("NUL characters, which PostgreSQL text cannot hold", () => {
  it("are refused wherever they are in the parsed value, without echoing it, and ignored in unknown fields", () => {
    const schema = z.object({ name: z.string(), labels: z.record(z.string(), z.string()), list: z.array(z.string()) });
    try {
      parseInput(schema, { name: "a\u0000b", labels: { ok: "x\u0000", "k\u0000": "v" }, list: ["fine", "\u0000"], extra: "\u0000" }, "body");
      expect.unreachable();
    } catch (err) {
      expect((err as CoreError).issues).toEqual([
        { loc: ["body", "name"], type: "value_error", msg: "Value error, must not contain NUL (\\u0000) characters" },
        { loc: ["body", "labels", "ok"], type: "value_error", msg: expect.stringContaining("NUL") },
        { loc: ["body", "labels", "k\u0000"], type: "value_error", msg: "Value error, keys must not contain NUL (\\u0000) characters" },
        { loc: ["body", "list", 1], type: "value_error", msg: expect.stringContaining("NUL") },
      ]);
    }
    expect(parseInput(schema, { name: "a", labels: {}, list: [], extra: "\u0000" }, "body")).toEqual({ name: "a", labels: {}, list: [] });
  });
});

describe("zod issue -> FastAPI issue", () => {
  it.each([
    [z.string(), 5, "string_type", "Input should be a valid string"],
    [z.string(), null, "string_type", "Input should be a valid string"],
    [z.number(), "5", "float_parsing", "Input should be a valid number"],
    [z.int(), 1.5, "int_parsing", "Input should be a valid integer"],
    [z.boolean(), "yes", "bool_parsing", "Input should be a valid boolean"],
    [z.array(z.string()), "a", "list_type", "Input should be a valid list"],
    [z.object({}), [], "dict_type", "Input should be a valid dictionary or object to extract fields from"],
    [z.record(z.string(), z.string()), 5, "dict_type", "Input should be a valid dictionary or object to extract fields from"],
    [z.bigint(), 1, "bigint_type", "Input should be a valid bigint"],
  ])("invalid_type %#: %s -> %s", (schema, input, type, msg) => {
    expect(one(schema, input)).toEqual({ loc: ["body", "field"], input, type, msg });
  });

  it("formats: uuid, regex (pattern source in ctx), others as value_error", () => {
    expect(one(z.uuid(), "abc")).toEqual({
      loc: ["body", "field"],
      input: "abc",
      type: "uuid_parsing",
      msg: "Input should be a valid UUID, invalid character or length",
    });
    expect(one(z.string().regex(/^[a-z]+$/i), "A1")).toEqual({
      loc: ["body", "field"],
      input: "A1",
      type: "string_pattern_mismatch",
      msg: "String should match pattern '^[a-z]+$'",
      ctx: { pattern: "^[a-z]+$" },
    });
    expect(one(z.email(), "nope")).toEqual({
      loc: ["body", "field"],
      input: "nope",
      type: "value_error",
      msg: "Value error, Invalid email address",
    });
  });

  it("string and list lengths", () => {
    expect(one(z.string().min(3), "ab")).toMatchObject({ type: "string_too_short", msg: "String should have at least 3 characters", ctx: { min_length: 3 } });
    expect(one(z.string().min(1), "")).toMatchObject({ type: "string_too_short", msg: "String should have at least 1 character", ctx: { min_length: 1 } });
    expect(one(z.string().max(2), "abc")).toMatchObject({ type: "string_too_long", msg: "String should have at most 2 characters", ctx: { max_length: 2 } });
    expect(one(z.array(z.string()).min(2), ["a"])).toMatchObject({ type: "too_short", msg: "List should have at least 2 items", ctx: { min_length: 2 } });
    expect(one(z.array(z.string()).max(1), ["a", "b"])).toMatchObject({ type: "too_long", msg: "List should have at most 1 item", ctx: { max_length: 1 } });
  });

  it("number bounds, inclusive and exclusive", () => {
    expect(one(z.number().min(1), 0)).toEqual({
      loc: ["body", "field"],
      input: 0,
      type: "greater_than_equal",
      msg: "Input should be greater than or equal to 1",
      ctx: { ge: 1 },
    });
    expect(one(z.number().gt(0), 0)).toMatchObject({ type: "greater_than", msg: "Input should be greater than 0", ctx: { gt: 0 } });
    expect(one(z.number().max(100), 101)).toMatchObject({ type: "less_than_equal", msg: "Input should be less than or equal to 100", ctx: { le: 100 } });
    expect(one(z.number().lt(10), 10)).toMatchObject({ type: "less_than", msg: "Input should be less than 10", ctx: { lt: 10 } });
  });

  it("enums and literals list the expected values as pydantic does", () => {
    expect(one(z.enum(["a", "b", "c"]), "d")).toEqual({
      loc: ["body", "field"],
      input: "d",
      type: "enum",
      msg: "Input should be 'a', 'b' or 'c'",
      ctx: { expected: "'a', 'b' or 'c'" },
    });
    expect(one(z.literal("k8s"), "ecs")).toMatchObject({ type: "enum", msg: "Input should be 'k8s'", ctx: { expected: "'k8s'" } });
  });

  it("unknown keys of a strict object are extra_forbidden; refinements are value_error with their message", () => {
    expect(one(z.strictObject({ a: z.string() }), { a: "x", b: 1 })).toMatchObject({ type: "extra_forbidden", msg: "Extra inputs are not permitted" });
    expect(one(z.string().refine((s) => s.startsWith("x"), "must start with x"), "y")).toEqual({
      loc: ["body", "field"],
      input: "y",
      type: "value_error",
      msg: "Value error, must start with x",
    });
  });

  it("reports what the client sent, not what coercion made of it", () => {
    const issues = issuesOf(z.coerce.number().int(), "abc", "query");
    expect(issues).toEqual([{ loc: ["query", "field"], input: "abc", type: "float_parsing", msg: "Input should be a valid number" }]);
    expect(JSON.parse(JSON.stringify(issues))[0].input).toBe("abc");
    expect(issuesOf(z.coerce.number().int().max(100), "101", "query")[0]).toMatchObject({ type: "less_than_equal", input: 101 });
  });

  it("a missing enum field is `missing`, not a bad enum value", () => {
    expect(issuesOf(z.enum(["a", "b"]), undefined)).toEqual([{ loc: ["body", "field"], type: "missing", msg: "Field required" }]);
  });

  it("an integer query parameter that is not one is int_parsing with what was sent", () => {
    for (const sent of ["abc", "1.5", "", "1e3"]) {
      expect(issuesOf(queryInt(), sent, "query"), sent).toEqual([
        { loc: ["query", "field"], input: sent, type: "int_parsing", msg: "Input should be a valid integer, unable to parse string as an integer" },
      ]);
    }
    expect(parseInput(z.object({ n: queryInt() }), { n: " 42 " }, "query")).toEqual({ n: 42 });
    expect(issuesOf(queryInt({ max: 100 }), "101", "query")[0]).toMatchObject({ type: "less_than_equal", input: 101, ctx: { le: 100 } });
    expect(issuesOf(queryInt({ min: 1 }), "-3", "query")[0]).toMatchObject({ type: "greater_than_equal", input: -3, ctx: { ge: 1 } });
    // Its own bounds are told before the safe-integer range: a limit of 2^53 is "at most 100".
    expect(issuesOf(queryInt({ min: 1, max: 100 }), "9007199254740993", "query")[0]).toMatchObject({ type: "less_than_equal", ctx: { le: 100 } });
    // Beyond a safe integer (a database offset would fail on it): refused, not passed on.
    expect(issuesOf(queryInt(), "999999999999999999999999999999", "query")[0]).toMatchObject({ loc: ["query", "field"], type: "less_than_equal" });
  });
});
