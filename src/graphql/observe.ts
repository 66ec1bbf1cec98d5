import { type DocumentNode, type ExecutionResult, getOperationAST } from "graphql";
import type { Plugin } from "graphql-yoga";
import type { Tenant } from "../core/auth.js";
import { recordTenant } from "../middleware/access-log.js";
import type { Metrics, RequestRecord } from "../middleware/metrics.js";

/** The operation's name for logs and metric labels: bounded, and "anonymous" when it has none. */
export function operationLabel(document: DocumentNode | undefined, operationName: string | null | undefined): { name: string; type: string } {
  const op = document ? getOperationAST(document, operationName) : null;
  const name = op?.name?.value ?? operationName ?? "anonymous";
  return { name: name.slice(0, 100), type: op?.operation ?? "unknown" };
}

/** The label of every operation run without credentials (only introspection is). */
const ANONYMOUS_INTROSPECTION = "(anonymous introspection)";

const outcomeOf = (result: ExecutionResult | AsyncIterable<unknown>): "ok" | "error" =>
  Symbol.asyncIterator in result ? "ok" : result.errors && result.errors.length > 0 ? "error" : "ok";

/**
 * For the access log and metrics, over HTTP (queries, mutations, SSE subscriptions): the operation's
 * name and the caller into the request's record, each operation counted by name, type and outcome,
 * and each SSE subscription counted open until it ends. graphql-ws counts its own (ws.ts).
 */
/**
 * The operation's label for metrics; its name also goes into the request's access-log record with its
 * caller. An operation run without credentials (an introspection, as GraphiQL's) is labelled as such,
 * whatever its name: the names metrics label are a bounded set (Metrics.operationExecuted), not for
 * anyone without a key to spend.
 */
function labelled(args: { document: DocumentNode; operationName?: string | null; contextValue: unknown }) {
  const ctx = args.contextValue as { record?: RequestRecord; tenant?: Tenant; introspectionOnly?: boolean };
  const label = operationLabel(args.document, args.operationName);
  if (ctx.record) {
    ctx.record.operationName = label.name;
    if (ctx.tenant) recordTenant(ctx.record, ctx.tenant);
  }
  return ctx.introspectionOnly ? { ...label, name: ANONYMOUS_INTROSPECTION } : label;
}

export function useObservedOperations(metrics: Metrics | null): Plugin {
  return {
    onParams({ params, context }) {
      const record = (context as { record?: RequestRecord }).record;
      if (record && typeof params.operationName === "string") record.operationName = params.operationName.slice(0, 100);
    },
    onExecute({ args }) {
      const { name, type } = labelled(args);
      return {
        onExecuteDone({ result }) {
          metrics?.operationExecuted(name, type, outcomeOf(result));
        },
      };
    },
    onSubscribe({ args }) {
      const { name, type } = labelled(args);
      return {
        onSubscribeResult({ result }) {
          metrics?.operationExecuted(name, type, outcomeOf(result));
          if (!metrics || !(Symbol.asyncIterator in result)) return;
          const closed = metrics.subscriptionOpened("sse");
          return { onEnd: closed };
        },
      };
    },
  };
}

/**
 * A graphql-ws subscription's stream, counted open until it ends (completed, or its socket closed).
 * An iterator rather than an async generator: a generator waiting on the next event would queue
 * return() until that event came, and a quiet subscription would stay counted after its socket closed.
 */
export function countedOpen<T>(stream: AsyncIterable<T>, closed: () => void): AsyncIterableIterator<T> {
  const inner = stream[Symbol.asyncIterator]();
  return {
    [Symbol.asyncIterator]() {
      return this;
    },
    async next() {
      try {
        const result = await inner.next();
        if (result.done) closed();
        return result;
      } catch (err) {
        closed();
        throw err;
      }
    },
    async return(value?: unknown) {
      closed();
      return inner.return ? inner.return(value) : { done: true, value: value as T };
    },
    async throw(err?: unknown) {
      closed();
      if (inner.throw) return inner.throw(err);
      throw err;
    },
  };
}
