import { GraphQLError } from "graphql";
import { shouldRenderGraphiQL } from "graphql-yoga";
import { Hono } from "hono";
import type { ObservedEnv } from "../middleware/access-log.js";
import { describe, jsonObject } from "../rest/docs.js";
import { GRAPHQL_PATH } from "./http.js";
import { refusalAnswer } from "./refusal.js";
import { type AnswerSink, type GraphQLServer, wholeAnswer } from "./server.js";

/**
 * GET /graphql from a browser (Accept naming text/html) where GraphiQL is off: yoga answers 406 with
 * no body, which a person opening the URL cannot tell from a fault. Said as a GraphQL error, in JSON.
 */
const GRAPHIQL_OFF = new GraphQLError(
  "GraphiQL is not served in production (NODE_ENV=production). Send GraphQL requests here with Accept: application/graphql-response+json or application/json, or open GraphiQL on a server started without NODE_ENV=production.",
  { extensions: { code: "NOT_ACCEPTABLE", http: { status: 406 } } },
);

const graphqlAnswer = { description: "A GraphQL response ({data, errors}); an event stream for subscriptions asked with Accept: text/event-stream", schema: jsonObject };
/** The limits ahead of every route answer /graphql as GraphQL too (middleware/refusal.ts). */
const graphqlRefusal = (description: string, headers?: Record<string, string>) => ({ description: `A GraphQL response whose one error says: ${description}`, schema: jsonObject, ...(headers && { headers }) });

/**
 * /graphql over HTTP (GET, POST, and CORS preflights; 405 to other methods): yoga answers, its whole
 * answers sent as bytes (wholeAnswer). Described for the REST reference, which lists it with the
 * answers it may give.
 *
 * yoga's handleRequest, not its fetch: fetch rejects as soon as the request's signal aborts (the
 * client went away) and drops whatever yoga answers after that. An SSE subscription's answer holds
 * the subscription (its feed re-reading the object, bus subscriptions, a ping timer) until its body
 * is cancelled: dropped, it was never cancelled, and lived for ever. Here every answer reaches
 * @hono/node-server, which cancels a stream's body once the connection has closed, whether it closed
 * before the stream started or after; wholeAnswer makes that cancel reach yoga at once, not at the
 * stream's next keep-alive ping. A query or mutation whose client left runs to its end (nothing
 * cancels it, through either); its answer is written to the closed socket, which discards it, and
 * its access line tells yoga's status. Reading no signal also spares @hono/node-server an
 * AbortController per request.
 */
export function graphqlRoute(graphql: GraphQLServer, options: { graphiql: boolean }) {
  const route = new Hono<ObservedEnv>();
  route.on(
    ["GET", "POST", "OPTIONS"],
    GRAPHQL_PATH,
    describe(
      {
        tag: "GraphQL",
        summary: "The GraphQL API (GraphQL over HTTP; subscriptions over SSE here, or graphql-ws on the same path). In a browser, GET opens GraphiQL outside production (in production: 406, saying so).",
        responses: {
          200: graphqlAnswer,
          400: graphqlAnswer,
          401: graphqlAnswer,
          403: graphqlAnswer,
          405: graphqlAnswer,
          406: graphqlAnswer,
          413: graphqlRefusal("the body is larger than the limit (REQUEST_ENTITY_TOO_LARGE)."),
          415: graphqlAnswer,
          429: graphqlRefusal("too many requests, or failed authentications (RATE_LIMITED, with extensions.retryAfter).", { "Retry-After": "Seconds to wait before retrying." }),
          503: graphqlAnswer,
        },
      },
      async (c) => {
        // Where GraphiQL is off, what would open it (a browser's GET) is told why, not yoga's bare 406.
        if (!options.graphiql && shouldRenderGraphiQL(c.req.raw)) return refusalAnswer(c.req.raw, GRAPHIQL_OFF);
        const answerBytes: AnswerSink = { bytes: null };
        return wholeAnswer(await graphql.handleRequest(c.req.raw, { record: c.get("record"), answerBytes }), answerBytes);
      },
    ),
  );
  // Any other method (after those above, which answer theirs): 405 as GraphQL over HTTP has it, with
  // Allow, said as a GraphQL error, rather than REST's 404. Not an operation of the reference.
  route.all(GRAPHQL_PATH, (c) =>
    refusalAnswer(
      c.req.raw,
      new GraphQLError(`GraphQL is served over GET and POST, not ${c.req.method}.`, {
        extensions: { code: "METHOD_NOT_ALLOWED", http: { status: 405, headers: { Allow: "GET, POST" } } },
      }),
    ),
  );
  return route;
}
