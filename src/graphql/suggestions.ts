import { type ExecutionResult, GraphQLError } from "graphql";
import { isAsyncIterable, type Plugin } from "graphql-yoga";

/** graphql-js's suggestions: ` Did you mean "viewer"?`, `… the enum value "READY"?`, `… "a", "b", or "c"?`. */
const SUGGESTION = /Did you mean [^?]*\?/g;
const HIDDEN = "[Suggestion hidden]";

/**
 * Keeps graphql-js's suggestions out of every error, for production, where introspection is off: a
 * suggestion tells the schema all the same, a name at a time. graphql-armor's hides field names in
 * validation only; enum values, input fields and arguments are suggested too, and variables' errors
 * (told by execution, or by subscribe) carry them as well. graphql-ws subscribes outside the plugins
 * (ws.ts), and hides them with withoutSuggestion there.
 */
export function useHiddenSuggestions(): Plugin {
  return {
    onValidate: () => ({ result, setResult }) => {
      if (result.some(suggests)) setResult(result.map(withoutSuggestion));
    },
    onExecute: () => ({ onExecuteDone: ({ result, setResult }) => void (isAsyncIterable(result) || setResult(withoutSuggestions(result))) }),
    onSubscribe: () => ({ onSubscribeResult: ({ result, setResult }) => void (isAsyncIterable(result) || setResult(withoutSuggestions(result))) }),
  };
}

const suggests = (error: Error) => error instanceof GraphQLError && error.message.includes("Did you mean ");

export function withoutSuggestions(result: ExecutionResult): ExecutionResult {
  return result.errors?.some(suggests) ? { ...result, errors: result.errors.map(withoutSuggestion) } : result;
}

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
