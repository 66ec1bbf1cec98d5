/**
 * Instants between PostgreSQL's text, JavaScript's Date and ISO 8601, fast on the hot reads. A page
 * of 100 deployments with their revisions carries some 1,400 timestamps: postgres-date's regular
 * expressions (about 0.7 µs a timestamp) and Date#toISOString (about 1 µs on Node 20) were a tenth
 * of the GraphQL dashboard page's CPU. Each function below handles the common form with arithmetic,
 * four to five times faster, and hands anything else to the general code, so that it answers
 * exactly what the general code answers (test/time.test.ts checks both against it).
 */

const ZERO = 48;

/** The number written by the `length` ASCII digits at `at`, or -1 if one of them is not a digit. */
function digits(text: string, at: number, length: number): number {
  let value = 0;
  for (let i = at; i < at + length; i++) {
    const d = text.charCodeAt(i) - ZERO;
    if (d < 0 || d > 9) return -1;
    value = value * 10 + d;
  }
  return value;
}

/**
 * A timestamptz as PostgreSQL writes it in its ISO DateStyle, `2026-11-26 11:58:42.211456+00`
 * (fraction optional, 1 to 6 digits; offset `±HH` or `±HH:MM` after the session's TimeZone), with
 * the precision of a Date (the microseconds are dropped, as postgres-date drops them). Other forms
 * (years of five digits, BC, infinity, offsets with seconds) go to `general`.
 */
export function parseTimestamptz(text: string, general: (text: string) => Date): Date {
  const n = text.length;
  if (n < 22 || text[4] !== "-" || text[7] !== "-" || text[10] !== " " || text[13] !== ":" || text[16] !== ":") return general(text);
  const year = digits(text, 0, 4);
  const month = digits(text, 5, 2);
  const day = digits(text, 8, 2);
  const hour = digits(text, 11, 2);
  const minute = digits(text, 14, 2);
  const second = digits(text, 17, 2);
  let at = 19;
  let ms = 0;
  if (text[at] === ".") {
    const start = ++at;
    while (at < n && at - start < 6 && text.charCodeAt(at) >= ZERO && text.charCodeAt(at) <= ZERO + 9) at++;
    if (at === start) return general(text);
    // The first three digits are the milliseconds: ".2" is 200, ".211456" is 211.
    ms = Number(`${text.slice(start, Math.min(at, start + 3))}00`.slice(0, 3));
  }
  const sign = text[at] === "+" ? 1 : text[at] === "-" ? -1 : 0;
  const offsetHours = digits(text, at + 1, 2);
  let offsetMinutes = 0;
  if (n === at + 6 && text[at + 3] === ":") offsetMinutes = digits(text, at + 4, 2);
  else if (n !== at + 3) return general(text);
  if (sign === 0 || year < 1000 || month < 1 || day < 1 || hour < 0 || minute < 0 || second < 0 || offsetHours < 0 || offsetMinutes < 0) {
    return general(text);
  }
  const utc = Date.UTC(year, month - 1, day, hour, minute, second, ms);
  return new Date(utc - sign * (offsetHours * 60 + offsetMinutes) * 60_000);
}

const DAY_MS = 86_400_000;
/** 0001-01-01 and 10000-01-01: toISOString writes years outside these with six digits and a sign. */
const FIRST_MS = -62_135_596_800_000;
const END_MS = 253_402_300_800_000;
/** "2026-11-26T" by day number; a page's timestamps fall on a few days. */
const dayPrefixes = new Map<number, string>();

const two = (n: number) => (n < 10 ? `0${n}` : `${n}`);
const three = (n: number) => (n < 10 ? `00${n}` : n < 100 ? `0${n}` : `${n}`);

/** `date.toISOString()`, the same text, without its cost. An invalid Date throws as toISOString does. */
export function isoString(date: Date): string {
  const t = date.getTime();
  if (!(t >= FIRST_MS && t < END_MS)) return date.toISOString();
  const day = Math.floor(t / DAY_MS);
  let prefix = dayPrefixes.get(day);
  if (prefix === undefined) {
    if (dayPrefixes.size >= 4096) dayPrefixes.clear();
    prefix = date.toISOString().slice(0, 11);
    dayPrefixes.set(day, prefix);
  }
  let rest = t - day * DAY_MS;
  const ms = rest % 1000;
  rest = (rest - ms) / 1000;
  const second = rest % 60;
  rest = (rest - second) / 60;
  const minute = rest % 60;
  return `${prefix}${two((rest - minute) / 60)}:${two(minute)}:${two(second)}.${three(ms)}Z`;
}

/**
 * 0001-01-01T00:00:00Z, the first instant an input may name: PostgreSQL numbers years without a
 * year 0 (1 BC comes before 1 AD), so an instant that ISO 8601 puts in year 0 or before cannot be
 * sent to it as ISO text, and no stored timestamp is that old anyway.
 */
export const EARLIEST_INSTANT_MS = -62_135_596_800_000;
