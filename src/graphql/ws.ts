import type { Server } from "node:http";
import { type ExecutionArgs, GraphQLError } from "graphql";
import { CloseCode } from "graphql-ws";
import { useServer } from "graphql-ws/use/ws";
import { WebSocketServer } from "ws";
import type { Credentials, Tenant } from "../core/auth.js";
import { CoreError } from "../core/errors.js";
import type { Core } from "../core/index.js";
import type { Logger } from "../logger.js";
import { GRAPHQL_PATH, type GraphQLServer } from "./server.js";

/** Connection params are read like HTTP headers, whatever their case: { "X-Api-Key": "…" }. */
export function credentialsFromParams(params: Readonly<Record<string, unknown>> | undefined): Credentials {
  const lower = new Map(Object.entries(params ?? {}).map(([k, v]) => [k.toLowerCase(), typeof v === "string" ? v : null]));
  return { apiKey: lower.get("x-api-key"), tenantId: lower.get("x-tenant-id"), authorization: lower.get("authorization") };
}

/** The operation's own envelop (yoga's plugins around graphql-js), handed over in rootValue. */
type Envelope = Pick<ReturnType<GraphQLServer["getEnveloped"]>, "execute" | "subscribe">;

export interface WebSocketFace {
  close(): Promise<void>;
}

/**
 * graphql-ws (graphql-transport-ws) on the HTTP server's port at /graphql, running every operation
 * through yoga's envelop (the same plugins, limits, error masking and context as HTTP). The tenant
 * is settled once per connection from its connection params; a connection without valid credentials
 * is closed with 4401 (unauthenticated) or 4403 (forbidden).
 */
export function attachWebSocket(server: Server, yoga: GraphQLServer, core: Core, logger: Logger, production: boolean): WebSocketFace {
  const wss = new WebSocketServer({ server, path: GRAPHQL_PATH });
  const tenants = new WeakMap<object, Tenant>();
  const disposable = useServer(
    {
      isProd: production,
      onConnect: async (ctx) => {
        try {
          tenants.set(ctx.extra.socket, await core.auth.authenticate(credentialsFromParams(ctx.connectionParams)));
          return true;
        } catch (err) {
          if (!(err instanceof CoreError)) throw err;
          ctx.extra.socket.close(err.code === "FORBIDDEN" ? CloseCode.Forbidden : CloseCode.Unauthorized, err.message);
          return false;
        }
      },
      execute: (args) => (args.rootValue as Envelope).execute(args),
      subscribe: (args) => (args.rootValue as Envelope).subscribe(args),
      onSubscribe: async (ctx, _id, payload) => {
        const tenant = tenants.get(ctx.extra.socket);
        const { schema, execute, subscribe, contextFactory, parse, validate } = yoga.getEnveloped({ tenant, params: payload });
        let document;
        try {
          document = parse(payload.query);
        } catch (err) {
          if (err instanceof GraphQLError) return [err];
          throw err;
        }
        const args: ExecutionArgs = {
          schema,
          operationName: payload.operationName,
          document,
          variableValues: payload.variables,
          contextValue: await contextFactory(),
          rootValue: { execute, subscribe },
        };
        const errors = validate(args.schema, args.document);
        return errors.length > 0 ? errors : args;
      },
    },
    wss,
  );
  wss.on("error", (err) => logger.error({ err }, "graphql-ws server error"));
  return {
    async close() {
      await disposable.dispose();
      await new Promise<void>((resolve) => wss.close(() => resolve()));
    },
  };
}
