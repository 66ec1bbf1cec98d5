import { GraphQLError } from "graphql";
import { handleStreamOrSingleExecutionResult, type Plugin } from "graphql-yoga";

/** graphql-js's words when a variable's value cannot be coerced: `Variable "$input" got invalid value <value>[ at "<path>"]; <reason>`. */
const INVALID_VARIABLE = /^Variable "\$([^"]+)" got invalid value /;

/** Whether a JSON value holds a `secrets` field anywhere. */
function carriesSecrets(value: unknown): boolean {
  const stack = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v !== "object" || v === null) continue;
    if (!Array.isArray(v) && "secrets" in v) return true;
    stack.push(...(Array.isArray(v) ? v : Object.values(v)));
  }
  return false;
}

/**
 * The error without the value graphql-js quoted: the variable, where in it, and why, but not what.
 * The reason loses what follows its first ": " (a scalar's "cannot represent ...: <value>").
 */
function redacted(error: GraphQLError, name: string): GraphQLError {
  const reason = error.originalError?.message ?? "";
  const head = reason && error.message.endsWith(`; ${reason}`) ? error.message.slice(0, -(reason.length + 2)) : error.message;
  const at = head.lastIndexOf(` at "${name}`);
  const where = at >= 0 && head.endsWith('"') ? head.slice(at) : "";
  const why = reason.split(": ")[0] || "invalid value";
  return new GraphQLError(`Variable "$${name}" got an invalid value${where}; ${why}`, {
    nodes: error.nodes,
    // A user's mistake, told as such (and so not logged as an unexpected error when masked).
    extensions: { ...error.extensions, code: "BAD_USER_INPUT" },
  });
}

/**
 * graphql-js quotes a variable's value when it cannot coerce it (a missing field, an unknown one, a
 * wrong type), and a deployment input quotes its secrets with it: into the response and into the
 * error log. Errors about a variable that carries secrets are told without the value.
 */
export function useRedactedSecretVariables(): Plugin {
  return {
    onExecute({ args }) {
      const variables = (args.variableValues ?? {}) as Record<string, unknown>;
      return {
        onExecuteDone: (payload) =>
          handleStreamOrSingleExecutionResult(payload, ({ result, setResult }) => {
            if (!result.errors?.length) return;
            let changed = false;
            const errors = result.errors.map((error) => {
              const name = INVALID_VARIABLE.exec(error.message)?.[1];
              if (!name || !carriesSecrets(variables[name])) return error;
              changed = true;
              return redacted(error, name);
            });
            if (changed) setResult({ ...result, errors });
          }),
      };
    },
  };
}
