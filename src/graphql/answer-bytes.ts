/**
 * A GraphQL answer's JSON as bytes, written without ever holding it as one large string.
 *
 * JSON.stringify builds a large text as a rope of small parts; writing it to a socket (or measuring
 * its UTF-8 length for Content-Length) first flattens it into one string, and a string past V8's
 * large-object size (128 KB) is a fresh mapping of memory each time, paid for in page faults. A
 * dashboard page (100 deployments with their revisions, some 400 KB) spent more on that than on
 * stringifying. Here the long lists of an answer are stringified a run of elements at a time, each
 * run's text well under that size, and the pieces are encoded into one Buffer: the same text, byte
 * for byte, with no large string at all. (Runs rather than single elements: each JSON.stringify call
 * has a cost of its own, a quarter of a list page's stringifying when called per element.)
 */

/** Lists at least this long are written in runs of elements; shorter ones are pieces of their own. */
const LONG_LIST = 16;

/** About how many characters of JSON a run of elements is sized to (an eighth of the large-object size). */
const RUN_CHARS = 16_384;

const isPlainObject = (v: unknown): v is Record<string, unknown> => {
  if (typeof v !== "object" || v === null || Array.isArray(v)) return false;
  const proto = Object.getPrototypeOf(v) as unknown;
  return (proto === Object.prototype || proto === null) && typeof (v as { toJSON?: unknown }).toJSON !== "function";
};

/** Whether the value is, or holds outside the elements of another, a long list: only then is splitting it worth a walk. */
function holdsLongList(v: unknown): boolean {
  if (Array.isArray(v)) return v.length >= LONG_LIST || v.some(holdsLongList);
  return isPlainObject(v) && Object.values(v).some(holdsLongList);
}

/** JSON.stringify's text of one element of a list: null for what has none (undefined, a function, a symbol). */
const element = (v: unknown): string => JSON.stringify(v) ?? "null";

/**
 * A long list's text as pieces: its first element alone, then runs of elements, each sized from the
 * average length of the elements written so far so that its text comes near RUN_CHARS, and at most
 * twice as long as all before it (elements larger than the first few cannot make one run huge). A
 * run is stringified as a list and written without its brackets.
 */
function appendRuns(list: unknown[], out: string[]): void {
  const first = element(list[0]);
  out.push("[", first);
  let chars = first.length;
  for (let at = 1; at < list.length; ) {
    const size = Math.max(1, Math.min(2 * at, Math.floor((RUN_CHARS * at) / Math.max(chars, 1))));
    const run = JSON.stringify(list.slice(at, at + size));
    out.push(",", run.slice(1, -1));
    chars += run.length;
    at += size;
  }
  out.push("]");
}

/**
 * Appends the JSON text of `value` as pieces whose concatenation is JSON.stringify(value): plain
 * objects and lists are opened on the way to long lists, whose elements are stringified in runs;
 * everything else is JSON.stringify's own text. (An object with toJSON inside an opened object gets
 * "" rather than its key as toJSON's argument, and an element of a run its index in the run; the
 * answers' only such objects, errors and dates, ignore it.)
 */
function appendPieces(value: unknown, out: string[]): void {
  if (Array.isArray(value) && value.length >= LONG_LIST) {
    appendRuns(value, out);
  } else if (!holdsLongList(value)) {
    out.push(element(value));
  } else if (Array.isArray(value)) {
    out.push("[");
    value.forEach((v, i) => {
      if (i > 0) out.push(",");
      appendPieces(v, out);
    });
    out.push("]");
  } else {
    out.push("{");
    let first = true;
    for (const [key, v] of Object.entries(value as Record<string, unknown>)) {
      // As JSON.stringify skips a property without JSON text.
      if (v === undefined || typeof v === "function" || typeof v === "symbol") continue;
      out.push(`${first ? "" : ","}${JSON.stringify(key)}:`);
      first = false;
      appendPieces(v, out);
    }
    out.push("}");
  }
}

/** The pieces of JSON.stringify(value) (without replacer or indentation), in order. */
export function jsonPieces(value: unknown): string[] {
  const out: string[] = [];
  appendPieces(value, out);
  return out;
}

/** JSON.stringify(value) encoded as UTF-8, built from jsonPieces. */
export function jsonBytes(value: unknown): Buffer<ArrayBuffer> {
  const pieces = jsonPieces(value);
  let length = 0;
  for (const piece of pieces) length += Buffer.byteLength(piece);
  const bytes = Buffer.allocUnsafe(length);
  let at = 0;
  for (const piece of pieces) at += bytes.write(piece, at);
  return bytes;
}
