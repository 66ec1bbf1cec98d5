import fc from "fast-check";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { isoString, parseTimestamptz } from "../src/time.js";

/** pg's own parser of timestamptz text (postgres-date): what the fast path must agree with. */
const general = pg.types.getTypeParser(pg.types.builtins.TIMESTAMPTZ) as (text: string) => Date;

/** Every instant toISOString writes with four-digit years. */
const instants = fc.integer({ min: -62_135_596_800_000, max: 253_402_300_799_999 }).map((t) => new Date(t));

/** How PostgreSQL writes an instant at an offset: local time, 0 to 6 fraction digits without trailing zeros, `+HH` or `+HH:MM`. */
function postgresText(date: Date, micros: number, offsetMinutes: number): string {
  const local = new Date(date.getTime() + offsetMinutes * 60_000).toISOString();
  const fraction = `${local.slice(20, 23)}${String(micros).padStart(3, "0")}`.replace(/0+$/, "");
  const abs = Math.abs(offsetMinutes);
  const offset = `${offsetMinutes < 0 ? "-" : "+"}${String(Math.floor(abs / 60)).padStart(2, "0")}${abs % 60 ? `:${String(abs % 60).padStart(2, "0")}` : ""}`;
  return `${local.slice(0, 10)} ${local.slice(11, 19)}${fraction ? `.${fraction}` : ""}${offset}`;
}

describe("isoString", () => {
  it("writes what toISOString writes, for every instant", () => {
    fc.assert(fc.property(instants, (d) => isoString(d) === d.toISOString()), { numRuns: 20_000 });
    for (const t of [0, -1, 86_399_999, 86_400_000, -62_135_596_800_000, 253_402_300_799_999, 951_782_400_000]) {
      expect(isoString(new Date(t))).toBe(new Date(t).toISOString());
    }
  });

  it("leaves years outside 0001–9999 and invalid dates to toISOString", () => {
    for (const t of [-62_135_596_800_001, 253_402_300_800_000, 8.64e15]) expect(isoString(new Date(t))).toBe(new Date(t).toISOString());
    expect(() => isoString(new Date(Number.NaN))).toThrow(RangeError);
  });
});

describe("parseTimestamptz", () => {
  it("reads PostgreSQL's text as postgres-date does, at any offset and precision", () => {
    const offsets = fc.oneof(fc.constant(0), fc.integer({ min: -15, max: 15 }).map((h) => h * 60), fc.constantFrom(330, -210, 345, 525));
    const recent = fc.integer({ min: 0, max: 4_102_444_800_000 }).map((t) => new Date(t));
    fc.assert(
      fc.property(recent, fc.integer({ min: 0, max: 999 }), offsets, (date, micros, offset) => {
        const text = postgresText(date, micros, offset);
        const parsed = parseTimestamptz(text, general);
        return parsed.getTime() === general(text).getTime() && parsed.getTime() === date.getTime();
      }),
      { numRuns: 20_000 },
    );
  });

  it("hands every other form to the general parser", () => {
    const seen: string[] = [];
    const spy = (text: string) => (seen.push(text), general(text));
    const others = ["infinity", "-infinity", "0044-03-15 12:00:00+00 BC", "12345-01-01 00:00:00+00", "0099-01-01 00:00:00+00", "1883-11-18 12:00:00+00:09:21", "2026-11-26 11:58:42.+00"];
    for (const text of others) parseTimestamptz(text, spy);
    expect(seen).toEqual(others);
    expect(parseTimestamptz("2026-11-26 11:58:42.5+00", spy).toISOString()).toBe("2026-11-26T11:58:42.500Z");
    expect(seen).toHaveLength(others.length);
  });
});
