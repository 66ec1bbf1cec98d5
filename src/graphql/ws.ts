import type { Server } from "node:http";
import { type ExecutionArgs, type ExecutionResult, getOperationAST, GraphQLError } from "graphql";
import { CloseCode, MessageType } from "graphql-ws";
import { useServer } from "graphql-ws/use/ws";
import { type RawData, type WebSocket, WebSocketServer } from "ws";
import { keyActor, REVOKED_KEY_MESSAGE, type Tenant } from "../core/auth.js";
import { EXPIRED_TOKEN_MESSAGE, whenExpired } from "../core/credential-expiry.js";
import { CoreError } from "../core/errors.js";
import type { Core } from "../core/index.js";
import { unavailableAsCoreError } from "../core/prisma-errors.js";
import type { Logger } from "../logger.js";
import { redactSecrets } from "./redact.js";
import { logAnsweredError, maskError, MASKED_ERROR_MESSAGE } from "./masking.js";
import { GRAPHQL_PATH, type GraphQLServer } from "./server.js";
import { subscribeShared } from "./shared-execution.js";
import { countedOpen, operationLabel } from "./observe.js";
import type { Metrics } from "../middleware/metrics.js";
import { authFailuresMessage, type CallerLimits, rateLimitKey } from "../middleware/caller-limits.js";
import { credentialsFrom, paramsAsHeaders } from "../middleware/credentials.js";

/** The operation's own envelop (yoga's plugins around graphql-js), handed over in rootValue. */
type Envelope = Pick<ReturnType<GraphQLServer["getEnveloped"]>, "execute">;

export interface WebSocketFace {
  close(): Promise<void>;
}

/** How attachWebSocket serves: the mode, the limits it shares with HTTP, and its metrics. */
export interface WebSocketOptions {
  production: boolean;
  /**
   * The largest message read, as MAX_BODY_BYTES is for HTTP bodies: a longer one closes the socket
   * (1009) as soon as its frame header announces it, before it is buffered, let alone parsed.
   */
  maxPayloadBytes: number;
  /** The callers' limits, shared with HTTP: each operation is a request; each bad key a failed authentication. */
  limits: CallerLimits;
  /** Operations counted by name, type and outcome; subscriptions counted open. */
  metrics?: Metrics | null;
}

/**
 * graphql-ws (graphql-transport-ws) on the HTTP server's port at /graphql. Every operation is parsed,
 * validated (limits, cost) and given its context by yoga's envelop, as over HTTP; queries and
 * mutations also execute through it. Subscriptions execute on graphql-js directly, each event once
 * for all its subscribers asking the same (shared-execution.ts): envelop's and graphql-tools'
 * iterator layers cost about 6 KB of heap per live subscription, and the one execution-time plugin
 * they would apply, error masking, is applied here with the same function.
 * The credentials of the connection params are checked when the connection opens, then again for
 * each operation, as each HTTP request's are (key lookups are cached; a revocation empties the cache on
 * every replica). Credentials that do not authenticate (none, a revoked key, an expired token) close
 * the socket with 4401 (unauthenticated) or 4403 (forbidden), in HTTP's words. Closing rather than
 * refusing one operation: the credentials are the connection's and cannot be replaced on it, and
 * graphql-ws clients take 4401 as final (no reconnecting with the same credentials) and report it to
 * every operation of the socket, as for a refused connection. A revoked key's sockets are closed at
 * once, on every replica (one whose event bus was reconnecting: once it listens again), a bearer
 * token's at its exp, and their live subscriptions end with them. A database that cannot be reached
 * while a connection authenticates closes it with 1013 (try again later), which clients retry.
 */
export function attachWebSocket(server: Server, yoga: GraphQLServer, core: Core, logger: Logger, options: WebSocketOptions): WebSocketFace {
  const { production } = options;
  // No compression: a status message is a few dozen bytes, and deflate keeps a zlib context per socket.
  const wss = new WebSocketServer({ server, path: GRAPHQL_PATH, perMessageDeflate: false, maxPayload: options.maxPayloadBytes });
  const keepAlive = sharedKeepAlive(wss);
  const { limits } = options;
  /** Each socket's actor (whose credentials opened it): a revoked key's sockets are found by it. */
  const actors = new WeakMap<object, string>();
  /** Each socket's rate-limit bucket: its caller's, as over HTTP (decided once it has authenticated). */
  const callers = new WeakMap<object, string>();
  /** Each socket's client address: where a failed authentication of one of its operations counts. */
  const addresses = new WeakMap<object, string>();
  const mask = (error: GraphQLError) => maskedError(error, production, logger);
  const disposable = useServer(
    {
      isProd: production,
      onConnect: async (ctx) => {
        const address = ctx.extra.request.socket.remoteAddress ?? "unknown";
        // Nothing reads the upgrade request after this; graphql-ws would keep it (and its headers) for
        // the life of the socket.
        Reflect.deleteProperty(ctx.extra, "request");
        const allowed = limits.mayAuthenticate(address);
        if (!allowed.ok) {
          ctx.extra.socket.close(TOO_MANY_FAILURES, authFailuresMessage(limits.authFailuresPerMinute, allowed.retryAfterSeconds));
          return false;
        }
        const credentials = credentialsFrom(paramsAsHeaders(ctx.connectionParams));
        try {
          const tenant = await core.auth.authenticate(credentials);
          actors.set(ctx.extra.socket, tenant.actor);
          // A bearer token's socket closes at its exp, as a revoked key's does at once (below).
          if (tenant.expiresAt !== undefined) {
            const socket = ctx.extra.socket;
            socket.once("close", whenExpired(tenant, () => socket.close(CloseCode.Unauthorized, EXPIRED_TOKEN_MESSAGE)));
          }
          // Authenticated just now, so verified here: the caller's own bucket, the one its HTTP requests
          // draw on (the address's only if a revocation or a resync came during that authentication).
          callers.set(ctx.extra.socket, rateLimitKey(credentials, address, core.auth));
          addresses.set(ctx.extra.socket, address);
          return true;
        } catch (err) {
          const refusal = unavailableAsCoreError(err);
          if (!(refusal instanceof CoreError)) {
            closeOnFault(ctx.extra.socket, err, logger);
            return false;
          }
          if (refusal.code === "UNAVAILABLE") {
            // Neither the client's fault nor a final answer: graphql-ws clients connect again after 1013.
            logger.warn({ reason: (err as Error).message }, "graphql-ws: database unavailable while a connection authenticated");
            ctx.extra.socket.close(TRY_AGAIN_LATER, refusal.message);
            return false;
          }
          if (refusal.code === "UNAUTHENTICATED") limits.authenticationFailed(address);
          refuse(ctx.extra.socket, refusal);
          return false;
        }
      },
      execute: (args) => (args.rootValue as Envelope).execute(args),
      onOperation: (_ctx, _id, _payload, args, operationResult) => {
        // graphql-ws awaits the operation before this hook: never a promise here.
        const result = operationResult as ExecutionResult | AsyncIterable<ExecutionResult>;
        const { name, type } = operationLabel(args.document, args.operationName);
        const streaming = Symbol.asyncIterator in result;
        options.metrics?.operationExecuted(name, type, !streaming && result.errors?.length ? "error" : "ok");
        if (!streaming || !options.metrics) return undefined;
        return countedOpen(result, options.metrics.subscriptionOpened("websocket"));
      },
      subscribe: (args) => subscribeShared(args),
      // Subscription results (and a subscription that fails to start) come here unmasked and unredacted;
      // queries and mutations ran through yoga's envelop (rootValue), which redacted and masked them.
      // Either way, what only HTTP reads (extensions.http) is left out, as yoga does over HTTP.
      onNext: (_ctx, _id, _payload, args, result) => {
        if (!result.errors) return undefined;
        const errors = args.rootValue ? result.errors : redactSecrets(args.schema, args.document, result.errors).map(mask);
        return { ...result, errors: errors.map(withoutHttp) };
      },
      // A stream that fails mid-way (its database read failed) ends with an error message: masked
      // too. Errors without an original (validation) are sent as they are, but for extensions.http.
      onError: (_ctx, _id, _payload, errors) => operationErrors(errors, mask, logger),
      onSubscribe: async (ctx, _id, payload) => {
        const taken = limits.request(callers.get(ctx.extra.socket) ?? "");
        if (!taken.ok) return [rateLimited(limits.ratePerMinute, taken.retryAfterSeconds)];
        let tenant: Tenant;
        try {
          tenant = await core.auth.authenticate(credentialsFrom(paramsAsHeaders(ctx.connectionParams)));
        } catch (err) {
          const refusal = unavailableAsCoreError(err);
          if (!(refusal instanceof CoreError)) {
            closeOnFault(ctx.extra.socket, err, logger);
            return [new GraphQLError(MASKED_ERROR_MESSAGE)];
          }
          // No longer valid (revoked, expired): refused as the connection would be now. A lost
          // database refuses this operation only, with its code (masked in onError), to be retried.
          // A failed authentication, as at connection time (and as a 401 over HTTP).
          if (refusal.code === "UNAUTHENTICATED") limits.authenticationFailed(addresses.get(ctx.extra.socket) ?? "unknown");
          if (refusal.code === "UNAUTHENTICATED" || refusal.code === "FORBIDDEN") refuse(ctx.extra.socket, refusal);
          // Sent only when the socket stays open (a closing socket sends nothing).
          return [new GraphQLError(refusal.message, { originalError: refusal })];
        }
        const { schema, execute, contextFactory, parse, validate } = yoga.getEnveloped({ tenant, params: payload });
        let document;
        try {
          document = parse(payload.query);
        } catch (err) {
          if (err instanceof GraphQLError) return [asParseFailure(err)];
          throw err;
        }
        const operation = getOperationAST(document, payload.operationName);
        const args: ExecutionArgs = {
          schema,
          operationName: payload.operationName,
          document,
          variableValues: payload.variables,
          contextValue: await contextFactory(),
          // A live subscription keeps its arguments: it need not keep the envelope as well.
          rootValue: operation?.operation === "subscription" ? undefined : { execute },
        };
        let errors: readonly GraphQLError[];
        try {
          errors = validate(args.schema, args.document);
        } catch (err) {
          // A rule that throws on a client's document (graphql-js 16 has one, see subscription-root.ts):
          // that operation's error, not the socket's end (4500).
          if (err instanceof GraphQLError) return [err];
          throw err;
        }
        if (errors.length > 0) return [...errors];
        // graphql-ws would say so without a code: said as yoga says it over HTTP.
        return operation ? args : [UNRESOLVED_OPERATION];
      },
    },
    wss,
    // Off: graphql-ws would keep a ping interval (and its closures) per socket; one timer pings all.
    0,
  );
  // On every replica: the revocation reaches each one's authenticator over the event bus.
  const stopClosingRevoked = core.auth.onKeyRevoked((keyId) => {
    const actor = keyActor(keyId);
    for (const socket of wss.clients) {
      if (actors.get(socket) === actor) socket.close(CloseCode.Unauthorized, REVOKED_KEY_MESSAGE);
    }
  });
  wss.on("error", (err) => logger.error({ err }, "graphql-ws server error"));
  // graphql-ws writes every socket error to stderr (console.error): any client could flood it with
  // oversize or malformed frames. ws closes such a socket itself (1009, 1002): a client's mistake.
  wss.on("connection", (socket) => {
    socket.removeAllListeners("error");
    socket.on("error", (err) => logger.info({ reason: err.message }, "graphql-ws: closed a connection that broke the protocol"));
    refuseServerMessages(socket, logger);
  });
  return {
    async close() {
      stopClosingRevoked();
      keepAlive.stop();
      await disposable.dispose();
      await new Promise<void>((resolve) => wss.close(() => resolve()));
    },
  };
}

/** A socket's own write failing (EPIPE, ECONNRESET on "write"): Node's system error, which no database error is unwrapped to here. */
const isWriteError = (err: unknown): boolean => typeof err === "object" && err !== null && (err as NodeJS.ErrnoException).syscall === "write";

/**
 * The errors an operation ends with (graphql-ws's onError), as sent: masked, but for an error that
 * only says that sending a result failed because the client went away (its socket reset or closed,
 * graphql-ws reports it here too). Nothing more arrives there, and it is the client's doing, not a
 * lost database, which its ECONNRESET would otherwise be taken for: logged at info.
 */
export function operationErrors(errors: readonly GraphQLError[], mask: (error: GraphQLError) => GraphQLError, logger: Logger): GraphQLError[] {
  if (errors.some((e) => isWriteError(e.originalError))) {
    logger.info({ reason: errors[0]?.message }, "graphql-ws: the client went away while a result was sent");
    return errors.map(withoutHttp);
  }
  return errors.map((e) => withoutHttp(e.originalError ? mask(e) : e));
}

/** A document of several operations without an operationName (or with one it does not define). */
const UNRESOLVED_OPERATION = new GraphQLError("Could not determine what operation to execute.", { extensions: { code: "OPERATION_RESOLUTION_FAILURE" } });

/** The protocol's messages only a server sends. */
const SERVER_MESSAGES: ReadonlySet<unknown> = new Set([MessageType.ConnectionAck, MessageType.Next, MessageType.Error]);

/**
 * A client that sends a message only a server sends (connection_ack, next, error) breaks the
 * protocol: closed with 4400, as for any message graphql-ws cannot read. graphql-ws reads them as
 * valid and then throws on them, closing with 4500 (a server fault) and writing the error and its
 * stack to stderr, which any client could flood. The message listener graphql-ws attached (the
 * socket's only one, added just before this) is called for every other message, in order.
 */
function refuseServerMessages(socket: WebSocket, logger: Logger): void {
  const handlers = socket.listeners("message") as ((data: RawData, isBinary: boolean) => void)[];
  socket.removeAllListeners("message");
  socket.on("message", (data, isBinary) => {
    if (SERVER_MESSAGES.has(messageType(data))) {
      logger.info("graphql-ws: closed a connection that sent a message only a server sends");
      socket.close(CloseCode.BadRequest, "Invalid message received");
      return;
    }
    for (const handler of handlers) handler.call(socket, data, isBinary);
  });
}

/** Where a message might be of a server's type: only such text is parsed here (graphql-ws parses every message itself). */
const SERVER_TYPE_TEXT = /"(connection_ack|next|error)"/;

/** A message's `type`, or undefined when it is not a JSON object (graphql-ws refuses those itself). */
function messageType(data: RawData): unknown {
  const text = String(data);
  if (!SERVER_TYPE_TEXT.test(text)) return undefined;
  try {
    const message: unknown = JSON.parse(text);
    return typeof message === "object" && message !== null ? (message as { type?: unknown }).type : undefined;
  } catch {
    return undefined;
  }
}

/** An error as yoga masks it over HTTP: core codes kept, internals hidden; logged as yoga logs it. */
function maskedError(error: GraphQLError, production: boolean, logger: Logger): GraphQLError {
  const shown = maskError(error, MASKED_ERROR_MESSAGE, !production) as GraphQLError;
  if (shown !== error) logAnsweredError(logger, error.originalError ?? error, shown);
  return shown;
}

/** Closes a socket whose credentials do not authenticate: 4401 or 4403, with HTTP's words for its 401 or 403. */
function refuse(socket: WebSocket, refusal: CoreError): void {
  socket.close(refusal.code === "FORBIDDEN" ? CloseCode.Forbidden : CloseCode.Unauthorized, refusal.message);
}

/**
 * A fault of the service's own (a bug, not the client's doing nor a lost database): logged with its
 * details, the socket closed as graphql-ws would (4500) but without its message, and without
 * graphql-ws's own report, which writes the raw error to stderr around the service's log.
 */
function closeOnFault(socket: WebSocket, err: unknown, logger: Logger): void {
  logger.error({ err }, "graphql-ws: unexpected error");
  socket.close(CloseCode.InternalServerError, "Internal server error");
}

/** WebSocket's "Try Again Later": graphql-ws clients connect again after it (4500 they take as final). */
const TRY_AGAIN_LATER = 1013;

/** The close code of a socket whose address has spent its failed authentications (429, as over HTTP). */
const TOO_MANY_FAILURES = 4429;

/** An operation past its caller's rate: refused, the socket kept, with when to retry. */
const rateLimited = (perMinute: number, retryAfterSeconds: number) =>
  new GraphQLError(`Rate limit exceeded: ${perMinute} requests at once, then ${perMinute} a minute. Retry after ${retryAfterSeconds} s.`, {
    extensions: { code: "RATE_LIMITED", retryAfter: retryAfterSeconds },
  });

/** An error without extensions.http (a status and headers for yoga's HTTP answer). */
function withoutHttp(error: GraphQLError): GraphQLError {
  if (!error.extensions?.http) return error;
  const { http: _http, ...extensions } = error.extensions;
  return new GraphQLError(error.message, { nodes: error.nodes, source: error.source, positions: error.positions, path: error.path, originalError: error.originalError, extensions });
}

const KEEP_ALIVE_MS = 12_000;
/** Sockets pinged and not yet answered: one Set and one listener function shared by every socket. */
const awaitingPong = new WeakSet<WebSocket>();
function pong(this: WebSocket) {
  awaitingPong.delete(this);
}

/**
 * Finds dead peers (a laptop closed mid-subscription) with one interval for the whole server: each
 * round pings every socket and drops those that did not answer the previous round's ping.
 */
function sharedKeepAlive(wss: WebSocketServer): { stop(): void } {
  wss.on("connection", (socket) => socket.on("pong", pong));
  const timer = setInterval(() => {
    for (const socket of wss.clients) {
      if (socket.readyState !== socket.OPEN) continue;
      if (awaitingPong.has(socket)) {
        socket.terminate();
        continue;
      }
      awaitingPong.add(socket);
      socket.ping();
    }
  }, KEEP_ALIVE_MS);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}

/**
 * A syntax error as yoga marks it over HTTP (GRAPHQL_PARSE_FAILED, 400), in place: yoga's parse
 * cache keeps one error object per text for both faces, and marks it only when an HTTP request
 * parses it (usePreventMutationViaGET). Unmarked here, the text then answered HTTP as BAD_USER_INPUT.
 */
function asParseFailure(error: GraphQLError): GraphQLError {
  const extensions = error.extensions as Record<string, unknown>;
  extensions.code ??= "GRAPHQL_PARSE_FAILED";
  extensions.http ??= { spec: true, status: 400 };
  return error;
}
