import { complexityFromQuery } from "@pothos/plugin-complexity";
import { type DocumentNode, getOperationAST, GraphQLError, type GraphQLSchema, Kind, type OperationDefinitionNode } from "graphql";
import type { Plugin } from "graphql-yoga";

/**
 * Rejects an operation whose cost exceeds the limit before any resolver runs. Runs after the
 * standard validation, on valid documents only, on the operation that will execute.
 */
export function useComplexityLimit(maxComplexity: number): Plugin {
  const costs = new OperationCosts();
  return {
    onValidate({ params, context }) {
      const request = (context as { params?: { variables?: Record<string, unknown>; operationName?: string | null } }).params;
      return ({ valid, setResult }) => {
        if (!valid) return;
        const complexity = costs.of(params.documentAST as DocumentNode, params.schema, request?.operationName ?? null, request?.variables ?? {});
        // null: bad variables or no such operation, which execution reports in its own words.
        if (complexity !== null && complexity > maxComplexity) {
          setResult([
            new GraphQLError(
              `Query is too costly: ${complexity} (limit ${maxComplexity}). Ask for fewer items (first/last) or fewer nested connections.`,
              { extensions: { code: "QUERY_TOO_COMPLEX", cost: complexity, limit: maxComplexity, http: { status: 400 } } },
            ),
          ]);
        }
      };
    },
  };
}

/**
 * An operation's cost depends only on its document, its name and its variables (the schema's
 * complexity options read arguments only): a dashboard asking for the same page again costs a
 * lookup, not a walk of its selection. Queries only (a mutation's variables may hold secrets, which
 * are not to be kept), by document (yoga's parse cache hands out one object per text, and drops it
 * with the text), then by name and the values of the variables the operation declares, a few sets
 * each. Clients choose those values: a set longer than MAX_COST_KEY_CHARS is costed and not kept (a
 * megabyte of variables sent with each request was kept, per document, sixteen times over).
 */
class OperationCosts {
  private readonly byDocument = new WeakMap<DocumentNode, Map<string, number | null>>();

  of(document: DocumentNode, schema: GraphQLSchema, name: string | null, variables: Record<string, unknown>): number | null {
    const operation = getOperationAST(document, name);
    const key = operation?.operation === "query" ? costKey(operation, name, variables) : null;
    if (key === null) return operationCost(document, schema, name, variables);
    let known = this.byDocument.get(document);
    if (!known) this.byDocument.set(document, (known = new Map()));
    let cost = known.get(key);
    if (cost === undefined) {
      cost = operationCost(document, schema, name, variables);
      if (known.size >= 16) known.clear();
      known.set(key, cost);
    }
    return cost;
  }
}

/** The longest key (name and declared variables' values, as JSON) an operation's cost is kept under. */
const MAX_COST_KEY_CHARS = 256;

/**
 * The operation's name and the values of the variables it declares (a value given, even null, is
 * [value]; one not given is [], which a default may stand for), or null when that is too long to keep.
 */
function costKey(operation: OperationDefinitionNode, name: string | null, variables: Record<string, unknown>): string | null {
  const values = (operation.variableDefinitions ?? []).map(({ variable }) => (Object.hasOwn(variables, variable.name.value) ? [variables[variable.name.value]] : []));
  const key = `${name ?? ""} ${JSON.stringify(values)}`;
  return key.length <= MAX_COST_KEY_CHARS ? key : null;
}

function operationCost(document: DocumentNode, schema: GraphQLSchema, name: string | null, variables: Record<string, unknown>): number | null {
  const operation: DocumentNode = {
    ...document,
    definitions: document.definitions.filter((d) => d.kind !== Kind.OPERATION_DEFINITION || !name || d.name?.value === name),
  };
  try {
    return complexityFromQuery(operation, { schema, ctx: {}, variables }).complexity;
  } catch {
    return null;
  }
}
