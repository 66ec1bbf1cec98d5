import { parse } from "graphql";
import { isCompiledQuery } from "graphql-jit";
import { describe, expect, it } from "vitest";
import { LIST_QUERY, NESTED_QUERY } from "../../bench/lib/queries.js";
import { compileOperation } from "../../src/graphql/jit.js";
import { schema } from "../../src/graphql/types/index.js";

const compiles = (query: string) => isCompiledQuery(compileOperation({ schema, document: parse(query) }));

// Compiling is a speed-up only: a document graphql-jit declines runs on graphql-js, answering the same,
// so a regression here shows in no answer. These are the reads whose speed is measured (bench/).
describe("compileOperation", () => {
  it("compiles the benchmarks' reads and queries with enum literals, enum variables and interfaces", () => {
    expect(compiles(LIST_QUERY)).toBe(true);
    expect(compiles(NESTED_QUERY)).toBe(true);
    expect(compiles(`{ deployments(first: 2, filter: { deploymentType: DEV }) { edges { node { status sourceConfig { deploymentType } } } } }`)).toBe(true);
    expect(compiles(`query($s: [RevisionStatus!]) { deployments(first: 2) { edges { node { revisions(first: 1, status: $s) { totalCount } } } } }`)).toBe(true);
    expect(compiles(`query($ids: [ID!]!) { nodes(ids: $ids) { id ... on Deployment { uuid } } }`)).toBe(true);
  });

  it("compiles introspection against the service's own schema: enums stay enums", async () => {
    const compiled = compileOperation({ schema, document: parse(`{ __type(name: "RevisionStatus") { kind } }`) });
    if (!isCompiledQuery(compiled)) throw new Error("not compiled");
    expect(await compiled.query({}, {}, {})).toEqual({ data: { __type: { kind: "ENUM" } } });
  });
});
