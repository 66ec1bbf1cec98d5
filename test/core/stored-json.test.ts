import { describe, expect, it } from "vitest";
import { bool, int, isObj, num, numberOf, obj, objectOf, objs, str, strs, textOf } from "../../src/core/stored-json.js";

// JSON columns are not typed by the database: a value of the wrong shape reads as absent, never as itself.
describe("stored JSON readers", () => {
  const stored = { s: "a", e: "", n: 1.5, i: 2, b: false, o: { k: 1 }, l: [{ k: 1 }, 2, null], t: ["x", 3], nan: Number.NaN, nul: null, arr: [] };

  it("read a key by its type, or null", () => {
    expect([str(stored, "s"), str(stored, "e"), str(stored, "n"), str(stored, "missing")]).toEqual(["a", "", null, null]);
    expect([num(stored, "n"), num(stored, "s"), int(stored, "i"), int(stored, "n")]).toEqual([1.5, null, 2, null]);
    expect([bool(stored, "b"), bool(stored, "s")]).toEqual([false, null]);
    expect([obj(stored, "o"), obj(stored, "arr"), obj(stored, "nul")]).toEqual([{ k: 1 }, null, null]);
    expect([objs(stored, "l"), strs(stored, "t"), strs(stored, "s")]).toEqual([[{ k: 1 }], ["x"], null]);
  });

  it("read a value: an object or an empty one, a non-empty string, a finite number", () => {
    expect([isObj({}), isObj([]), isObj(null), isObj("x")]).toEqual([true, false, false, false]);
    expect([objectOf({ a: 1 }), objectOf([1]), objectOf(null), objectOf("x")]).toEqual([{ a: 1 }, {}, {}, {}]);
    expect([textOf("a"), textOf(""), textOf(1), textOf(null)]).toEqual(["a", undefined, undefined, undefined]);
    expect([numberOf(1), numberOf(Number.NaN), numberOf(Number.POSITIVE_INFINITY), numberOf("1")]).toEqual([1, undefined, undefined, undefined]);
  });
});
