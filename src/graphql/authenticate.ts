import type { Plugin } from "graphql-yoga";
import { CoreError } from "../core/errors.js";
import type { Core } from "../core/index.js";
import { unavailableAsCoreError } from "../core/prisma-errors.js";
import { toGraphQLError } from "./errors.js";
import type { ServerContext } from "./server.js";
import { credentialsFrom } from "../middleware/credentials.js";

/**
 * Authenticates a GraphQL request over HTTP (GET, POST, SSE) before its document is parsed or
 * validated: once yoga has read the request's parameters, and before anything costs more than that.
 * Without valid credentials the answer is 401 (or 403), and the document is never looked at, let
 * alone kept in the parse cache. The tenant goes into the server context, where createContext finds
 * it (graphql-ws sets it there from the connection's params, once per connection).
 */
export function useAuthenticationFirst(core: Core): Plugin<Record<string, never>, ServerContext> {
  return {
    async onParams({ request, context, setResult }) {
      if (context.tenant) return;
      try {
        context.tenant = await core.auth.authenticate(credentialsFrom(request.headers));
      } catch (err) {
        const refusal = unavailableAsCoreError(err);
        if (!(refusal instanceof CoreError)) throw err;
        setResult({ errors: [toGraphQLError(refusal)] });
      }
    },
  };
}
