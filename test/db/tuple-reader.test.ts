import { describe, expect, it } from "vitest";
import { tupleReader } from "../../src/db/prepared.js";

describe("tupleReader", () => {
  it("reads each field from its column, from an offset, keys in the fields' order", () => {
    const read = tupleReader<Record<string, unknown>>(["id", "createdAt", "sourceConfig"], 1);
    const at = new Date(0);
    const row = read(["skipped", "d-1", at, { a: 1 }, "after"]);
    expect(row).toEqual({ id: "d-1", createdAt: at, sourceConfig: { a: 1 } });
    expect(Object.keys(row)).toEqual(["id", "createdAt", "sourceConfig"]);
    expect(row.createdAt).toBe(at);
  });

  it("takes any field name as a key, quoted, never as code", () => {
    const read = tupleReader<Record<string, unknown>>(['a"b', "c}; throw 1; {", "__proto__x"]);
    expect(read([1, 2, 3])).toEqual({ 'a"b': 1, "c}; throw 1; {": 2, __proto__x: 3 });
  });

  it("refuses __proto__ as a field (in a literal it would set the prototype)", () => {
    expect(() => tupleReader(["id", "__proto__"])).toThrow(/__proto__/);
  });

  it("reads a missing column as undefined", () => {
    expect(tupleReader<Record<string, unknown>>(["a", "b"])([1])).toEqual({ a: 1, b: undefined });
  });
});
