import { GraphQLError } from "graphql";
import type { Plugin } from "graphql-yoga";

/** graphql-js's suggestions: ` Did you mean "viewer"?`, `… the enum value "READY"?`, `… "a", "b", or "c"?`. */
const SUGGESTION = /Did you mean [^?]*\?/g;
const HIDDEN = "[Suggestion hidden]";

/**
 * Keeps graphql-js's suggestions out of validation's errors, for production, where introspection is
 * off: a suggestion tells the schema all the same, a name at a time. graphql-armor's hides field
 * names only; enum values, input fields and arguments are suggested too. Variables' errors carry
 * them as well, and are told by execution or subscribe: the error masking (server.ts maskError,
 * which graphql-ws's subscriptions pass through too) hides those, costing a request without errors
 * nothing.
 */
export function useHiddenSuggestions(): Plugin {
  return {
    onValidate: () => ({ result, setResult }) => {
      if (result.some(suggests)) setResult(result.map(withoutSuggestion));
    },
  };
}

const suggests = (error: Error) => error instanceof GraphQLError && error.message.includes("Did you mean ");

/** A new error (those of validation are cached, and shared with development's tests of the same text). */
export function withoutSuggestion<E extends Error>(error: E): E | GraphQLError {
  if (!(error instanceof GraphQLError) || !suggests(error)) return error;
  return new GraphQLError(error.message.replace(SUGGESTION, HIDDEN), {
    nodes: error.nodes,
    source: error.source,
    positions: error.positions,
    path: error.path,
    originalError: error.originalError,
    extensions: error.extensions,
  });
}
