import { Readable } from "node:stream";
import { EnvelopArmorPlugin } from "@escape.tech/graphql-armor";
import { useCSRFPrevention } from "@graphql-yoga/plugin-csrf-prevention";
import { GraphQLError, NoSchemaIntrospectionCustomRule, type ValidationContext, type ValidationRule } from "graphql";
import { createYoga, type Plugin, processRegularResult, type YogaServerInstance } from "graphql-yoga";
import type { Tenant } from "../core/auth.js";
import type { Core } from "../core/index.js";
import type { Logger } from "../logger.js";
import { utf8Text } from "../core/validation.js";
import { createContext, type GraphQLContext } from "./context.js";
import { maskError, MASKED_ERROR_MESSAGE, yogaLogger } from "./masking.js";
import { useRedactedSecrets } from "./redact.js";
import { schema } from "./types/index.js";
import { useCompiledQueries } from "./jit.js";
import { useComplexityLimit } from "./complexity-limit.js";
import { useNestingLimit } from "./nesting-limit.js";
import { useHiddenSuggestions } from "./suggestions.js";
import { useUnconditionalSubscriptionRoots } from "./subscription-root.js";
import { jsonBytes } from "./answer-bytes.js";
import { useAuthenticationFirst } from "./authenticate.js";
import { useEndedOnRevocation } from "./revoked-streams.js";
import { GRAPHQL_CORS, GRAPHQL_PATH } from "./http.js";
import { createParseCache, registerParseCache } from "./parse-cache.js";
import { refusalAnswer } from "./refusal.js";
import { subscribeShared } from "./shared-execution.js";
import { useObservedOperations } from "./observe.js";
import { graphiqlOptions, renderOfflineGraphiQL } from "./graphiql.js";
import type { Metrics, RequestRecord } from "../middleware/metrics.js";

export { GRAPHQL_PATH } from "./http.js";

export interface GraphQLOptions {
  /** Production hides internal error details and field suggestions. */
  production: boolean;
  /** Whether clients may introspect the schema (on by default outside production). */
  introspection: boolean;
  /** The GraphiQL IDE on GET /graphql from a browser (development). */
  graphiql: boolean;
  /** Operations counted by name, type and outcome; SSE subscriptions counted open. */
  metrics?: Metrics | null;
}

/** What the server passes in besides the request: the tenant of an authenticated WebSocket. */
export interface ServerContext {
  tenant?: Tenant;
  /** The HTTP request's access-log record: the operation's name and the caller go in it. */
  record?: RequestRecord;
  /** Set for a request without credentials whose document only introspects the schema. */
  introspectionOnly?: boolean;
  /** Set by the /graphql route: where a whole answer's body is written as bytes. */
  answerBytes?: AnswerSink;
}

/** The context of an anonymous introspection: a workspace that matches nothing, for a document that reads no data. */
const NO_TENANT: Tenant = { organizationId: "00000000-0000-0000-0000-000000000000", workspaceId: "00000000-0000-0000-0000-000000000000", actor: "anonymous:introspection" };

export type GraphQLServer = YogaServerInstance<ServerContext, GraphQLContext>;

/**
 * Sized for Relay dashboards: a page of 100 deployments, each with its latest revision, listener and
 * first 5 revisions, fits comfortably; a page of 100 × 100 revisions with their event logs does not.
 */
export const LIMITS = { depth: 15, aliases: 30, tokens: 5000, directives: 50, complexity: 25_000, nesting: 128 };

/**
 * Armor's rules throw by default, which yoga would treat as a crash; reported instead, they are
 * validation errors like any other (400, GRAPHQL_VALIDATION_FAILED), and said as such: the armor
 * words them as syntax errors ("Syntax Error: Query depth limit…") of a document that parsed.
 */
const asValidationError = {
  propagateOnRejection: false,
  onReject: [
    (ctx: ValidationContext | null, error: GraphQLError) =>
      ctx?.reportError(new GraphQLError(error.message.replace(/^Syntax Error: /, ""), { nodes: error.nodes, extensions: error.extensions })),
  ],
};

/** graphql-yoga over the schema: HTTP (GET/POST), SSE subscriptions, and the executor graphql-ws uses. */
export function createGraphQLServer(core: Core, logger: Logger, options: GraphQLOptions): GraphQLServer {
  const parseCache = createParseCache();
  const yoga = createYoga<ServerContext, GraphQLContext>({
    schema,
    graphqlEndpoint: GRAPHQL_PATH,
    graphiql: options.graphiql ? graphiqlOptions : false,
    renderGraphiQL: renderOfflineGraphiQL,
    landingPage: false,
    // No file uploads: multipart is also the classic CSRF carrier.
    multipart: false,
    // The app's body limit (middleware/limits.ts) runs ahead of the route, in the same words as on
    // REST; yoga's would pipe every POST body through a web TransformStream into a second Request.
    maxRequestBodySize: false,
    cors: GRAPHQL_CORS,
    logging: yogaLogger(logger, options.production),
    maskedErrors: { errorMessage: MASKED_ERROR_MESSAGE, maskError: (error, message) => maskError(error, message, !options.production) },
    // Bounded by bytes: see parse-cache.ts.
    parserAndValidationCache: { documentCache: parseCache.documents, errorCache: parseCache.errors, validationCache: true },
    // The tenant is settled before the document is parsed: useAuthenticationFirst over HTTP, onConnect over graphql-ws.
    context: ({ tenant, introspectionOnly, request }) => {
      // An introspection-only document without credentials (GraphiQL loading its docs): no resolver of ours runs.
      if (!tenant && introspectionOnly) return createContext(core, NO_TENANT, null);
      if (!tenant) throw new GraphQLError("Not authenticated.", { extensions: { code: "UNAUTHENTICATED", http: { status: 401 } } });
      // The request's origin: where OAuth providers send a browser back when PUBLIC_URL is unset
      // (graphql-ws operations have no request of their own).
      return createContext(core, tenant, request ? new URL(request.url).origin : null);
    },
    plugins: [
      useJsonParameters(),
      useUtf8Bodies(),
      useUnsupportedTypeSaid(),
      useAuthenticationFirst(core, { anonymousIntrospection: options.introspection }),
      // An SSE stream ends when the key that started it is revoked (graphql-ws closes the socket: ws.ts).
      useEndedOnRevocation(core),
      // Before error masking, which logs the errors it rewrites: neither the answer nor the log quotes a secret.
      useRedactedSecrets(),
      // A browser sends a "simple" request cross-site without a preflight; demanding one of these
      // headers (which our clients send anyway) makes every request one a page elsewhere can only
      // send after a preflight, and never with a browser's ambient credentials.
      useCSRFPrevention({ requestHeaders: ["x-api-key", "authorization", "x-graphql-yoga-csrf", "apollo-require-preflight"] }),
      EnvelopArmorPlugin({
        maxDepth: { n: LIMITS.depth, ignoreIntrospection: true, ...asValidationError },
        maxAliases: { n: LIMITS.aliases, ...asValidationError },
        maxTokens: { n: LIMITS.tokens },
        maxDirectives: { n: LIMITS.directives, ...asValidationError },
        // Cost is Pothos's complexity below: it knows that first: 100 means a hundred items.
        costLimit: { enabled: false },
        // useHiddenSuggestions hides these and more.
        blockFieldSuggestion: { enabled: false },
      }),
      // After the armor, whose token-counting parser it guards: that parser is recursive.
      useNestingLimit(LIMITS.nesting, LIMITS.tokens),
      // Before the standard rules, one of which throws on what this refuses.
      useUnconditionalSubscriptionRoots(),
      useComplexityLimit(LIMITS.complexity),
      useCompiledQueries(),
      useObservedOperations(options.metrics ?? null),
      // Before useAnswerBytes, which then writes its refusal like any whole answer.
      useUnstreamedSubscriptionsEnded(),
      useAnswerBytes(),
      // Over SSE too, subscribers of one change asking the same share one execution of it.
      { onSubscribe: ({ setSubscribeFn }) => setSubscribeFn(subscribeShared) } satisfies Plugin,
      ...(options.introspection ? [useSchemaIntrospectedOnce()] : [useNoIntrospection()]),
      ...(options.production ? [useHiddenSuggestions()] : []),
    ],
  });
  registerParseCache(yoga, parseCache);
  return yoga;
}

/**
 * `variables` and `extensions` of a GET's query string (or a form's body) that are not JSON: a bad
 * request (400 BAD_REQUEST), as a POST body that is not JSON is in yoga. yoga parses them without a
 * guard, so its SyntaxError would otherwise be an unexpected error, logged with its stack, before
 * anyone has authenticated. A JSON body's parser is left as it is (it answers so itself).
 */
function useJsonParameters(): Plugin {
  return {
    onRequestParse({ request, requestParser, setRequestParser }) {
      if (!requestParser || (request.method === "POST" && !/^application\/x-www-form-urlencoded\b/i.test(request.headers.get("content-type") ?? ""))) return;
      setRequestParser(async (req) => {
        try {
          return await requestParser(req);
        } catch (err) {
          if (!(err instanceof SyntaxError)) throw err;
          throw new GraphQLError("The variables or extensions parameter is not valid JSON.", {
            extensions: { code: "BAD_REQUEST", http: { status: 400 } },
          });
        }
      });
    },
  };
}

const UNSUPPORTED_TYPE = new GraphQLError(
  "A GraphQL request over POST is sent as application/json (or application/graphql+json, application/graphql with the document alone, or a form: application/x-www-form-urlencoded).",
  { extensions: { code: "BAD_REQUEST", http: { status: 415 } } },
);

/**
 * A POST whose body is of a type no request parser reads (text/plain, multipart: uploads are off):
 * yoga answers 415 with no body; said here as a GraphQL error, in the media type Accept asks for.
 */
function useUnsupportedTypeSaid(): Plugin {
  return {
    onRequestParse({ request, requestParser, endResponse }) {
      // Nothing to wait for on the way of every other request.
      if (!requestParser) return refusalAnswer(request, UNSUPPORTED_TYPE).then(endResponse);
    },
  };
}

/** What yoga's parsers of a POST body (JSON, a document alone, a form) read of its request. */
type ReadBody = Pick<Request, "url" | "method" | "headers" | "text" | "json">;

/**
 * A POST body that is not UTF-8 is a bad request (400 BAD_REQUEST), as on REST (core's utf8Text):
 * yoga decodes bodies leniently, and a mutation stored its input altered. The body is read as bytes,
 * checked, and handed to yoga's own parser as the text it is, as a request whose body reads give
 * that text: a web Request made anew (a copy of the headers and a body stream read through again)
 * cost every GraphQL POST some 0.03 ms (bench/README.md). Multipart bodies may carry binary parts
 * and keep yoga's parser as it is.
 */
function useUtf8Bodies(): Plugin {
  return {
    onRequestParse({ request, requestParser, setRequestParser }) {
      if (!requestParser || request.method !== "POST" || /^multipart\//i.test(request.headers.get("content-type") ?? "")) return;
      setRequestParser(async (req) => {
        const text = utf8Text(await req.arrayBuffer());
        if (text === null) throw new GraphQLError("The body is not valid UTF-8.", { extensions: { code: "BAD_REQUEST", http: { status: 400 } } });
        const read: ReadBody = { url: req.url, method: req.method, headers: req.headers, text: async () => text, json: async () => JSON.parse(text) };
        return requestParser(read as Request);
      });
    },
  };
}

/** Why a subscription asked for over HTTP with no event stream in its Accept is refused. */
const NOT_STREAMED = new GraphQLError(
  "A subscription over HTTP is answered as an event stream: send it with Accept: text/event-stream, or subscribe over graphql-ws on this path.",
  { extensions: { code: "NOT_ACCEPTABLE", http: { status: 406 } } },
);

/**
 * A subscription asked for over HTTP with an Accept that names no stream yoga answers with
 * (application/json, multipart/mixed): yoga finds no processor for it and answers 406 with an empty
 * body, after the subscription has started, and nothing ever ended it: it held its feed and a place
 * of its caller's SUBSCRIPTIONS_PER_CALLER for the process's life. It is ended here, and the 406
 * says why, as a GraphQL error.
 */
function useUnstreamedSubscriptionsEnded(): Plugin {
  return {
    onResultProcess({ result, resultProcessor, setResult, setResultProcessor }) {
      if (resultProcessor || !(Symbol.asyncIterator in result)) return;
      result[Symbol.asyncIterator]()
        .return?.()
        ?.catch(() => undefined);
      setResult({ errors: [NOT_STREAMED] });
      setResultProcessor(processRegularResult, "application/json");
    },
  };
}

/** Where the /graphql route takes a whole answer's body, as UTF-8 bytes (see useAnswerBytes). */
export interface AnswerSink {
  bytes: Buffer<ArrayBuffer> | null;
}

/**
 * A whole answer (a result of yoga's regular processor, which still chooses its media type, status
 * and headers) is written as bytes into the request's sink, without becoming one large string first
 * (answer-bytes.ts says why); yoga's own body is then left empty, and wholeAnswer sends the bytes.
 * Without a sink (yoga called other than through the route), or for streams, nothing changes.
 */
function useAnswerBytes(): Plugin<Record<string, unknown>, ServerContext> {
  return {
    onResultProcess({ result, setResult, resultProcessor, serverContext }) {
      const sink = serverContext.answerBytes;
      if (!sink || resultProcessor !== processRegularResult || Array.isArray(result) || Symbol.asyncIterator in result) return;
      setResult({
        ...result,
        stringify: (answer: unknown) => {
          sink.bytes = jsonBytes(answer);
          return "";
        },
      });
    },
  };
}

/** A whole GraphQL answer (yoga's regular result), as opposed to a stream (SSE, multipart). */
const WHOLE_ANSWER = /^application\/(graphql-response\+)?json\b/;

/**
 * The response the route sends for yoga's answer. yoga answers with its fetch ponyfill's Response,
 * which @hono/node-server can only copy to the socket as a stream: a reader, a Buffer per chunk,
 * chunked encoding. A whole answer goes as the platform's own Response around its bytes (from the
 * sink) or its text, which the server writes at once with its length, as it writes REST's answers.
 * Streams go with a body whose cancel reaches yoga at once (cancelledAtOnce).
 */
export async function wholeAnswer(answer: Response, sink: AnswerSink): Promise<Response> {
  if (!sink.bytes && !WHOLE_ANSWER.test(answer.headers.get("content-type") ?? "")) return cancelledAtOnce(answer);
  const body = sink.bytes ?? (await answer.text());
  return new Response(body, { status: answer.status, statusText: answer.statusText, headers: new Headers(answer.headers) });
}

/** A stream of yoga's fetch ponyfill (@whatwg-node/node-fetch): a web stream's face over a Node Readable. */
interface NodeBackedStream {
  readonly readable: Readable;
  getReader(): ReadableStreamDefaultReader<Uint8Array>;
  cancel(): Promise<unknown>;
}

const isNodeBacked = (body: unknown): body is NodeBackedStream =>
  typeof body === "object" && body !== null && (body as { readable?: unknown }).readable instanceof Readable;

/**
 * A streamed answer (an SSE subscription) whose end reaches yoga as soon as the client has gone.
 * @hono/node-server cancels the body's reader once the connection closes; the ponyfill's reader
 * cancels by returning its Readable's async iterator, and that return() waits for the read pending
 * on it, which for a subscription with nothing to send is answered by the next keep-alive ping, 12 s
 * later: until then the subscription held its feed and its caller's place (SUBSCRIPTIONS_PER_CALLER).
 * The ponyfill stream's own cancel() destroys the Readable at once, which ends the subscription now.
 * Read as before, a chunk at a time as the socket asks for one (highWaterMark 0): a client that stops
 * reading still backs up into its subscription's channel (core/feeds.ts), not into this stream.
 */
function cancelledAtOnce(answer: Response): Response {
  const body: unknown = answer.body;
  if (!isNodeBacked(body)) return answer;
  const reader = body.getReader();
  // Read at once, as @hono/node-server reads the ponyfill's own answers: yoga's stream takes the
  // subscription's iterator when it starts, at its first read, and only then can its cancel return
  // it. A client gone before the answer was sent has the body cancelled unread.
  let first: Promise<ReadableStreamReadResult<Uint8Array>> | null = reader.read();
  // Cancelled before it is taken, its rejection (the Readable destroyed) is no one's to handle.
  first.catch(() => undefined);
  const stream = new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        const read = first ?? reader.read();
        first = null;
        const { done, value } = await read;
        if (done) controller.close();
        else controller.enqueue(value);
      },
      // Without the reason: a destroy with an error would emit it on the Readable as well.
      cancel: () => body.cancel().then(() => undefined),
    },
    { highWaterMark: 0 },
  );
  return new Response(stream, { status: answer.status, statusText: answer.statusText, headers: new Headers(answer.headers) });
}

/**
 * A document asks for __schema once. Each __schema field answers a whole copy of the schema (some
 * 140 KB with its fields), which no cost limit counts (introspection has no Pothos complexity), and
 * without a key where introspection is open: 30 aliases of it, as many as aliases may be, made a
 * 1 KB document cost 0.4 s of CPU and 4 MB of answer. A client has no use for a second copy.
 */
function useSchemaIntrospectedOnce(): Plugin {
  const rule: ValidationRule = (context) => {
    let seen = 0;
    return {
      Field(node) {
        if (node.name.value === "__schema" && ++seen === 2) {
          context.reportError(new GraphQLError("The schema is asked for more than once (__schema): ask for it once a document.", { nodes: node }));
        }
      },
    };
  };
  return {
    onValidate({ addValidationRule }) {
      addValidationRule(rule);
    },
  };
}

function useNoIntrospection(): Plugin {
  return {
    onValidate({ addValidationRule }) {
      addValidationRule(NoSchemaIntrospectionCustomRule);
    },
  };
}
