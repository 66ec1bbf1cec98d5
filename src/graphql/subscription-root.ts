import { type DocumentNode, type FragmentDefinitionNode, GraphQLError, Kind, type SelectionSetNode } from "graphql";
import type { Plugin } from "graphql-yoga";

const CONDITIONS = new Set(["skip", "include"]);

/**
 * The GraphQL specification's rule for a subscription's one root field (as graphql-js 17 checks it):
 * no @skip or @include at its top level, fragments included. graphql-js 16 does not check it, and
 * instead fails on such a document: a root field skipped breaks createSourceEventStream, and one
 * included by a variable makes its SingleFieldSubscriptionsRule throw during validation. Checked
 * here before the standard rules run; a document that breaks it is invalid, for that operation only.
 */
export function useUnconditionalSubscriptionRoots(): Plugin {
  return {
    onValidate({ params, setResult }) {
      const errors = conditionalSubscriptionRoots(params.documentAST);
      if (errors.length > 0) setResult(errors);
    },
  };
}

export function conditionalSubscriptionRoots(document: DocumentNode): GraphQLError[] {
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const d of document.definitions) if (d.kind === Kind.FRAGMENT_DEFINITION) fragments.set(d.name.value, d);
  const errors: GraphQLError[] = [];
  for (const d of document.definitions) {
    if (d.kind !== Kind.OPERATION_DEFINITION || d.operation !== "subscription") continue;
    const name = d.name?.value ?? "(anonymous)";
    if (hasCondition(d.selectionSet, fragments, new Set())) {
      errors.push(new GraphQLError(`Subscription "${name}" must not use @skip or @include directives in the top level selection.`, { nodes: d }));
    }
  }
  return errors;
}

/** Whether a top-level selection (through fragments, each followed once) carries @skip or @include. */
function hasCondition(set: SelectionSetNode, fragments: Map<string, FragmentDefinitionNode>, seen: Set<string>): boolean {
  for (const selection of set.selections) {
    if (selection.directives?.some((d) => CONDITIONS.has(d.name.value))) return true;
    if (selection.kind === Kind.INLINE_FRAGMENT && hasCondition(selection.selectionSet, fragments, seen)) return true;
    if (selection.kind === Kind.FRAGMENT_SPREAD && !seen.has(selection.name.value)) {
      seen.add(selection.name.value);
      const fragment = fragments.get(selection.name.value);
      if (fragment && hasCondition(fragment.selectionSet, fragments, seen)) return true;
    }
  }
  return false;
}
