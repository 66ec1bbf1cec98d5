import type { ExecutionResult } from "graphql";
import type { Plugin } from "graphql-yoga";
import { keyActor, REVOKED_KEY_MESSAGE, type Tenant } from "../core/auth.js";
import { CoreError } from "../core/errors.js";
import type { Core } from "../core/index.js";
import { toGraphQLError } from "./errors.js";

/** Open streams by actor (Tenant.actor: whose credentials started them). */
type OpenStreams = Map<string, Set<RevocableStream>>;

const DONE: IteratorResult<ExecutionResult> = { value: undefined, done: true };

/**
 * SSE subscriptions end when the API key that started them is revoked, on whichever replica serves
 * them (the revocation reaches every replica's authenticator, over the bus or, on a replica whose bus
 * was reconnecting, when it resyncs): one last result says why, in HTTP's
 * 401 words and code, then the stream completes. A new request with the key is refused by
 * authentication (authenticate.ts); a stream already open would otherwise go on for ever.
 * graphql-ws subscriptions do not pass here: they end with their socket (ws.ts).
 */
export function useEndedOnRevocation(core: Core): Plugin {
  const open: OpenStreams = new Map();
  core.auth.onKeyRevoked((keyId) => {
    const actor = keyActor(keyId);
    const streams = open.get(actor);
    open.delete(actor);
    for (const stream of streams ?? []) stream.revoke();
  });
  return {
    onSubscribe({ args }) {
      const actor = (args.contextValue as { tenant?: Tenant }).tenant?.actor;
      if (!actor) return;
      return {
        onSubscribeResult({ result, setResult }) {
          if (!(Symbol.asyncIterator in result)) return;
          const stream = new RevocableStream(result[Symbol.asyncIterator](), actor, open);
          setResult(stream);
          // Revoked after the request was authenticated and before its stream opened: ended at once.
          if (!core.auth.stillAdmitted(actor)) stream.revoke();
        },
      };
    },
  };
}

/**
 * A subscription's results until its key is revoked, then the refusal, then the end. Revocation does
 * not wait for the next event: a waiting next() answers at once, and the source is released.
 */
class RevocableStream implements AsyncIterableIterator<ExecutionResult> {
  private revoked = false;
  private told = false;
  private wake: () => void = () => {};
  private readonly revocation = new Promise<void>((resolve) => (this.wake = resolve));

  constructor(
    private readonly inner: AsyncIterator<ExecutionResult>,
    private readonly actor: string,
    private readonly open: OpenStreams,
  ) {
    let streams = open.get(actor);
    if (!streams) open.set(actor, (streams = new Set()));
    streams.add(this);
  }

  revoke(): void {
    this.forget();
    this.revoked = true;
    this.wake();
    this.inner.return?.().catch(() => undefined);
  }

  async next(): Promise<IteratorResult<ExecutionResult>> {
    if (!this.revoked) {
      let step;
      try {
        step = await Promise.race([this.inner.next(), this.revocation]);
      } catch (err) {
        this.forget();
        throw err;
      }
      if (!this.revoked) {
        if (step!.done) this.forget();
        return step!;
      }
    }
    if (this.told) return DONE;
    this.told = true;
    return { value: { errors: [toGraphQLError(new CoreError("UNAUTHENTICATED", REVOKED_KEY_MESSAGE))] }, done: false };
  }

  async return(): Promise<IteratorResult<ExecutionResult>> {
    this.forget();
    await this.inner.return?.();
    return DONE;
  }

  async throw(error?: unknown): Promise<IteratorResult<ExecutionResult>> {
    this.forget();
    if (this.inner.throw) return this.inner.throw(error);
    throw error;
  }

  [Symbol.asyncIterator]() {
    return this;
  }

  private forget(): void {
    const streams = this.open.get(this.actor);
    if (!streams?.delete(this) || streams.size > 0) return;
    this.open.delete(this.actor);
  }
}
