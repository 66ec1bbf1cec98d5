import fc from "fast-check";
import { expect } from "vitest";
import type { Sql } from "../../src/db/client.js";
import { changedTables, type Fingerprint, fingerprint, stampedTables, type WriteStamps, writeStamps } from "./db-fingerprint.js";

/**
 * Building blocks of the fuzz tests: hostile values, JSON shaped like (and unlike) what an endpoint
 * takes, malformed raw bodies, and a watch that proves the database unchanged after a refusal.
 */

/**
 * How many cases a fuzz property runs: FUZZ_RUNS, when set, for every property; otherwise its own
 * number scaled by FUZZ_SCALE (default 1: `npm test` runs them all). .ci/run runs the suite twice,
 * with FUZZ_SCALE=0.5 on PGlite and 0.25 on PostgreSQL: the first run's database is PostgreSQL too
 * (PGlite is its WASM build), so what the second adds is the pg driver and its pool under every
 * endpoint, which a quarter of the cases still reaches; and with every case on PGlite, CI took 608 s
 * on its 2-core machine, past its 10 minutes (534 s at half). Each run draws new random cases.
 * Never fewer than 10.
 */
export function fuzzRuns(runs: number): number {
  if (process.env.FUZZ_RUNS) return Number(process.env.FUZZ_RUNS);
  const scale = Number(process.env.FUZZ_SCALE ?? 1);
  return Math.max(10, Math.ceil(runs * (Number.isFinite(scale) && scale > 0 ? scale : 1)));
}

/** Strings that have broken parsers, validators, SQL and JSON columns elsewhere. */
const NASTY = [
  "", " ", "\t", "\r\n", "\u0000", "a\u0000b", "\ud800", "x\udfff", "\ud83d", "😀", "e\u0301", "\u202e", "\ufeff", "\u2028",
  "%", "_", "%_\\", "\\", "'", '"', "`", "'; DROP TABLE deployments; --", "' OR '1'='1", "$1", "?", "&", "#", "/", "..", "../../etc/passwd",
  "%00", "%2e%2e%2f", "%zz", "${jndi:ldap://x/a}", "{{7*7}}", "<script>alert(1)</script>", "null", "undefined", "true", "false",
  "NaN", "Infinity", "-1", "0", "-0", "1e309", "0x10", "9".repeat(400), "__proto__", "constructor", "prototype", "toString",
  "00000000-0000-0000-0000-000000000000", "FFFFFFFF-FFFF-4FFF-BFFF-FFFFFFFFFFFF", "00000000-0000-4000-8000-00000000000g",
  "00000000000040008000000000000000", "{00000000-0000-4000-8000-000000000000}", "k8s", "K8S", "codehost", "internal_container",
  "external_container", "dev", "DEPLOYED", "a".repeat(64), "a".repeat(256), "a".repeat(5000), "b".repeat(70_000),
  "https://", "https://example.com/" + "p".repeat(3000), "javascript:alert(1)", "ftp://example.com", "http://[::1", "github:acme-bot",
] as const;

export const nastyString = fc.constantFrom(...NASTY);

/** Any string, weighted toward the nasty ones. */
export const hostileString: fc.Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: nastyString },
  { weight: 2, arbitrary: fc.string({ unit: "binary", maxLength: 24 }) },
  { weight: 1, arbitrary: fc.string({ maxLength: 80 }) },
  { weight: 1, arbitrary: fc.uuid() },
);

/** Numbers at and past every bound the API has (ints, 32-bit ids, cpu decimals, JSON's limits). */
export const hostileNumber: fc.Arbitrary<number> = fc.oneof(
  fc.constantFrom(0, -0, 1, -1, 0.1, 0.5, 1.5, 1e-320, 63, 64, 100, 101, 1000, 1001, 2 ** 31 - 1, 2 ** 31, -(2 ** 31) - 1, 2 ** 53, 2 ** 53 + 2, 1e21, Number.MAX_VALUE, -Number.MAX_VALUE),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
);

/** Keys a hostile object may use: the endpoint's own field names, prototype keys, odd ones. */
function keyArb(fields: readonly string[]): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 5, arbitrary: fc.constantFrom(...fields) },
    { weight: 1, arbitrary: fc.constantFrom("__proto__", "constructor", "prototype", "", "\u0000", "\ud800", "a".repeat(400)) },
    { weight: 1, arbitrary: fc.string({ maxLength: 12 }) },
  );
}

/** JSON values of any shape, whose objects mostly use `fields` as keys so that validators go deep. */
export function hostileJson(fields: readonly string[]): fc.Arbitrary<unknown> {
  const leaf = fc.oneof(
    { weight: 3, arbitrary: hostileString },
    { weight: 2, arbitrary: hostileNumber },
    { weight: 1, arbitrary: fc.boolean() },
    { weight: 1, arbitrary: fc.constant(null) },
  );
  const { value } = fc.letrec<{ value: unknown; array: unknown[]; object: Record<string, unknown> }>((tie) => ({
    value: fc.oneof({ depthSize: "small", withCrossShrink: true }, leaf, tie("array"), tie("object")),
    array: fc.array(tie("value"), { maxLength: 4 }),
    object: fc.dictionary(keyArb(fields), tie("value"), { maxKeys: 5 }),
  }));
  return value;
}

/** Every key path of a JSON value (objects and arrays alike), the root excluded. */
export function pathsOf(value: unknown, prefix: (string | number)[] = []): (string | number)[][] {
  if (typeof value !== "object" || value === null) return [];
  const entries: [string | number, unknown][] = Array.isArray(value) ? [...value.entries()] : Object.entries(value);
  return entries.flatMap(([k, v]) => [[...prefix, k], ...pathsOf(v, [...prefix, k])]);
}

/** Every field name used anywhere in a JSON value. */
export const fieldNamesOf = (value: unknown): string[] => [...new Set(pathsOf(value).flatMap((p) => p.filter((k): k is string => typeof k === "string")))];

type Edit = { path: (string | number)[]; op: "set" | "delete"; value: unknown };

function applyEdits(base: unknown, edits: Edit[]): unknown {
  const out = structuredClone(base) as Record<string | number, unknown>;
  for (const { path, op, value } of edits) {
    let node: unknown = out;
    for (const key of path.slice(0, -1)) node = typeof node === "object" && node !== null ? (node as Record<string | number, unknown>)[key] : undefined;
    if (typeof node !== "object" || node === null) continue;
    const last = path.at(-1)!;
    if (op === "delete") {
      if (Array.isArray(node) && typeof last === "number") node.splice(last, 1);
      else delete (node as Record<string | number, unknown>)[last];
    } else (node as Record<string | number, unknown>)[last] = value;
  }
  return out;
}

/**
 * A valid body with one to three of its fields replaced by hostile values or removed: requests that
 * pass most checks and fail (or not) at one place deep inside.
 */
export function editedBody(base: object): fc.Arbitrary<unknown> {
  const paths = pathsOf(base);
  const value = hostileJson(fieldNamesOf(base));
  const edit = fc.record({ path: fc.constantFrom(...paths), op: fc.constantFrom<"set" | "delete">("set", "set", "set", "delete"), value });
  return fc.array(edit, { minLength: 1, maxLength: 3 }).map((edits) => applyEdits(base, edits));
}

const deepText = (depth: number, open: string, close: string) => `${open.repeat(depth)}${close.repeat(depth)}`;

/** Bodies that are not the JSON they claim to be, or JSON at the edges of what parsers take. */
export function rawBodies(base: object): fc.Arbitrary<string> {
  const valid = JSON.stringify(base);
  return fc.oneof(
    fc.string({ maxLength: 200 }),
    fc.string({ unit: "binary", maxLength: 60 }),
    fc.nat({ max: valid.length }).map((n) => valid.slice(0, n)),
    fc.constantFrom("{", "}", "[", "null", "true", "0", '"x"', "[]", "{}", "{,}", "{\"a\":}", "\ufeff{}", "{} {}", "{\"a\":1,}", "NaN", "undefined"),
    // Numbers JSON.parse turns into Infinity, -0 or rounded floats.
    fc.constantFrom("1e999", "-1e999", "-0", "123456789012345678901234567890", "0.1e-400").map((n) => valid.replace(/(":)(\d+(\.\d+)?)/, `$1${n}`)),
    // The same key twice: the last one wins in JSON.parse.
    fc.constant(valid.replace(/^\{"(\w+)":/, `{"$1":{"x":1},"$1":`)),
    fc.integer({ min: 2, max: 3000 }).map((d) => deepText(d, "[", "]")),
    fc.integer({ min: 2, max: 3000 }).map((d) => `{"a":${deepText(d, '{"a":', "}").replace(/\{"a":\}/, "{}")}}`),
    fc.constant(`{"a":${deepText(150_000, "[", "]")}}`),
  );
}

/**
 * The valid body, whole, where it does not belong: in a list, as a JSON string, under another key,
 * inside one of its own fields. A body that carries secrets must not have them quoted back in a 422.
 */
export function misplacedBodies(base: object): fc.Arbitrary<unknown> {
  const fields = Object.keys(base);
  return fc.oneof(
    fc.constant([base]),
    fc.constant([[base], base]),
    fc.constant(JSON.stringify(base)),
    fc.constant({ body: base }),
    fields.length > 0 ? fc.constantFrom(...fields).map((field) => ({ ...base, [field]: base })) : fc.constant({ base }),
    fields.length > 0 ? fc.constantFrom(...fields).map((field) => ({ ...base, [field]: [JSON.stringify(base)] })) : fc.constant([]),
  );
}

/** Every kind of bad body for an endpoint whose valid body is `base`. */
export function hostileBodies(base: object): fc.Arbitrary<{ raw: string } | { json: unknown }> {
  return fc.oneof(
    { weight: 6, arbitrary: editedBody(base).map((json) => ({ json })) },
    { weight: 2, arbitrary: hostileJson(fieldNamesOf(base)).map((json) => ({ json })) },
    { weight: 1, arbitrary: misplacedBodies(base).map((json) => ({ json })) },
    { weight: 2, arbitrary: rawBodies(base).map((raw) => ({ raw })) },
  );
}

/**
 * encodeURIComponent that does not throw on unpaired surrogates: they are sent as the (invalid)
 * UTF-8 bytes a careless client would produce, for the server to refuse.
 */
export function encodeHostile(s: string): string {
  return s
    .split(/(\p{Cs})/u)
    .map((part) => {
      if (!/^\p{Cs}$/u.test(part)) return encodeURIComponent(part);
      const u = part.charCodeAt(0);
      const hex = (b: number) => `%${b.toString(16).toUpperCase().padStart(2, "0")}`;
      return hex(0xed) + hex(0xa0 | ((u >> 6) & 0x1f)) + hex(0x80 | (u & 0x3f));
    })
    .join("");
}

const encodings = ["encoded", "raw", "bare"] as const;

/** A query string from (name, value) pairs: encoded, raw, or a name without `=`; names may repeat. */
export function queryString(params: Record<string, fc.Arbitrary<string>>): fc.Arbitrary<string> {
  const names = Object.keys(params);
  const pair = fc.oneof(
    ...names.map((name) => fc.tuple(fc.constant(name), fc.oneof({ weight: 2, arbitrary: params[name]! }, { weight: 1, arbitrary: hostileString }))),
    fc.tuple(hostileString, hostileString),
  );
  const part = fc.tuple(pair, fc.constantFrom(...encodings)).map(([[k, v], how]) =>
    how === "encoded" ? `${encodeHostile(k)}=${encodeHostile(v)}` : how === "raw" ? `${k}=${v}`.replace(/[#\s]/g, "") : encodeHostile(k),
  );
  return fc.array(part, { minLength: 1, maxLength: 6 }).map((parts) => parts.join("&"));
}

/** A JSON body as text; JSON.stringify cannot fail on what these arbitraries make. */
export const bodyText = (body: { raw: string } | { json: unknown }) => ("raw" in body ? body.raw : JSON.stringify(body.json) ?? "");

/** Values allowed in an HTTP header (Latin-1, no control characters), hostile otherwise. */
export const headerValue: fc.Arbitrary<string> = fc.oneof(
  hostileString.map((s) => s.replace(/[^\x20-\x7e\xa0-\xff]/g, "").slice(0, 8000)),
  fc.string({ unit: fc.integer({ min: 0x20, max: 0xff }).map((c) => String.fromCharCode(c)), maxLength: 60 }),
);

/**
 * Watches the database across requests: after a refused request nothing may have been written.
 * Cheap checks come first. A transaction that writes gets a transaction id, so when the next id to
 * be assigned has not moved, nothing was written (on a PostgreSQL server shared with other test
 * files it always moves). Then a stamp of each table's row count and newest row version (see
 * writeStamps); only the tables whose stamp moved are checksummed again and compared, since a table
 * whose stamp did not move was not written: the other tables' checksums in the baseline still hold.
 * (Checksumming every table after every accepted request took most of the fuzzers' time, and grew
 * with every row they added.)
 */
export class DatabaseWatch {
  /** Row counts and checksums of every table: current but for the tables in allowedSinceBaseline. */
  private baseline!: Fingerprint;
  /** Tables allowed to change (by requests since) that the baseline's checksums no longer show. */
  private readonly allowedSinceBaseline = new Set<string>();
  private stamps: WriteStamps = {};
  private nextXid = "";

  constructor(private readonly sql: Sql) {}

  /** A watch of the database as it is now. */
  static async started(sql: Sql): Promise<DatabaseWatch> {
    const watch = new DatabaseWatch(sql);
    await watch.start();
    return watch;
  }

  async start(): Promise<void> {
    this.baseline = await fingerprint(this.sql);
    this.allowedSinceBaseline.clear();
    this.stamps = await writeStamps(this.sql);
    this.nextXid = await this.xid();
  }

  /**
   * After each request: refused ones must have changed no table (but `mayChange`: an Idempotency-Key
   * stores its refused answer, by design); an accepted one becomes the new baseline.
   */
  async check(refused: boolean, what: string, mayChange: readonly string[] = []): Promise<void> {
    const xid = await this.xid();
    if (xid === this.nextXid) return;
    this.nextXid = xid;
    const stamps = await writeStamps(this.sql);
    const moved = stampedTables(this.stamps, stamps);
    if (moved.length === 0) return;
    // Only tables that were allowed to change moved: no checksums needed (they are costly per request).
    if (refused && mayChange.length > 0 && moved.every((t) => mayChange.includes(t))) {
      for (const table of mayChange) this.allowedSinceBaseline.add(table);
      this.stamps = stamps;
      return;
    }
    // Checksums again for the tables written since the last check, and for those the baseline no
    // longer shows; every other table is as the baseline has it.
    const now = { ...this.baseline, ...(await fingerprint(this.sql, new Set([...moved, ...this.allowedSinceBaseline]))) };
    if (refused) {
      const changed = changedTables(this.baseline, now).filter((t) => !mayChange.includes(t) && !this.allowedSinceBaseline.has(t));
      expect(changed, `a refused request changed the database: ${what}`).toEqual([]);
    }
    this.baseline = now;
    this.allowedSinceBaseline.clear();
    this.stamps = stamps;
  }

  private async xid(): Promise<string> {
    const [row] = await this.sql.query<{ xid: string }>(`SELECT pg_snapshot_xmax(pg_current_snapshot())::text AS xid`);
    return row!.xid;
  }
}
