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
