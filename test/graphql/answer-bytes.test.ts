import fc from "fast-check";
import { GraphQLError } from "graphql";
import { describe, expect, it } from "vitest";
import { jsonBytes, jsonPieces } from "../../src/graphql/answer-bytes.js";

/** What answers hold: JSON values with undefined here and there (graphql-jit leaves it for skipped fields), often long lists. */
const leaf = fc.oneof(fc.string({ unit: "binary" }), fc.double(), fc.integer(), fc.boolean(), fc.constant(null), fc.constant(undefined), fc.date({ noInvalidDate: true }));
const { value } = fc.letrec((tie) => ({
  value: fc.oneof({ depthSize: "small" }, leaf, tie("list"), tie("object")),
  list: fc.oneof(fc.array(tie("value"), { maxLength: 4 }), fc.array(tie("value"), { minLength: 16, maxLength: 40 })),
  object: fc.dictionary(fc.string(), tie("value"), { maxKeys: 5 }),
}));

describe("jsonBytes", () => {
  it("is JSON.stringify's text in UTF-8, for any answer-like value", () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string(), value), (v) => jsonBytes(v).equals(Buffer.from(JSON.stringify(v)))),
      { numRuns: 500 },
    );
  });

  it("writes a page of a long list in runs, with no piece near V8's large-object size, however its elements grow", () => {
    const node = { name: "é".repeat(500), emoji: "🚀", lone: "\ud800", at: new Date(0), skipped: undefined };
    const answer = { data: { deployments: { edges: Array.from({ length: 800 }, () => ({ node })), pageInfo: { hasNextPage: false } } } };
    const pieces = jsonPieces(answer);
    expect(pieces.join("")).toBe(JSON.stringify(answer));
    expect(jsonBytes(answer).toString("utf8")).toBe(JSON.stringify(answer));
    expect(JSON.stringify(answer).length).toBeGreaterThan(400_000);
    expect(Math.max(...pieces.map((p) => p.length))).toBeLessThan(40_000);
    // Fewer pieces than elements: stringifying each element alone costs a call each.
    expect(pieces.length).toBeLessThan(100);

    // Small elements first, then ones a hundred times larger: runs sized from the first stay bounded.
    const growing = Array.from({ length: 400 }, (_, i) => ({ text: "x".repeat(i < 8 ? 20 : 2_000) }));
    const grown = jsonPieces({ data: { list: growing } });
    expect(grown.join("")).toBe(JSON.stringify({ data: { list: growing } }));
    expect(Math.max(...grown.map((p) => p.length))).toBeLessThan(40_000);
  });

  it("keeps a small answer whole, and errors as their toJSON writes them", () => {
    const answer = { data: null, errors: [new GraphQLError("Not found.", { extensions: { code: "NOT_FOUND" } })] };
    expect(jsonPieces(answer)).toEqual([JSON.stringify(answer)]);
    expect(jsonBytes(answer).toString("utf8")).toBe(JSON.stringify(answer));
  });
});
