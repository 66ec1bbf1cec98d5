/**
 * Readers for JSON the service did not just validate (stored configs and resource specs, a
 * project's langgraph.json, a JSONObject input): a value of the wrong shape reads as null rather than
 * breaking a response, since JSON columns are not typed by the database.
 */
export type Obj = Record<string, unknown>;

export const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

export const str = (o: Obj, k: string) => (typeof o[k] === "string" ? (o[k] as string) : null);
export const num = (o: Obj, k: string) => (typeof o[k] === "number" ? (o[k] as number) : null);
export const int = (o: Obj, k: string) => (typeof o[k] === "number" && Number.isInteger(o[k]) ? (o[k] as number) : null);
export const bool = (o: Obj, k: string) => (typeof o[k] === "boolean" ? (o[k] as boolean) : null);
export const obj = (o: Obj, k: string) => (isObj(o[k]) ? (o[k] as Obj) : null);
export const objs = (o: Obj, k: string) => (Array.isArray(o[k]) ? (o[k] as unknown[]).filter(isObj) : null);
export const strs = (o: Obj, k: string) =>
  Array.isArray(o[k]) ? (o[k] as unknown[]).filter((v): v is string => typeof v === "string") : null;

// For a value rather than a key, and stricter than the key readers above: an empty string is no
// text, a number must be finite, and what is not an object reads as an empty one.

/** The value if it is an object, else an empty one: its keys then read as absent. */
export const objectOf = (v: unknown): Obj => (isObj(v) ? v : {});
/** The value if it is a non-empty string. */
export const textOf = (v: unknown): string | undefined => (typeof v === "string" && v !== "" ? v : undefined);
/** The value if it is a finite number. */
export const numberOf = (v: unknown): number | undefined => (typeof v === "number" && Number.isFinite(v) ? v : undefined);
