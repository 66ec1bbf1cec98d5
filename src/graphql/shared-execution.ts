import { createSourceEventStream, type DocumentNode, execute, type ExecutionArgs, type ExecutionResult } from "graphql";
import type { Tenant } from "../core/auth.js";

type Result = ExecutionResult | Promise<ExecutionResult>;

/**
 * Results by event: a feed (core/watch.ts) sends the same event object to every subscriber of an
 * object, so subscribers asking the same question of it (same document, operation, variables and
 * workspace) share one execution instead of running it once each. Weak on the event: the results go
 * when the event does.
 */
const results = new WeakMap<object, Map<DocumentNode, Map<string, Result>>>();

function resultFor(event: unknown, args: ExecutionArgs, key: string | null): Result {
  if (key === null || typeof event !== "object" || event === null) return execute({ ...args, rootValue: event });
  let byDocument = results.get(event);
  if (!byDocument) results.set(event, (byDocument = new Map()));
  let byKey = byDocument.get(args.document);
  if (!byKey) byDocument.set(args.document, (byKey = new Map()));
  let result = byKey.get(key);
  if (!result) byKey.set(key, (result = execute({ ...args, rootValue: event })));
  return result;
}

/** The response stream: each source event executed (or its shared result taken). One object, no closures. */
class ResponseStream implements AsyncIterableIterator<ExecutionResult> {
  constructor(
    private readonly source: AsyncIterator<unknown>,
    private readonly args: ExecutionArgs,
    private readonly key: string | null,
  ) {}

  async next(): Promise<IteratorResult<ExecutionResult>> {
    const step = await this.source.next();
    if (step.done) return { value: undefined, done: true };
    try {
      return { value: await resultFor(step.value, this.args, this.key), done: false };
    } catch (err) {
      // The consumer stops at a rejected next() without calling return(): release the source here.
      await this.source.return?.();
      throw err;
    }
  }

  async return(): Promise<IteratorResult<ExecutionResult>> {
    await this.source.return?.();
    return { value: undefined, done: true };
  }

  async throw(error: unknown): Promise<IteratorResult<ExecutionResult>> {
    await this.source.return?.();
    throw error;
  }

  [Symbol.asyncIterator]() {
    return this;
  }
}

/**
 * graphql-js's subscribe, with each event's result shared between the subscribers that would
 * compute the same one. The workspace is part of what must match: feeds never mix workspaces, and
 * this keeps it so should one ever do.
 */
export async function subscribeShared(args: ExecutionArgs): Promise<AsyncIterableIterator<ExecutionResult> | ExecutionResult> {
  const source = await createSourceEventStream(args);
  if (!(Symbol.asyncIterator in source)) return source;
  const tenant = (args.contextValue as { tenant?: Tenant } | undefined)?.tenant;
  // No tenant, nothing shared (every operation has one: authentication comes first).
  const key = tenant ? JSON.stringify([args.operationName ?? null, args.variableValues ?? null, tenant.workspaceId]) : null;
  return new ResponseStream(source[Symbol.asyncIterator](), args, key);
}
