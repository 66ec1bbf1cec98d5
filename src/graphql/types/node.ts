import { invalid } from "../../core/errors.js";
import { builder } from "../builder.js";
import { loadNode } from "../nodes.js";

const MAX_NODES = 100;

builder.queryFields((t) => ({
  node: t.field({
    type: builder.nodeInterfaceRef(),
    nullable: true,
    description: "Any object by its global id; null when no object with that id is visible to the caller.",
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, { id }, ctx) => loadNode(ctx, id),
  }),
  nodes: t.field({
    type: [builder.nodeInterfaceRef()],
    nullable: { list: false, items: true },
    description: `Objects by global id (at most ${MAX_NODES}), in the order asked, with null where an id names nothing visible.`,
    args: { ids: t.arg.idList({ required: true }) },
    complexity: (args) => ({ field: 1, multiplier: Math.min(args.ids.length, MAX_NODES) }),
    resolve: (_root, { ids }, ctx) => {
      if (ids.length > MAX_NODES) {
        throw invalid([{ loc: ["query", "ids"], msg: `List should have at most ${MAX_NODES} items`, type: "too_long", ctx: { max_length: MAX_NODES } }]);
      }
      return ids.map((id) => loadNode(ctx, id));
    },
  }),
}));
