import type { Plugin } from "graphql-yoga";
import { CoreError } from "../core/errors.js";
import type { Core } from "../core/index.js";
import { unavailableAsCoreError } from "../core/prisma-errors.js";
import { toGraphQLError } from "./errors.js";
import type { ServerContext } from "./server.js";
import { credentialsFrom } from "../middleware/credentials.js";
import { Kind, type OperationDefinitionNode, parse } from "graphql";

/** At most this many tokens are parsed of a document sent without credentials. */
const ANONYMOUS_MAX_TOKENS = 2000;

/**
 * Whether a document's operation is a query whose every top-level field is __schema, __type or
 * __typename (GraphiQL's introspection query; its fragments only reach into those).
 */
export function isIntrospectionOnly(query: unknown, operationName: unknown): boolean {
  if (typeof query !== "string" || query.length > 20_000) return false;
  let document;
  try {
    document = parse(query, { maxTokens: ANONYMOUS_MAX_TOKENS, noLocation: true });
  } catch {
    return false;
  }
  const operations = document.definitions.filter((d): d is OperationDefinitionNode => d.kind === Kind.OPERATION_DEFINITION);
  const operation = typeof operationName === "string" ? operations.find((o) => o.name?.value === operationName) : operations.length === 1 ? operations[0] : undefined;
  if (!operation || operation.operation !== "query") return false;
  return operation.selectionSet.selections.every((s) => s.kind === Kind.FIELD && ["__schema", "__type", "__typename"].includes(s.name.value));
}

/**
 * Authenticates a GraphQL request over HTTP (GET, POST, SSE) before its document is parsed or
 * validated: once yoga has read the request's parameters, and before anything costs more than that.
 * Without valid credentials the answer is 401 (or 403), and the document is never looked at, let
 * alone kept in the parse cache. The tenant goes into the server context, where createContext finds
 * it (graphql-ws sets it there from the connection's params, once per connection).
 */
export function useAuthenticationFirst(core: Core, options: { anonymousIntrospection?: boolean } = {}): Plugin<Record<string, never>, ServerContext> {
  return {
    async onParams({ request, params, context, setResult }) {
      if (context.tenant) return;
      const credentials = credentialsFrom(request.headers);
      // GraphiQL loads the schema's docs before anyone has typed a key: a document that only
      // introspects (when introspection is on) is answered without one. It reads no data.
      if (options.anonymousIntrospection && !credentials.apiKey && !credentials.authorization && isIntrospectionOnly(params.query, params.operationName)) {
        context.introspectionOnly = true;
        return;
      }
      try {
        context.tenant = await core.auth.authenticate(credentials);
      } catch (err) {
        const refusal = unavailableAsCoreError(err);
        if (!(refusal instanceof CoreError)) throw err;
        setResult({ errors: [toGraphQLError(refusal)] });
      }
    },
  };
}
