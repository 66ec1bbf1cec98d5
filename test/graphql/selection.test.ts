import { type FieldNode, type FragmentDefinitionNode, Kind, parse, type OperationDefinitionNode } from "graphql";
import { describe, expect, it } from "vitest";
import { selectedNames, selectsAny } from "../../src/graphql/selection.js";

/** The resolve info of the document's first root field, as graphql-js or graphql-jit give it. */
function infoOf(document: string) {
  const ast = parse(document);
  const operation = ast.definitions.find((d): d is OperationDefinitionNode => d.kind === Kind.OPERATION_DEFINITION)!;
  const fragments = Object.fromEntries(
    ast.definitions.filter((d): d is FragmentDefinitionNode => d.kind === Kind.FRAGMENT_DEFINITION).map((f) => [f.name.value, f]),
  );
  return { fieldNodes: [operation.selectionSet.selections[0] as FieldNode], fragments };
}

const LATEST = new Set(["latestRevision", "sourceRevisionConfig"]);

describe("selectsAny", () => {
  it("finds a field below the path, under an alias, an inline fragment or a named fragment", () => {
    expect(selectsAny(infoOf(`{ deployments { edges { node { id latestRevision { id } } } } }`), ["edges", "node"], LATEST)).toBe(true);
    expect(selectsAny(infoOf(`{ deployments { edges { node { id src: sourceRevisionConfig { imageUri } } } } }`), ["edges", "node"], LATEST)).toBe(true);
    expect(selectsAny(infoOf(`{ deployments { edges { ... on DeploymentEdge { node { ... on Deployment { latestRevision { id } } } } } } }`), ["edges", "node"], LATEST)).toBe(true);
    expect(selectsAny(infoOf(`{ deployments { ...Page } } fragment Page on DeploymentConnection { edges { node { ...D } } } fragment D on Deployment { latestRevision { id } }`), ["edges", "node"], LATEST)).toBe(true);
  });

  it("is false when only other fields ask for it, or elsewhere than below the path", () => {
    expect(selectsAny(infoOf(`{ deployments { edges { node { id name } } } }`), ["edges", "node"], LATEST)).toBe(false);
    expect(selectsAny(infoOf(`{ deployments { edges { node { revisions { edges { node { sourceRevisionConfig { imageUri } } } } } } } }`), ["edges", "node"], LATEST)).toBe(false);
    expect(selectsAny(infoOf(`{ deployments { pageInfo { endCursor } } }`), ["edges", "node"], LATEST)).toBe(false);
  });
});

describe("selectedNames", () => {
  it("names the fields below the path, through aliases and fragments, merging every occurrence of the path", () => {
    const info = infoOf(`{ deployments {
      edges { node { a: latestRevision { uuid ...R } } }
      edges { node { latestRevision { ... on Revision { status } sourceRevisionConfig { imageUri } } } }
    } } fragment R on Revision { __typename id }`);
    expect(selectedNames(info, ["edges", "node", "latestRevision"])).toEqual(new Set(["uuid", "__typename", "id", "status", "sourceRevisionConfig"]));
    expect(selectedNames(info, ["edges", "node"])).toEqual(new Set(["latestRevision"]));
  });

  it("counts a field under @skip or @include as asked for, and is empty where the path is not selected", () => {
    expect(selectedNames(infoOf(`{ deployments { edges { node { id name @skip(if: true) } } } }`), ["edges", "node"])).toEqual(new Set(["id", "name"]));
    expect(selectedNames(infoOf(`{ deployments { pageInfo { endCursor } } }`), ["edges", "node"])).toEqual(new Set());
  });
});

describe("selectedNames, remembered", () => {
  it("answers the same field's nodes and path from memory, and other paths or nodes afresh", () => {
    const info = infoOf(`{ deployments { edges { node { id latestRevision { uuid } } } pageInfo { endCursor } } }`);
    const first = selectedNames(info, ["edges", "node"]);
    // A compiled document hands its resolvers the same nodes on every run: the same answer, not a new walk.
    expect(selectedNames({ ...info }, ["edges", "node"])).toBe(first);
    expect(selectedNames(info, ["edges", "node", "latestRevision"])).toEqual(new Set(["uuid"]));
    expect(selectedNames(info, [])).toEqual(new Set(["edges", "pageInfo"]));
    // The same text parsed again is other nodes, and is walked again.
    const again = selectedNames(infoOf(`{ deployments { edges { node { id latestRevision { uuid } } } pageInfo { endCursor } } }`), ["edges", "node"]);
    expect(again).not.toBe(first);
    expect(again).toEqual(first);
  });
});
