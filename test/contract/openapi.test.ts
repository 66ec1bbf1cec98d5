import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";

/**
 * Our OpenAPI document (the committed openapi.json, which test/rest/openapi.test.ts proves is what
 * /openapi.json serves) against the reference contract (openapi-reference.json beside this file):
 * what a client generated from the reference, or a script written against it, relies on is the
 * same for every operation both document.
 */

interface Parameter {
  name: string;
  in: string;
  required?: boolean;
  schema: Record<string, unknown>;
}
interface Operation {
  operationId?: string;
  tags?: string[];
  parameters?: Parameter[];
}
type Doc = { paths: Record<string, Record<string, Operation>> };

const read = (file: string) => JSON.parse(readFileSync(new URL(file, import.meta.url), "utf8")) as Doc;
const reference = read("./openapi-reference.json");
const ours = read("../../openapi.json");

const METHODS = new Set(["get", "put", "post", "delete", "patch", "options", "head"]);
/** Every operation both documents have, as [`METHOD path`, reference's, ours]. */
const shared: [string, Operation, Operation][] = Object.entries(reference.paths).flatMap(([path, ops]) =>
  Object.entries(ops).flatMap(([method, op]) => {
    const own = METHODS.has(method) ? ours.paths[path]?.[method] : undefined;
    return own ? [[`${method.toUpperCase()} ${path}`, op, own] as [string, Operation, Operation]] : [];
  }),
);

describe("openapi.json against the reference", () => {
  it("shares most of the reference's operations", () => {
    expect(shared.length).toBeGreaterThanOrEqual(40);
  });

  it("names each operation as the reference does (a generated client's method names), and tags it alike", () => {
    const problems: string[] = [];
    for (const [where, ref, own] of shared) {
      // One reference operation was taken from a docs page, its id annotated so: "create_deployment_revision (docs page, no schema published)".
      const id = ref.operationId?.replace(/ \(.*\)$/, "");
      if (own.operationId !== id) problems.push(`${where}: operationId ${own.operationId}, the reference ${id}`);
      if (ref.tags && JSON.stringify(own.tags) !== JSON.stringify(ref.tags)) problems.push(`${where}: tags ${JSON.stringify(own.tags)}, the reference ${JSON.stringify(ref.tags)}`);
    }
    expect(problems).toEqual([]);
  });

  it("names each operation once", () => {
    const ids = Object.values(ours.paths).flatMap((ops) => Object.values(ops).map((op) => op.operationId));
    expect(ids.every((id) => typeof id === "string" && /^[A-Za-z_][A-Za-z0-9_]*$/.test(id))).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it("documents each parameter the reference has, required where it is, typed as it is", () => {
    const problems: string[] = [];
    for (const [where, ref, own] of shared) {
      for (const p of ref.parameters ?? []) {
        const mine = own.parameters?.find((q) => q.name === p.name && q.in === p.in);
        if (!mine) {
          problems.push(`${where}: no ${p.in} parameter ${p.name}`);
          continue;
        }
        if (Boolean(mine.required) !== Boolean(p.required)) problems.push(`${where} ${p.name}: required ${mine.required}, the reference ${p.required}`);
        // A typed parameter (not the reference's loose `anyOf: [string, null]`) has the reference's type and bounds.
        if (p.schema.type === "integer" || p.schema.type === "boolean" || p.schema.type === "array") {
          for (const key of ["type", "minimum", "maximum", "default", "maxItems"]) {
            if (JSON.stringify(mine.schema[key]) !== JSON.stringify(p.schema[key])) problems.push(`${where} ${p.name}: ${key} ${JSON.stringify(mine.schema[key])}, the reference ${JSON.stringify(p.schema[key])}`);
          }
        }
      }
    }
    expect(problems).toEqual([]);
  });
});
