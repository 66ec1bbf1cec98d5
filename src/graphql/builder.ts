import SchemaBuilder from "@pothos/core";
import ComplexityPlugin from "@pothos/plugin-complexity";
import RelayPlugin from "@pothos/plugin-relay";
import type { GraphQLContext } from "./context.js";

/**
 * The one schema builder: Relay (Node, connections) and complexity (cost sized by first/last).
 * Fields are non-null unless a field says otherwise; input fields are optional unless required.
 */
export const builder = new SchemaBuilder<{
  Context: GraphQLContext;
  DefaultFieldNullability: false;
  DefaultEdgesNullability: { list: false; items: false };
  DefaultNodeNullability: false;
  Scalars: {
    ID: { Input: string; Output: string };
    DateTime: { Input: Date; Output: Date };
    JSONObject: { Input: Record<string, unknown>; Output: Record<string, unknown> };
  };
  /** Every connection counts lazily: the count query runs only when totalCount is asked for. */
  Connection: { totalCount: () => Promise<number> };
}>({
  plugins: [RelayPlugin, ComplexityPlugin],
  defaultFieldNullability: false,
  relay: {
    clientMutationId: "omit",
    cursorType: "String",
    // node/nodes are defined in schema/node.ts: they return null (not an error) for ids that are
    // malformed, of an unknown type or not visible to the caller, and cap nodes at 100 ids.
    nodeQueryOptions: false,
    nodesQueryOptions: false,
    // The connection field multiplies by first/last already; edges must not multiply again.
    edgesFieldOptions: { nullable: { list: false, items: false }, complexity: { field: 0, multiplier: 1 } },
    // An edge's node is its `node` property. Pothos Relay gives the field a resolver that reads it;
    // marked as exposed (Pothos's own marker for t.expose) it gets none, and graphql-jit reads the
    // property where it made a call (with its resolve info and path) for every item of every page.
    nodeFieldOptions: { nullable: false, extensions: { pothosExposedField: "node" } },
  },
  complexity: {
    // Lists without a size argument (value lists, event logs) count as 10 items.
    defaultListMultiplier: 10,
  },
});

builder.queryType({});
builder.mutationType({});
builder.subscriptionType({});

builder.globalConnectionField("totalCount", (t) =>
  t.int({
    description: "How many items the whole connection holds, ignoring paging.",
    complexity: 2,
    resolve: (connection) => connection.totalCount(),
  }),
);

export type Types = typeof builder.$inferSchemaTypes;
