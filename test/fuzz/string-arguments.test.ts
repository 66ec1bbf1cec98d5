import { readFileSync } from "node:fs";
import { join } from "node:path";
import {
  buildSchema,
  getNamedType,
  getNullableType,
  type GraphQLArgument,
  type GraphQLField,
  type GraphQLInputType,
  type GraphQLObjectType,
  isEnumType,
  isInputObjectType,
  isLeafType,
  isListType,
  isNonNullType,
  isObjectType,
  isScalarType,
} from "graphql";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TestApp } from "../support/app.js";
import { DatabaseWatch } from "../support/fuzz.js";
import { type Fixtures, startFuzzApp } from "../support/fuzz-fixtures.js";
import { expectGraphQLAnswer } from "../support/fuzz-shapes.js";

/**
 * Every string (and ID) an operation of the printed schema takes, one at a time, as a value
 * PostgreSQL cannot hold (a NUL, an unpaired surrogate), the rest of the operation valid-looking
 * or absent: refused in the documented shape, never a 5xx or an unexpected error, nothing written.
 * The random fuzzers reach such a value in one argument after a hundred cases or more (GraphQL's
 * oauthTokens(providerId) answered a NUL with a 500 that way); this reaches each one every run.
 */

const schema = buildSchema(readFileSync(join(import.meta.dirname, "../../schema.graphql"), "utf8"));
const HOSTILE = ["\u0000", "x\ud800"];

let t: TestApp;
let fx: Fixtures;
let watch: DatabaseWatch;

beforeAll(async () => {
  ({ t, fx } = await startFuzzApp());
  watch = await DatabaseWatch.started(t.app.db.sql);
});
afterAll(() => t.close());

/** Where the string leaves of an argument's type are ("input.sourceConfig.repoUrl", "ids[]"). */
function stringLeaves(type: GraphQLInputType, path: string, depth = 0): string[] {
  const named = getNullableType(type);
  if (depth > 6) return [];
  if (isListType(named)) return stringLeaves(named.ofType, `${path}[]`, depth + 1);
  if (isScalarType(named)) return named.name === "String" || named.name === "ID" ? [path] : [];
  if (isInputObjectType(named)) return Object.values(named.getFields()).flatMap((f) => stringLeaves(f.type, `${path}.${f.name}`, depth + 1));
  return [];
}

/** A value of the type: `hostile` at `target`, `benign` in every other string; of input objects, only their required fields and the way to the target. */
function valueOf(type: GraphQLInputType, path: string, target: string, hostile: string, benign: string): unknown {
  const named = getNullableType(type);
  if (isListType(named)) return [valueOf(named.ofType, `${path}[]`, target, hostile, benign)];
  if (isEnumType(named)) return named.getValues()[0]!.name;
  if (isInputObjectType(named)) {
    const fields = Object.values(named.getFields()).filter((f) => isNonNullType(f.type) || target.startsWith(`${path}.${f.name}`));
    return Object.fromEntries(fields.map((f) => [f.name, valueOf(f.type, `${path}.${f.name}`, target, hostile, benign)]));
  }
  switch (named.name) {
    case "String":
    case "ID":
      return path === target ? hostile : benign;
    case "Int":
    case "Float":
      return 1;
    case "Boolean":
      return true;
    case "DateTime":
      return "2024-01-31T12:00:00Z";
    default:
      return {};
  }
}

function probes(root: GraphQLObjectType, kind: "query" | "mutation") {
  return Object.values(root.getFields()).flatMap((field: GraphQLField<unknown, unknown>) =>
    field.args.flatMap((arg) => stringLeaves(arg.type, arg.name).map((target) => ({ kind, field, arg, target }))),
  );
}

function selectionOf(field: GraphQLField<unknown, unknown>): string {
  const type = getNamedType(field.type);
  if (isLeafType(type)) return "";
  return isObjectType(type) && type.getFields().userErrors ? "{ userErrors { field message code } }" : "{ __typename }";
}

async function probe(kind: "query" | "mutation", field: GraphQLField<unknown, unknown>, arg: GraphQLArgument, target: string, hostile: string, benign: string) {
  const args = field.args.filter((a) => a === arg || isNonNullType(a.type));
  const document = `${kind}(${args.map((a, i) => `$a${i}: ${a.type}`).join(", ")}) { ${field.name}(${args.map((a, i) => `${a.name}: $a${i}`).join(", ")}) ${selectionOf(field)} }`;
  const variables = Object.fromEntries(args.map((a, i) => [`a${i}`, valueOf(a.type, a.name, a === arg ? target : "", hostile, benign)]));
  const res = await t.request("POST", "/graphql", { key: fx.ws.apiKey, body: { query: document, variables } });
  const where = `${field.name} ${target}=${JSON.stringify(hostile)} (others ${JSON.stringify(benign)}) -> ${res.status} ${res.text.slice(0, 300)}`;
  const refused = expectGraphQLAnswer(res, kind === "mutation" ? [field.name] : []);
  if (kind === "mutation") expect(refused, where).toBe(true);
  await watch.check(refused, where);
}

describe("a value PostgreSQL cannot hold in each string argument, one at a time", () => {
  const all = [...probes(schema.getQueryType()!, "query"), ...probes(schema.getMutationType()!, "mutation")];

  it("covers the schema's string arguments", () => {
    expect(all.length).toBeGreaterThan(100);
    expect(all.map((p) => `${p.field.name} ${p.target}`)).toContain("oauthTokens providerId");
  });

  for (const kind of ["query", "mutation"] as const) {
    it(`${kind} fields: refused in the documented shape, nothing written`, async () => {
      // Besides plain text, the other strings name things that exist, so that the probe gets past their lookups.
      const benigns = ["x", fx.deploymentId, fx.providerId];
      for (const { field, arg, target } of all.filter((p) => p.kind === kind)) {
        for (const hostile of HOSTILE) for (const benign of benigns) await probe(kind, field, arg, target, hostile, benign);
      }
    }, 120_000);
  }
});
